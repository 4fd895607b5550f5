#!/usr/bin/python3
"""Integration: prefill/decode disaggregation, vLLM NIXL protocol, end to end on loopback.

kvrouter serves set "pd": two kvrouter-mockers with --role prefill (p0, p1) and two with
--role decode (d0, d1). A request's prefill leg (one token, no stream, kv_transfer_params asking
for a remote decode) goes to a prefill mocker, which leases the prompt's blocks and answers with
the params; kvrouter sends the client's body plus those params to a decode mocker, which pulls
the blocks over HTTP, checks their hashes against its own, then decodes and streams.

1. Chats (streamed and not) and completions answer exactly what one aggregated mocker answers
   for the same prompt, from a decode worker; the decode mockers pulled every prompt and got
   the prefill's params; nothing failed a transfer.
2. A prompt's prefill leg goes to the prefill worker that cached it (dry run shows the pair).
3. `n: 2` runs aggregated on a decode worker.
4. Every booking returns to zero after successes and failures.
5. Prefill faults, against a fake prefill server: no params (aggregate: runs on the decode
   worker; fail: 502), an error status (the client gets it), no answer (504 after
   --pd-timeout-secs), a client that leaves during the prefill (released, nobody blamed).
6. A prefill worker gone: the request is retried on a new pair, every answer 200.
7. /metrics counts the paths and the faults.

Usage: disaggregation_test.py PATH/TO/kvrouter PATH/TO/kvrouter-mocker
"""
import http.server
import json
import os
import socket
import sys
import tempfile
import threading
import time

from pd_harness import answer_text, busy_workers, chat_body, compare_with_aggregated, direct, generation_cases
from router_harness import Failures, Mocker, Router, wait_for

kvrouter, mocker_binary = sys.argv[1], sys.argv[2]
f = Failures()


class FakePrefill(http.server.BaseHTTPRequestHandler):
    """A prefill worker misbehaving as the model name says."""
    protocol_version = "HTTP/1.1"
    hung = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        model = body.get("model")
        if model == "fake-hang":
            FakePrefill.hung.append(body)
            time.sleep(20)
            return
        if model == "fake-500":
            answer, status = {"error": {"message": "prefill engine failed", "type": "InternalServerError", "code": 500}}, 500
        else:  # fake-agg, fake-fail: a 200 without kv_transfer_params
            answer, status = {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"content": "a"}}]}, 200
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):  # health checks
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


flags = ("--model", "pd", "--block-size", "16", "--speedup", "20")
mockers = {"p0": Mocker(mocker_binary, *flags, "--role", "prefill"), "p1": Mocker(mocker_binary, *flags, "--role", "prefill"),
           "d0": Mocker(mocker_binary, *flags, "--role", "decode"), "d1": Mocker(mocker_binary, *flags, "--role", "decode")}
