#!/usr/bin/python3
"""A scriptable OpenAI-compatible worker for the router's integration tests.

  fake_worker.py --port-file F [--name w0] [--chunks 3] [--chunk-delay 0.0] [--first-delay 0.0]
                 [--status 200] [--break-after-head]

Answers POST /v1/chat/completions and /v1/completions: streaming (SSE, chunked, one `data:` event
every --chunk-delay seconds, in vLLM's chunk shape) or not (one JSON object). Every answer names
the worker. POST /control {"health": N, "metrics": TEXT, "first_delay": S} sets what GET /health and
GET /metrics answer and how long requests wait before any byte. --break-after-head sends a 200 head and closes before any body. GET /stats returns what it saw: requests, bodies, streams cut short by the client.
Writes its port to --port-file once listening (it binds port 0 on 127.0.0.1, or ::1 with --ipv6)."""
import argparse
import json
import socket
import socketserver
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = 0
        self.connections = 0  # accepted (and, with TLS, handshaken) connections
        self.completed = 0
        self.cancelled = 0
        self.bodies = []
        self.paths = []
        self.headers = []
        self.health = 200
        self.metrics = None  # GET /metrics answers this text (404 while None)
        self.first_delay = None  # overrides --first-delay when set
        self.arrivals = []  # (time, body) of every request, in arrival order

    def snapshot(self):
        with self.lock:
            return {"requests": self.requests, "connections": self.connections, "completed": self.completed, "cancelled": self.cancelled,
                    "bodies": self.bodies[-20:], "paths": self.paths[-20:], "headers": self.headers[-20:],
                    "arrivals": self.arrivals[-200:]}


def make_handler(args, stats):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def setup(self):
            super().setup()
            with stats.lock:
                stats.connections += 1

        def _json(self, status, payload):
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the client (kvrouter) left first
                self.close_connection = True

        def do_GET(self):
            if self.path == "/stats":
                return self._json(200, stats.snapshot())
            if self.path == "/health":
                return self._json(stats.health, {"status": "ok" if stats.health == 200 else "failing"})
            if self.path == "/metrics" and stats.metrics is not None:
                body = stats.metrics.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):  # kvrouter stopped reading (its limit)
                    self.close_connection = True
                return
            self._json(404, {"error": "no such path"})

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            if self.path == "/control":  # tests flip the worker's /health answer and set its /metrics text
                control = json.loads(raw)
                stats.health = control.get("health", stats.health)
                stats.metrics = control.get("metrics", stats.metrics)
                stats.first_delay = control.get("first_delay", stats.first_delay)
                return self._json(200, {"health": stats.health})
            with stats.lock:
                stats.requests += 1
                stats.bodies.append(raw.decode(errors="replace"))
                stats.paths.append(self.path)
                stats.headers.append({k.lower(): v for k, v in self.headers.items()})
                stats.arrivals.append((time.time(), raw.decode(errors="replace")))
            first_delay = stats.first_delay if stats.first_delay is not None else args.first_delay
            if first_delay:
                time.sleep(first_delay)
            if args.status != 200:
                return self._json(args.status, {"error": {"message": f"{args.name} failed on purpose"}})
            if args.break_after_head:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "1000")
                self.end_headers()
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            try:
                request = json.loads(raw)
            except (ValueError, RecursionError):  # as an engine answers a body it cannot read
                return self._json(400, {"error": {"message": "the body is not JSON this worker can read"}})
            if not isinstance(request, dict):
                return self._json(400, {"error": {"message": "the body is not a JSON object"}})
            if request.get("stream"):
                return self._stream()
            self._json(200, {"id": "cmpl-1", "object": "chat.completion", "worker": args.name,
                             "choices": [{"index": 0, "message": {"role": "assistant", "content": f"hello from {args.name}"},
                                          "finish_reason": "stop"}],
                             "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}})
            with stats.lock:
                stats.completed += 1

        def _stream(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for i in range(args.chunks):
                    if i:
                        time.sleep(args.chunk_delay)
                    event = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "worker": args.name,
                             "choices": [{"index": 0, "delta": {"content": f"tok{i} "}, "finish_reason": None}]}
                    self._chunk(f"data: {json.dumps(event)}\n\n".encode())
                self._chunk(b"data: [DONE]\n\n")
                self._chunk(b"")
                with stats.lock:
                    stats.completed += 1
            except (BrokenPipeError, ConnectionResetError):
                with stats.lock:
                    stats.cancelled += 1
                self.close_connection = True

        def _chunk(self, data):
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    return Handler


class Server(socketserver.ThreadingMixIn, HTTPServer):
    daemon_threads = True
    tls = None  # an ssl.SSLContext: serve HTTPS

    def finish_request(self, request, client_address):
        # On the connection's own thread: a client that never finishes its handshake holds up
        # no other connection.
        if self.tls:
            try:
                request = self.tls.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                request.close()
                return
        super().finish_request(request, client_address)


class Server6(Server):
    address_family = socket.AF_INET6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--name", default="w0")
    parser.add_argument("--chunks", type=int, default=3)
    parser.add_argument("--chunk-delay", type=float, default=0.0)
    parser.add_argument("--first-delay", type=float, default=0.0)
    parser.add_argument("--status", type=int, default=200)
    parser.add_argument("--break-after-head", action="store_true")
    parser.add_argument("--ipv6", action="store_true", help="listen on [::1] instead of 127.0.0.1")
    parser.add_argument("--tls-cert", help="serve HTTPS with this certificate chain (PEM)")
    parser.add_argument("--tls-key", help="and this private key")
    args = parser.parse_args()
    server = (Server6(("::1", 0), make_handler(args, Stats())) if args.ipv6
              else Server(("127.0.0.1", 0), make_handler(args, Stats())))
    if args.tls_cert:
        server.tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.tls.load_cert_chain(args.tls_cert, args.tls_key)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.rename(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
