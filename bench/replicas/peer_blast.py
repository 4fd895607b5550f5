#!/usr/bin/python3
"""What receiving peer messages costs one replica: starts nats-server, a kvrouter-mocker and a
kvrouter with --nats, then publishes booking messages at RATE per second, each of EVENTS booking
steps (half booked with 16 block hashes, half finished), as another replica would, for 5 s, and
prints the router's CPU per message and per step, and its busiest threads.

Usage: bench/replicas/peer_blast.py RATE EVENTS [BUILD_DIR]   (e.g. 500 2, 500 64, 200 256)
"""
import os
import socket
import subprocess
import sys
import time

import msgpack

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "integration"))
from router_harness import Mocker, Router, free_port  # noqa: E402

rate, events = int(sys.argv[1]), int(sys.argv[2])
build = sys.argv[3] if len(sys.argv) > 3 else os.path.join(HERE, "..", "..", "build")
seconds = 5


def thread_ticks(pid):
    ticks = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        fields = open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()
        name = open(f"/proc/{pid}/task/{tid}/comm").read().strip()
        ticks[f"{name}[{tid}]"] = int(fields[11]) + int(fields[12])
    return ticks


port = free_port()
nats = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
time.sleep(0.5)
mocker = Mocker(os.path.join(build, "kvrouter-mocker"))
router = Router(os.path.join(build, "kvrouter"), "m", [mocker.url + ",id=w0"], "--nats", f"nats://127.0.0.1:{port}",
                "--replica-id", "r0", "--health-interval-ms", "0", "--engine-metrics-interval-ms", "0")
try:
    time.sleep(1.5)
    peer = socket.create_connection(("127.0.0.1", port))
    peer.recv(4096)
    peer.sendall(b'CONNECT {"verbose":false}\r\n')
    sequence, request = 0, 0
    before, start, sent = thread_ticks(router.proc.pid), time.time(), 0
    while time.time() - start < seconds:
        steps = []
        for _ in range(events // 2):
            request += 1
            steps.append([0, request, "w0", 256, 0, list(range(request * 100, request * 100 + 16))])
            steps.append([2, request])
        sequence += 1
        payload = msgpack.packb([1, 0, "peer", 1, sequence, time.time_ns(), steps])
        peer.sendall(f"PUB kvrouter.m.bookings {len(payload)}\r\n".encode() + payload + b"\r\n")
        sent += 1
        time.sleep(max(0.0, start + sent / rate - time.time()))
    wall = time.time() - start
    after = thread_ticks(router.proc.pid)
    ticks = sum(after[t] - before.get(t, 0) for t in after)
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    print(f"{sent / wall:.0f} msg/s of {events} steps: router {ticks * tick_ms / wall:.1f} ms CPU/s = "
          f"{ticks * tick_ms * 1000 / sent:.1f} us/message, {ticks * tick_ms * 1000 / (sent * events):.2f} us/step")
    for t in sorted(after, key=lambda t: before.get(t, 0) - after[t])[:5]:
        print(f"  {t}: {(after[t] - before.get(t, 0)) * tick_ms / wall:.1f} ms/s")
finally:
    router.stop()
    mocker.stop()
    nats.terminate()