reference = Mocker(mocker_binary, *flags)  # aggregated, for the expected answers
fake = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakePrefill)
fake.daemon_threads = True
threading.Thread(target=fake.serve_forever, daemon=True).start()
fake_url = f"http://127.0.0.1:{fake.server_address[1]}"
router = None
try:
    def pd_set(name, prefill_urls, decode_names, missing="aggregate"):
        workers = [{"id": f"{name}-prefill{i}", "url": url, "role": "prefill"} for i, url in enumerate(prefill_urls)]
        workers += [{"id": d if name == "pd" else f"{name}-{d}", "url": mockers[d].url, "role": "decode"} for d in decode_names]
        return {"name": name, "model": name, "block_size": 16, "workers": workers,
                "disaggregation": {"protocol": "vllm-nixl", "missing_params": missing},
                "router_config": {"router_mode": "kv", "use_kv_events": False}}
    config = os.path.join(tempfile.mkdtemp(), "sets.json")
    sets = [pd_set("pd", [mockers["p0"].url, mockers["p1"].url], ["d0", "d1"])]
    for name, missing in (("fake-agg", "aggregate"), ("fake-fail", "fail"), ("fake-500", "aggregate"), ("fake-hang", "aggregate")):
        sets.append(pd_set(name, [fake_url], ["d0"], missing))
    sets[0]["workers"][0]["id"], sets[0]["workers"][1]["id"] = "p0", "p1"
    with open(config, "w") as out:
        json.dump({"worker_sets": sets}, out)
    router = Router(kvrouter, None, [], "--config", config, "--pd-timeout-secs", "1", "--engine-metrics-interval-ms", "0")

    # 1. Answers equal the aggregated ones; the decode side pulled what the prefill side leased.
    cases = generation_cases("pd", "tell me about")
    same, workers_seen = compare_with_aggregated(router, reference, cases)
    f.check(all(same), f"disaggregated answers equal one aggregated worker's for the same prompts ({same})")
    f.check(workers_seen <= {"d0", "d1"}, f"and come from a decode worker ({workers_seen})")
    pd_stats = {name: json.loads(mockers[name].request("GET", "/mocker/pd")[1]) for name in mockers}
    pulled = pd_stats["d0"]["remote_prefills"] + pd_stats["d1"]["remote_prefills"]
    legs = pd_stats["p0"]["prefill_legs"] + pd_stats["p1"]["prefill_legs"]
    f.check(pulled == len(cases) and legs == len(cases),
            f"every prefill leg leased its blocks and every decode leg pulled and matched them ({legs} legs, {pulled} pulls)")
    failures = pd_stats["d0"]["transfer_failures"] + pd_stats["d1"]["transfer_failures"]
    last = [pd_stats[d]["last_kv_transfer_params"] for d in ("d0", "d1") if pd_stats[d]["last_kv_transfer_params"]]
    f.check(failures == 0 and last and all(p.get("do_remote_prefill") is True and p.get("remote_request_id", "").startswith("xfer-")
                                           for p in last),
            f"the decode workers got the prefill's kv_transfer_params ({last[:1]}, {failures} transfer failures)")

    # 2. The prefill leg follows the cached prefix.
    # (token-id prompts: the sets have no tokenizer, so text is not hashed)
    prefix = list(range(7000, 7000 + 64))
    status, headers, _ = router.request("POST", "/v1/completions", {"model": "pd", "prompt": prefix + [1, 2], "max_tokens": 4})
    status, _, body = router.request("POST", "/v1/completions", {"model": "pd", "prompt": prefix + [3, 4], "max_tokens": 4},
                                     {"x-kvrouter-dry-run": "1"})
    decision = json.loads(body)
    first_prefill = wait_for(lambda: [n for n in ("p0", "p1")
                                      if json.loads(mockers[n].request("GET", "/mocker/pd")[1])["prefill_legs"] > pd_stats[n]["prefill_legs"]], 5)
    f.check(status == 200 and decision.get("prefill_worker") in first_prefill and decision["prefill_overlap_blocks"] == 4 and
            decision["worker"] in ("d0", "d1"),
            f"a prompt's prefill goes to the prefill worker caching its prefix (dry run: {decision.get('prefill_worker')} with "
            f"{decision.get('prefill_overlap_blocks')} blocks, decode {decision.get('worker')}; first went to {first_prefill})")

    # 3. n > 1 runs aggregated on a decode worker.
    before = router.metrics()
    status, headers, _ = router.request("POST", "/v1/chat/completions", chat_body("pd", "two choices please", n=2))
    after = router.metrics()
    f.check(status == 200 and headers.get("x-kvrouter-worker") in ("d0", "d1") and
            after['kvrouter_pd_requests_total{path="aggregated_fallback"}'] == before['kvrouter_pd_requests_total{path="aggregated_fallback"}'] + 1,
            f"a request for two choices runs aggregated on a decode worker ({status} {headers.get('x-kvrouter-worker')})")

    # 5. Prefill faults.
    status, headers, data = router.request("POST", "/v1/chat/completions", chat_body("fake-agg", "no params here"))
    expected = answer_text(*direct(reference, "/v1/chat/completions", chat_body("fake-agg", "no params here")), False)
    f.check(status == 200 and answer_text(status, data, False) == expected,
            f"missing_params aggregate: a prefill answer without params runs the request whole on the decode worker ({status})")
    status, _, data = router.request("POST", "/v1/chat/completions", chat_body("fake-fail", "no params here"))
    f.check(status == 502 and "kv_transfer_params" in json.loads(data)["error"]["message"],
            f"missing_params fail: 502 naming the missing params ({status} {data[:120]})")
    status, _, data = router.request("POST", "/v1/chat/completions", chat_body("fake-500", "x"))
    f.check(status == 500 and json.loads(data)["error"]["message"] == "prefill engine failed",
            f"a prefill error status is the client's answer, as the worker gave it ({status} {data[:100]})")
    started = time.time()
    status, _, data = router.request("POST", "/v1/chat/completions", chat_body("fake-hang", "x", stream=True))
    took = time.time() - started
    f.check(status == 504 and took < 4 and "prefill worker" in json.loads(data)["error"]["message"],
            f"a prefill leg without an answer is cut after --pd-timeout-secs: 504 ({status} after {took:.1f} s)")
    # A client leaving during its prefill leg.
    hung_before = len(FakePrefill.hung)
    s = socket.create_connection(("127.0.0.1", router.port))
    payload = json.dumps(chat_body("fake-hang", "leaving")).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
              str(len(payload)).encode() + b"\r\n\r\n" + payload)
    wait_for(lambda: len(FakePrefill.hung) > hung_before, 5)
    s.close()
    time.sleep(0.3)

    # 4. Every booking is back to zero (a dry run per set sees every worker idle).
    def busy():
        return busy_workers(router, ("pd", "fake-agg", "fake-fail", "fake-500", "fake-hang"))
    left = wait_for(lambda: not busy(), 3)
    f.check(left, f"after successes, faults, timeouts and a departed client every booking is released ({busy()})")
    metrics = router.metrics()
    f.check(metrics["kvrouter_pd_missing_transfer_params_total"] >= 2 and metrics["kvrouter_pd_prefill_timeouts_total"] >= 1 and
            metrics["kvrouter_pd_prefill_error_statuses_total"] >= 1 and
            metrics['kvrouter_pd_requests_total{path="disaggregated"}'] >= len(cases) + 1 and
            metrics["kvrouter_pd_prefill_seconds_count"] >= len(cases),
            "/metrics counts the paths, the missing params, the error statuses and the timeouts")
    f.check(metrics.get('kvrouter_worker_failures_total{set="fake-hang",model="fake-hang",worker="fake-hang-prefill0"}', 0) == 0,
            "a timed-out or abandoned prefill leg does not mark its worker failed")

    # 6. A prefill worker gone: retried on a new pair.
    mockers["p1"].stop()
    statuses = [router.request("POST", "/v1/chat/completions", chat_body("pd", f"after p1 left {i} " * 5))[0] for i in range(6)]
    f.check(statuses == [200] * 6, f"with a prefill worker gone, its requests are retried on a new pair ({statuses})")
    f.check(wait_for(lambda: not busy(), 3), "and their bookings are released too")
    f.check(router.stop() == 0, "kvrouter stops cleanly")
finally:
    if router and router.proc.poll() is None:
        router.proc.kill()
    for m in list(mockers.values()) + [reference]:
        if m.proc.poll() is None:
            m.stop()
    fake.shutdown()
f.exit()
