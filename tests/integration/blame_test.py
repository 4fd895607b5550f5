#!/usr/bin/python3
"""Integration: only a worker's own failure counts against it. Clients that leave while kvrouter
connects to a worker, or while the worker prepares its answer, are the client's doing: the
worker keeps its health and its failure count. A worker that breaks before any body is its own
failure, and the retried request is counted as proxied once. Usage: blame_test.py PATH/TO/kvrouter"""
import socket
import sys
import time

from router_harness import Failures, Router, Worker, wait_for

kvrouter = sys.argv[1]
f = Failures()
cleanup = []


def blackhole():
    """A listener whose accept queue is full: connects to it hang (SYNs are dropped)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        fillers.append(s)
    time.sleep(0.2)
    probe = socket.socket()
    probe.settimeout(0.5)
    hangs = probe.connect_ex(("127.0.0.1", port)) != 0
    cleanup.extend([listener, probe, *fillers])
    return port, hangs


def leave_early(router, after, path="/v1/chat/completions"):
    """Sends a chat request and closes the connection `after` seconds later, unanswered."""
    body = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'
    s = socket.create_connection(("127.0.0.1", router.port))
    s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    time.sleep(after)
    s.close()


def worker_metric(router, name, worker):
    return router.worker_gauge(name, worker)


def after_snapshot():
    time.sleep(1.3)  # the scorer publishes its status about once a second


routers = []
workers = []
try:
    # -- a client leaving while kvrouter still connects to the worker
    port, hangs = blackhole()
    f.check(hangs, "a listener with a full accept queue makes connects hang (the test's premise)")
    router = Router(kvrouter, "m", [f"http://127.0.0.1:{port},id=hole"], "--router-mode", "kv",
                    "--health-interval-ms", "0")
    routers.append(router)
    for _ in range(10):
        leave_early(router, 0.2)
    after_snapshot()
    f.check(worker_metric(router, "kvrouter_worker_failures_total", "hole") == 0,
            "clients that left while kvrouter was connecting count no failure against the worker")
    f.check(worker_metric(router, "kvrouter_worker_healthy", "hole") == 1, "... and the worker stays healthy")
    f.check(router.metrics()["kvrouter_client_disconnects_total"] == 10, "... each departure is counted as the client's")
    f.check(worker_metric(router, "kvrouter_worker_active_requests", "hole") == 0, "... and no booking is left behind")
    # The control: a patient client waits out the connect timeout; that failure is the worker's.
    status, _, _ = router.chat()
    after_snapshot()
    f.check(status == 502, f"a worker that cannot be connected to within the timeout fails the request (got {status})")
    f.check(worker_metric(router, "kvrouter_worker_failures_total", "hole") == 1, "... and that failure counts against it")

    # -- a client leaving while the worker prepares its answer (both routing paths)
    for mode in ("kv", "round-robin"):
        thinker = Worker("thinker", "--first-delay", "1.0")
        workers.append(thinker)
        router = Router(kvrouter, "m", [f"{thinker.url},id=thinker"], "--router-mode", mode, "--health-interval-ms", "0")
        routers.append(router)
        for _ in range(5):
            leave_early(router, 0.2)
        after_snapshot()
        f.check(worker_metric(router, "kvrouter_worker_failures_total", "thinker") == 0,
                f"{mode}: clients that left while the worker was busy count no failure against it")
        status, _, _ = router.chat()
        f.check(status == 200, f"{mode}: the worker still takes a patient client's request (got {status})")

    # -- a worker that breaks after its head: its failure, retried elsewhere, proxied once
    breaker = Worker("breaker", "--break-after-head")
    good = Worker("good")
    workers += [breaker, good]
    router = Router(kvrouter, "m", [f"{breaker.url},id=breaker", f"{good.url},id=good"], "--router-mode", "round-robin",
                    "--health-interval-ms", "0", "--unhealthy-backoff-ms", "0")
    routers.append(router)
    statuses = [router.chat()[0] for _ in range(4)]
    f.check(statuses == [200] * 4, f"requests the breaking worker took are retried on the good one (got {statuses})")
    m = router.metrics()
    f.check(m["kvrouter_proxied_requests_total"] == 4,
            f"each request is counted as proxied once, retried or not (got {m['kvrouter_proxied_requests_total']})")
    f.check(m["kvrouter_retries_total"] >= 1, "... and the retries are counted")
    # The client may read the last answer's bytes before kvrouter's write of them completes and
    # counts the answer ended: on a loaded machine /metrics can come in between.
    f.check(bool(wait_for(lambda: router.metrics()["kvrouter_proxied_requests_in_flight"] == 0, 5)),
            "... with nothing left in flight")
    after_snapshot()
    f.check(worker_metric(router, "kvrouter_worker_failures_total", "breaker") == m["kvrouter_retries_total"],
            "... and every break counts against the breaking worker")
finally:
    for r in routers:
        r.stop()
    for w in workers:
        w.stop()
    for s in cleanup:
        s.close()
f.exit()
