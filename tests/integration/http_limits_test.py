#!/usr/bin/python3
"""Integration: the parts of an HTTP message Beast does not bound are bounded, from clients and
from workers alike, and none of them stops kvrouter.

1. Clients: a head of many small fields past 64 KiB, fed to the parser in pieces (which Beast
   1.74 checks piece by piece only), a chunk line whose extension never ends, and a trailer past
   64 KiB (Beast throws std::length_error for a field over 65533 bytes, which used to end the
   process) are each refused with 400; the same parts under the bounds pass.
2. Host: an HTTP/1.1 request without Host, or any request with two, is refused (RFC 9112 §3.2).
3. Workers: a head of 20 000 bytes passes (Beast's own limit per step is 8 KiB); an answer
   whose head never ends is a 502 and the worker's failure; a trailer past
   64 KiB cuts the answer it ends; a /metrics answer whose head never ends is a failed scrape;
   kvrouter's memory stays where it was.
Usage: http_limits_test.py PATH/TO/kvrouter"""
import socket
import sys
import threading
import time

from router_harness import Failures, Router, Worker, wait_for

kvrouter = sys.argv[1]
f = Failures()
CHAT = b'{"model":"m","messages":[{"role":"user","content":"hi"}]}'


def exchange(port, data):
    """Sends `data` (the server may answer and close before it is all sent) and returns all it answered."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        answer = b""
        while True:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            answer += chunk
        return answer
    finally:
        s.close()


def chunked_chat(chunk_line=b"%x" % len(CHAT), trailer=b""):
    return (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n" + chunk_line + b"\r\n" + CHAT + b"\r\n0\r\n" + trailer + b"\r\n")


def status_of(answer):
    return answer.split(b"\r\n", 1)[0].decode(errors="replace")


def rss_mb(router):
    return int(open(f"/proc/{router.proc.pid}/status").read().split("VmRSS:")[1].split()[0]) // 1024


class RawWorker:
    """A worker that answers chats and /metrics with the bytes it is given, then closes."""

    def __init__(self, chat_answer, metrics_answer):
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.answers = {b"/metrics": metrics_answer, b"/v1/chat/completions": chat_answer}
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        try:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                head += chunk
            path = head.split(b" ", 2)[1]
            answer = self.answers.get(path, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            conn.sendall(answer)
        except OSError:
            pass
        finally:
            conn.close()

    def stop(self):
        self.listener.close()


workers = [Worker("w0")]
router = None
raw = None
try:
    router = Router(kvrouter, "m", [f"{workers[0].url},id=w0"], "--router-mode", "round-robin", "--health-interval-ms", "0")
    port = router.port

    # 1. Clients.
    fields = lambda n: b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n" + b"X-A: b\r\n" * n + b"\r\n"
    f.check(status_of(exchange(port, fields(7000))) == "HTTP/1.1 200 OK", "a head of 56 000 bytes of small fields passes")
    answer = exchange(port, fields(10000))
    f.check(status_of(answer) == "HTTP/1.1 400 Bad Request" and b"headers are too large" in answer,
            f"a head of 80 000 bytes of small fields is refused, though no read holds all of it ({answer[:80]!r})")
    answer = exchange(port, fields(2_000_000))
    f.check(status_of(answer) == "HTTP/1.1 400 Bad Request", "so is one of 16 MB, without reading it all")

    f.check(status_of(exchange(port, chunked_chat())) == "HTTP/1.1 200 OK", "a chunked chat passes")
    f.check(status_of(exchange(port, chunked_chat(b"%x;ext=%s" % (len(CHAT), b"e" * 60000)))) == "HTTP/1.1 200 OK",
            "a chunk line with a 60 000-byte extension passes")
    answer = exchange(port, chunked_chat(b"%x;ext=%s" % (len(CHAT), b"e" * 2_000_000)))
    f.check(status_of(answer) == "HTTP/1.1 400 Bad Request" and b"chunk line or trailer" in answer,
            f"a chunk line whose extension runs on for 2 MB is refused ({answer[:160]!r})")
    f.check(status_of(exchange(port, chunked_chat(trailer=b"X-T: " + b"t" * 60000 + b"\r\n"))) == "HTTP/1.1 200 OK",
            "a trailer field of 60 000 bytes passes")
    for size in (65534, 70000, 300000):
        answer = exchange(port, chunked_chat(trailer=b"X-T: " + b"t" * size + b"\r\n"))
        f.check(status_of(answer) == "HTTP/1.1 400 Bad Request" and router.proc.poll() is None,
                f"a trailer field of {size} bytes is refused and kvrouter runs on ({answer[:120]!r})")

    # 2. Host.
    answer = exchange(port, b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
    f.check(status_of(answer) == "HTTP/1.1 400 Bad Request" and b"without a Host" in answer,
            f"an HTTP/1.1 request without Host is refused ({answer[:160]!r})")
    answer = exchange(port, b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n")
    f.check(status_of(answer) == "HTTP/1.1 400 Bad Request" and b"more than one Host" in answer,
            f"a request with two Host fields is refused ({answer[:160]!r})")
    answer = exchange(port, b"GET /health HTTP/1.0\r\n\r\n")
    f.check(status_of(answer) == "HTTP/1.1 200 OK", f"an HTTP/1.0 request needs no Host ({answer[:40]!r})")
    f.check(router.chat()[0] == 200, "kvrouter still serves")
    router.stop()

    # 3. Workers.
    body = b'{"id":"x","object":"chat.completion","choices":[]}'
    wide_head = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Wide: " + b"w" * 20000 +
                 b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    raw = RawWorker(wide_head, b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    router = Router(kvrouter, "m", [f"http://127.0.0.1:{raw.port},id=raw"], "--router-mode", "round-robin",
                    "--health-interval-ms", "0")
    status = router.chat()[0]
    f.check(status == 200, f"a worker's head of 20 000 bytes, in one read or several, passes ({status})")
    router.stop()
    raw.stop()
    endless_head = b"HTTP/1.1 200 OK\r\n" + b"X-A: b\r\n" * 4_000_000  # 32 MB of fields, never ended
    sse = b"data: {}\n\n"
    long_trailer = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" +
                    b"%x\r\n%s\r\n0\r\nX-T: %s\r\n\r\n" % (len(sse), sse, b"t" * 300000))
    for name, chat_answer in (("a head that never ends", endless_head), ("a trailer field of 300 000 bytes", long_trailer)):
        raw = RawWorker(chat_answer, endless_head)
        router = Router(kvrouter, "m", [f"http://127.0.0.1:{raw.port},id=raw"], "--router-mode", "round-robin",
                        "--health-interval-ms", "0", "--engine-metrics-interval-ms", "100", "--max-retries", "0")
        before = rss_mb(router)
        try:
            status = router.chat()[0]
        except Exception as e:  # the answer's head went out before the trailer: the client sees it cut
            status = type(e).__name__
        f.check(router.proc.poll() is None, f"{name}: kvrouter runs on (the client got {status})")
        if chat_answer is endless_head:
            f.check(status == 502, f"{name}: the client gets 502 ({status})")
            time.sleep(1.3)  # the scorer publishes its status about once a second
            f.check(router.worker_gauge("kvrouter_worker_failures_total", "raw") >= 1, f"{name}: it counts against the worker")
        else:  # the head and body went out before the trailer came: the client's answer is cut short
            f.check(status == "IncompleteRead", f"{name}: the client's answer is cut short ({status})")
        failures = wait_for(lambda: router.metrics().get('kvrouter_set_engine_scrape_failures_total{set="m",model="m"}', 0) >= 2, 5)
        f.check(bool(failures), "a /metrics answer whose head never ends is a failed scrape")
        grown = rss_mb(router) - before
        f.check(grown < 24, f"{name}: kvrouter's memory grew by {grown} MB, not by the 32 MB sent (or more)")
        router.stop()
        raw.stop()
    router = None
finally:
    if router:
        router.stop()
    if raw:
        raw.stop()
    for w in workers:
        w.stop()
f.exit()
