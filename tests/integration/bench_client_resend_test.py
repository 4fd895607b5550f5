#!/usr/bin/python3
"""kvrouter-bench's client and a server that closes kept-alive connections without saying so
(after each answer, as a server whose idle timeout fires just as a request goes out would):
every request is still answered, each one the closed connection refused is sent once more on a
new connection and counted as `resent`, and a server that drops every request before answering
is an error, not an endless resend.

usage: bench_client_resend_test.py BENCH_BINARY
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading

from router_harness import Failures

ANSWER = b'data: {"choices":[{"index":0,"text":"x"}]}\n\ndata: [DONE]\n\n'


def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        body += chunk
    return head


def serve(listener, answer, counts):
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            head = read_request(conn)
            if head is None:
                continue
            # The bench also GETs /metrics before and after a run: only completions count here.
            if head.startswith(b"POST "):
                counts["connections"] += 1
                counts["requests"] += 1
            if answer:
                # Keep-alive as far as the client can tell (HTTP/1.1, no Connection: close) ...
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(ANSWER), ANSWER))
            # ... and closed at once.
            conn.shutdown(socket.SHUT_RDWR)


def start_server(answer):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    counts = {"connections": 0, "requests": 0}  # of POSTs: each connection carries one request
    threading.Thread(target=serve, args=(listener, answer, counts), daemon=True).start()
    return listener, counts


def run(bench, port, out, requests):
    return subprocess.run([bench, "run", "--url", f"http://127.0.0.1:{port}", "--model", "m", "--groups", "1",
                           "--prompts-per-group", str(requests), "--system-tokens", "32", "--question-tokens", "8",
                           "--output-tokens", "1", "--rate", "40", "--no-progress", "--out", out],
                          capture_output=True, text=True, timeout=60)


def main():
    bench = sys.argv[1]
    f = Failures()
    tmp = tempfile.mkdtemp()

    listener, counts = start_server(answer=True)
    out = os.path.join(tmp, "closing.json")
    result = run(bench, listener.getsockname()[1], out, 12)
    print(result.stdout, result.stderr)
    f.check(result.returncode == 0, f"the run exits 0 ({result.returncode}; {result.stderr.strip()[-300:]})")
    report = json.load(open(out))[0]
    f.check(report["requests"] == 12 and report["errors"] == 0,
            f"every request is answered ({report['requests']} sent, {report['errors']} errors: {report['first_error']})")
    f.check(report["resent"] >= 1, f"requests that met a closed kept-alive connection were resent ({report['resent']})")
    f.check(report["resent"] <= 11, "a request on a new connection is not resent")
    f.check(counts["requests"] == 12, f"the server answered each request once ({counts['requests']})")
    f.check("resent on a new connection" in result.stdout, "the table says how many were resent")
    listener.close()

    listener, counts = start_server(answer=False)
    out = os.path.join(tmp, "dropping.json")
    result = run(bench, listener.getsockname()[1], out, 4)
    report = json.load(open(out))[0]
    f.check(report["errors"] == 4, f"a server that answers nothing fails every request ({report['errors']} errors)")
    f.check(counts["connections"] == 4, f"on new connections only, so nothing is resent ({counts['connections']} connections, "
                                        f"{report['resent']} resent)")
    listener.close()
    f.exit()


if __name__ == "__main__":
    main()
