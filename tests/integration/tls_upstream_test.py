#!/usr/bin/python3
"""Integration: https:// workers. kvrouter proxies to them over TLS, polls their /health and
/metrics over TLS, and verifies them as a browser would: a chain to a CA it trusts (the
system's, or --worker-ca-file) and the certificate's names against the URL's host.

Certificates are made here with the openssl command: a test CA, a worker certificate for
localhost and 127.0.0.1 signed by it, one for another name signed by it, and a self-signed one.

1. With --worker-ca-file: chats (whole and streamed) reach the worker at https://localhost:P and
   https://127.0.0.1:P, over kept-alive connections; health probes and engine scrapes succeed.
2. A worker whose certificate names another host, and one whose certificate no trusted CA
   signed, fail their handshakes: they are reported down with the verification's reason, and
   requests go to the good worker. Without any trust in the CA a request gets 502 naming TLS.
3. Without --worker-ca-file the system's trust store is used (SSL_CERT_FILE points it at the
   test CA here).
4. A --worker-ca-file that cannot be read stops start-up with exit 2, naming it.

Usage: tls_upstream_test.py PATH/TO/kvrouter
"""
import json
import os
import subprocess
import sys
import tempfile

from router_harness import Failures, Router, Worker, wait_for

kvrouter = sys.argv[1]
f = Failures()
tmp = tempfile.mkdtemp()


def openssl(*args):
    subprocess.run(["openssl", *args], cwd=tmp, check=True, capture_output=True)


def key(name):
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", f"{name}.key")


def signed_cert(name, san):
    key(name)
    openssl("req", "-new", "-key", f"{name}.key", "-subj", f"/CN={name}", "-out", f"{name}.csr")
    with open(os.path.join(tmp, f"{name}.ext"), "w") as ext:
        ext.write(f"subjectAltName={san}\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem")


key("ca")
openssl("req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=kvrouter test CA", "-days", "2", "-out", "ca.pem")
signed_cert("good", "DNS:localhost,IP:127.0.0.1")
signed_cert("misnamed", "DNS:elsewhere.example")
key("untrusted")
openssl("req", "-x509", "-new", "-key", "untrusted.key", "-subj", "/CN=localhost", "-days", "2",
        "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-out", "untrusted.pem")
ca = os.path.join(tmp, "ca.pem")


def tls_worker(name, cert):
    return Worker(name, "--tls-cert", os.path.join(tmp, f"{cert}.pem"), "--tls-key", os.path.join(tmp, f"{cert}.key"))


def live(router):
    return {w["name"]: w for w in json.loads(router.request("GET", "/v1/router/sets")[2])["sets"][0]["live"]["workers"]}


