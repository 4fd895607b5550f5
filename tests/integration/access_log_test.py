#!/usr/bin/python3
"""Integration: --access-log writes one JSON line per routed request, as an operator reads it.

1. A streamed chat, a plain one with the client's X-Request-Id, a dry run, a worker's own error
   and a client that leaves mid-stream each get one line: time, request id, model, set, worker,
   status, outcome, prompt tokens, overlap, attempts, queue wait, TTFT, duration, bytes.
   Requests that never reach routing (unknown model, bad JSON) get none.
2. `--access-log -` writes the lines to stdout; a reader that goes away does not stop kvrouter.
3. A path that cannot be opened stops kvrouter at start with exit 2 and says why.
Usage: access_log_test.py PATH/TO/kvrouter"""
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

from router_harness import Failures, Router, Worker, wait_for

kvrouter = sys.argv[1]
f = Failures()
log_path = os.path.join(tempfile.mkdtemp(), "access.jsonl")


def lines():
    if not os.path.exists(log_path):
        return []
    with open(log_path) as log:
        return [json.loads(line) for line in log if line.strip()]


fast = Worker("w0", "--chunks", "4")
failing = Worker("w1", "--status", "500")
slow = Worker("w2", "--chunks", "50", "--chunk-delay", "0.05")
router = Router(kvrouter, "m", [f"{fast.url},id=w0", f"{failing.url},id=w1", f"{slow.url},id=w2"],
                "--router-mode", "round-robin", "--access-log", log_path, "--health-interval-ms", "0",
                "--max-retries", "0")
try:
    status, _, _ = router.chat(stream=True, content="streamed")  # w0
    f.check(status == 200, "a streamed chat is answered")
    status, _, _ = router.chat(content="fails")  # w1: the worker's own 500 goes to the client
    f.check(status == 500, f"the failing worker's answer is forwarded ({status})")
    # w2: the client leaves after the first chunk.
    body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "leaves"}]}).encode()
    s = socket.create_connection(("127.0.0.1", router.port))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(body)).encode() + b"\r\n\r\n" + body)
    s.recv(4096)
    s.close()
    status, headers, _ = router.chat(content="named", headers={"X-Request-Id": "client-id-42"})  # w0
    f.check(status == 200, "a chat with the client's request id is answered")
    status, _, _ = router.chat(content="decide", headers={"x-kvrouter-dry-run": "1"})
    f.check(status == 200, "a dry run is answered")
    router.chat(model="nope")
    router.request("POST", "/v1/chat/completions", b"{not json", {"Content-Type": "application/json"})

    logged = wait_for(lambda: len(lines()) >= 5 and lines(), 5) or []
    f.check(len(logged) == 5, f"one line per routed request, none for the unknown model or bad JSON ({len(logged)})")
    by_outcome = {}
    for line in logged:
        by_outcome.setdefault(line["outcome"], []).append(line)
    fields = {"time", "request_id", "model", "set", "worker", "status", "outcome", "prompt_tokens", "overlap_blocks",
              "attempts", "migrations", "queue_wait_ms", "ttft_ms", "duration_ms", "bytes"}
    f.check(all(set(line) == fields for line in logged), f"every line has every field ({logged[:1]})")
    f.check(all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"]) for line in logged),
            "times are UTC ISO 8601 with milliseconds")
    completed = by_outcome.get("completed", [])
    f.check(len(completed) == 3, f"three answers completed: the stream, the worker's 500 and the named one ({sorted(by_outcome)})")
    streamed = next((l for l in completed if l["status"] == 200 and l["request_id"].startswith("kvr-")), None)
    f.check(streamed is not None and streamed["worker"] == "w0" and streamed["model"] == "m" and streamed["set"] == "m"
            and streamed["attempts"] == 1 and streamed["bytes"] > 100 and 0 <= streamed["ttft_ms"] <= streamed["duration_ms"],
            f"the stream's line names its worker, a generated id, its bytes and TTFT <= duration ({streamed})")
    f.check(any(l["status"] == 500 and l["worker"] == "w1" for l in completed), "the worker's own error is logged with its status")
    f.check(any(l["request_id"] == "client-id-42" for l in completed), "the client's X-Request-Id is logged as sent")
    left = by_outcome.get("client_left", [])
    f.check(len(left) == 1 and left[0]["worker"] == "w2" and left[0]["status"] == 200 and 0 < left[0]["bytes"] < 1000,
            f"the client that left mid-stream is logged as such, with the status and bytes it got ({left})")
    dry = by_outcome.get("dry_run", [])
    f.check(len(dry) == 1 and dry[0]["status"] == 200 and dry[0]["worker"] is None and dry[0]["attempts"] == 0,
            f"the dry run is logged, with no worker ({dry})")
    f.check(router.metrics().get("kvrouter_access_log_lines_total") == 5 and
            router.metrics().get("kvrouter_access_log_dropped_total") == 0, "/metrics counts the lines written and dropped")
finally:
    router.stop()

# 2. stdout.
args = [kvrouter, "--host", "127.0.0.1", "--port", "0", "--model", "m", "--worker", f"{fast.url},id=w0",
        "--access-log", "-", "--health-interval-ms", "0"]
proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    port = None
    for line in proc.stderr:
        match = re.search(r"serving .* on http://[^:]+:(\d+)", line)
        if match:
            port = int(match.group(1))
            break
    import http.client
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", "/v1/chat/completions", body=json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}))
    c.getresponse().read()
    out = json.loads(proc.stdout.readline())
    f.check(out["worker"] == "w0" and out["outcome"] == "completed", f"--access-log - writes to stdout ({out})")
    proc.stdout.close()  # the reader goes away (as `| head -1` would)
    statuses = []
    for _ in range(3):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("POST", "/v1/chat/completions", body=json.dumps({"model": "m", "messages": [{"role": "user", "content": "x"}]}))
        statuses.append(c.getresponse().status)
    time.sleep(0.3)
    f.check(statuses == [200] * 3 and proc.poll() is None,
            f"a reader of stdout that goes away does not stop kvrouter (SIGPIPE ignored; {statuses})")
finally:
    proc.terminate()
    proc.wait(timeout=10)

# 3. An unusable path.
bad = subprocess.run([kvrouter, "--port", "0", "--model", "m", "--worker", fast.url, "--access-log", "/nonexistent/dir/a.log"],
                     capture_output=True, text=True, timeout=20)
f.check(bad.returncode == 2 and "cannot open the access log /nonexistent/dir/a.log" in bad.stderr,
        f"an access log that cannot be opened stops kvrouter with exit 2 ({bad.returncode}: {bad.stderr.strip()[-200:]})")

for w in (fast, failing, slow):
    w.stop()
f.exit()
