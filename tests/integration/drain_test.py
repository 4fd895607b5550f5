#!/usr/bin/python3
"""Integration: SIGTERM drains kvrouter as a rolling update needs.

1. A stream in flight at SIGTERM completes in full; /ready answers 503 "draining" at once (on a
   connection accepted during --drain-delay-secs, answered with Connection: close); an idle
   keep-alive connection is closed; after the delay new connections are refused; the process
   exits 0 soon after the stream ends, well inside the grace period.
2. A second SIGTERM exits at once, cutting the stream.
3. A stream longer than --shutdown-grace-secs is cut when the grace is over.
Usage: drain_test.py PATH/TO/kvrouter"""
import http.client
import json
import signal
import socket
import sys
import threading
import time

from router_harness import Failures, Router, Worker

kvrouter = sys.argv[1]
f = Failures()


def stream_in_background(router, result):
    """Starts a streaming chat; `result` gets the time of its first chunk, its body and errors."""
    def run():
        try:
            c = http.client.HTTPConnection("127.0.0.1", router.port, timeout=30)
            c.request("POST", "/v1/chat/completions", body=json.dumps(
                {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}),
                headers={"Content-Type": "application/json"})
            r = c.getresponse()
            first = r.read1(65536)
            result["first"] = time.time()
            rest = b""
            while True:
                chunk = r.read1(65536)
                if not chunk:
                    break
                rest += chunk
            result["body"] = first + rest
        except (OSError, http.client.HTTPException) as e:
            result["error"] = type(e).__name__
        result["end"] = time.time()
    t = threading.Thread(target=run)
    t.start()
    deadline = time.time() + 10
    while "first" not in result and "error" not in result and time.time() < deadline:
        time.sleep(0.02)
    return t


def wait_exit(router, timeout):
    try:
        return router.proc.wait(timeout=timeout)
    except Exception:
        return None


# 10 chunks, 0.3 s apart: a stream of about 3 s.
worker = Worker("w0", "--chunks", "10", "--chunk-delay", "0.3")
try:
    # 1. A graceful drain.
    router = Router(kvrouter, "m", [worker.url], "--drain-delay-secs", "1", "--shutdown-grace-secs", "20")
    idle = http.client.HTTPConnection("127.0.0.1", router.port, timeout=5)
    idle.request("GET", "/health")
    idle.getresponse().read()  # now an idle keep-alive connection
    result = {}
    t = stream_in_background(router, result)
    f.check("first" in result, "the stream started before SIGTERM")
    signalled = time.time()
    router.proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    c = http.client.HTTPConnection("127.0.0.1", router.port, timeout=5)
    c.request("GET", "/ready")
    r = c.getresponse()
    body = r.read()
    f.check(r.status == 503 and json.loads(body)["status"] == "draining" and r.getheader("Connection") == "close",
            f"during the delay a new connection is served: /ready 503 draining, Connection: close ({r.status} {body})")
    try:
        idle.request("GET", "/health")
        idle_answer = idle.getresponse().status
    except (OSError, http.client.HTTPException):
        idle_answer = None
    f.check(idle_answer is None, f"the idle keep-alive connection was closed ({idle_answer})")
    time.sleep(1.2)
    try:
        socket.create_connection(("127.0.0.1", router.port), timeout=1).close()
        refused = False
    except OSError:
        refused = True
    f.check(refused, "after the delay new connections are refused")
    t.join()
    f.check(result.get("body", b"").count(b"data: ") >= 10 and b"[DONE]" in result.get("body", b""),
            f"the stream in flight completed in full ({result.get('error')}, {len(result.get('body', b''))} bytes)")
    code = wait_exit(router, 5)
    exited = time.time()
    f.check(code == 0, f"kvrouter exits 0 once the stream ended ({code})")
    f.check(exited - result.get("end", signalled) < 1.5 and exited - signalled < 10,
            f"promptly: {exited - signalled:.1f} s after SIGTERM, {exited - result.get('end', 0):.1f} s after the stream")
    log = router.full_log()
    f.check("draining" in log and "drained: every request finished" in log, "the drain is logged")

    # 2. A second signal exits at once.
    router = Router(kvrouter, "m", [worker.url], "--shutdown-grace-secs", "20")
    result = {}
    t = stream_in_background(router, result)
    router.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    signalled = time.time()
    router.proc.send_signal(signal.SIGTERM)
    code = wait_exit(router, 5)
    f.check(code is not None and time.time() - signalled < 1.5, f"a second SIGTERM exits at once ({code})")
    t.join()
    f.check(b"[DONE]" not in result.get("body", b""), "and cuts the stream")

    # 3. The grace period bounds the drain.
    router = Router(kvrouter, "m", [worker.url], "--shutdown-grace-secs", "1")
    result = {}
    t = stream_in_background(router, result)
    signalled = time.time()
    router.proc.send_signal(signal.SIGTERM)
    code = wait_exit(router, 5)
    took = time.time() - signalled
    f.check(code == 0 and 0.8 < took < 2.5, f"a stream longer than the grace is cut when it is over ({code}, {took:.1f} s)")
    t.join()
    f.check("grace period over: cutting 1 connection(s)" in router.full_log(), "and the cut is logged")
finally:
    worker.stop()
f.exit()