POLLS = ["--health-interval-ms", "100", "--engine-metrics-interval-ms", "100"]
workers = {name: tls_worker(name, name) for name in ("good", "misnamed", "untrusted")}
workers["good"].set_metrics('vllm:num_requests_waiting{engine="0"} 0\nvllm:num_requests_running{engine="0"} 1\n')
router = None
try:
    # 1. A trusted worker, by name and by address.
    good = workers["good"]
    router = Router(kvrouter, "m", [f"https://localhost:{good.port},id=by-name", f"https://127.0.0.1:{good.port},id=by-ip"],
                    "--router-mode", "round-robin", "--worker-ca-file", ca, *POLLS)
    answers = [router.chat(content=f"over TLS {i}") for i in range(6)]
    f.check(all(status == 200 for status, _, _ in answers) and
            {headers.get("x-kvrouter-worker") for _, headers, _ in answers} == {"by-name", "by-ip"},
            f"chats reach the https worker by host name and by IP ({[a[0] for a in answers]})")
    status, _, body = router.chat(stream=True, content="a streamed answer")
    f.check(status == 200 and body.decode().rstrip().endswith("data: [DONE]"), "a streamed answer comes through whole")
    scraped = wait_for(lambda: all(w["engine"] for w in live(router).values()), 5)
    workers_live = live(router)
    f.check(bool(scraped) and all(w["healthy"] for w in workers_live.values()),
            f"health probes and engine scrapes reach it over TLS ({workers_live})")
    m = router.metrics()
    f.check(m['kvrouter_set_engine_scrape_failures_total{set="m",model="m"}'] == 0, "no scrape failed")
    f.check(router.stop() == 0, "kvrouter stops cleanly")

    # 2. Certificates that do not prove the worker.
    router = Router(kvrouter, "m", [f"https://localhost:{workers[n].port},id={n}" for n in ("misnamed", "untrusted", "good")],
                    "--router-mode", "round-robin", "--worker-ca-file", ca, *POLLS)
    f.check(router.wait_for_log("worker misnamed") and router.wait_for_log("worker untrusted"),
            "the two workers are reported down")
    log = router.log
    f.check("is down: GET /health: TLS handshake: certificate verify failed (hostname mismatch)" in log,
            f"the misnamed worker's reason is told ({log[-600:]})")
    f.check("certificate verify failed (self-signed certificate)" in log, "the untrusted worker's too")

    picks = [router.chat(content=f"pick {i}")[1].get("x-kvrouter-worker") for i in range(6)]
    f.check(picks == ["good"] * 6, f"requests go to the worker whose certificate holds ({picks})")
    f.check(workers["misnamed"].stats()["requests"] == 0 and workers["untrusted"].stats()["requests"] == 0,
            "no request reached a worker whose certificate failed")
    router.stop()
    router = Router(kvrouter, "m", [f"https://127.0.0.1:{workers['misnamed'].port},id=ip"], *POLLS, "--worker-ca-file", ca)
    f.check(router.wait_for_log("TLS handshake: certificate verify failed (IP address mismatch)"),
            "an https URL by IP needs the address in the certificate")
    router.stop()
    router = Router(kvrouter, "m", [f"https://localhost:{good.port},id=good"], "--health-interval-ms", "0",
                    "--engine-metrics-interval-ms", "0", "--max-retries", "0")
    status, _, body = router.chat()
    f.check(status == 502 and b"TLS handshake" in body and b"certificate verify failed" in body,
            f"a worker nobody vouches for: 502 naming the TLS failure ({status} {body[:200]})")
    router.stop()

    # 3. The system's trust store.
    os.environ["SSL_CERT_FILE"] = ca
    router = Router(kvrouter, "m", [f"https://localhost:{good.port},id=good"], "--health-interval-ms", "0",
                    "--engine-metrics-interval-ms", "0")
    del os.environ["SSL_CERT_FILE"]
    f.check(router.chat()[0] == 200, "without --worker-ca-file, the system's CAs are trusted")
    before = good.stats()
    for i in range(10):
        router.chat(content=f"again {i}")
    opened = good.stats()["connections"] - before["connections"]
    f.check(opened <= 2, f"TLS connections to the worker are kept alive across requests ({opened} opened for 10 "
                         "requests; one pool per I/O thread, 2 threads)")
    router.stop()
    router = None

    # 4. A CA file that is not there.
    result = subprocess.run([kvrouter, "--model", "m", "--worker", f"https://localhost:{good.port}", "--port", "0",
                             "--worker-ca-file", os.path.join(tmp, "missing.pem")], capture_output=True, text=True, timeout=20)
    f.check(result.returncode == 2 and "cannot load the worker CA file" in result.stderr and "missing.pem" in result.stderr,
            f"a CA file that cannot be read: exit 2 naming it ({result.returncode}: {result.stderr.strip()[-200:]})")
    result = subprocess.run([kvrouter, "--model", "m", "--worker", f"https://localhost:{good.port}", "--port", "0",
                             "--worker-ca-file", os.path.join(tmp, "good.key")], capture_output=True, text=True, timeout=20)
    f.check(result.returncode == 2 and "holds no PEM certificate" in result.stderr,
            f"nor one without a certificate ({result.returncode}: {result.stderr.strip()[-200:]})")
finally:
    if router and router.proc.poll() is None:
        router.proc.kill()
    for w in workers.values():
        w.stop()
f.exit()
