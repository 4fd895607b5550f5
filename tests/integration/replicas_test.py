#!/usr/bin/python3
"""Integration: router replicas that share their bookings over a real nats-server (Debian's) on
loopback, with four kvrouter-mocker workers and three kvrouter replicas.

1. While long requests run, spread over the replicas, every replica shows the same booked load
   on every worker (its own plus the others'); once they end, every replica shows 0 everywhere.
2. A dry run on one replica shows the load another replica booked, and the remote part beside it.
3. `kill -9` of a replica with requests in flight: its bookings vanish from the others within
   the peer timeout (3 s) plus a check period.
4. nats-server restarts while clients keep sending: no client request fails; sync resumes (a new
   booking on one replica shows on another) and /metrics counted the outage.
5. Approximate mode, shared-prefix groups: each group's later requests, sent to other replicas
   than its first, land on the worker the first went to (every replica learns every placement).
6. Messages nobody should act on are counted and dropped: malformed, for an unknown set, and a
   replica's own id echoed back.
7. A replica whose NATS is down answers /ready 503 until --replica-warmup-ms, then 200, and
   serves meanwhile; one whose KV-event replay does not answer waits for it, as long as the
   warm-up lasts.

Usage: replicas_test.py PATH/TO/kvrouter PATH/TO/kvrouter-mocker
"""
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from router_harness import Failures, Mocker, Router, free_port, wait_for

kvrouter, mocker_binary = sys.argv[1], sys.argv[2]
f = Failures()


class Nats:
    """A nats-server on a fixed loopback port (so that it can come back on the same one)."""

    def __init__(self, port):
        self.port = port
        self.url = f"nats://127.0.0.1:{port}"
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(self.port)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        def accepting():
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return True
            except OSError:
                return False
        if not wait_for(accepting, 10):
            raise RuntimeError("nats-server did not start")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def publish(self, subject, payload):
        """Publishes raw bytes with the NATS text protocol (as any client could)."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        s.recv(4096)  # INFO
        s.sendall(b'CONNECT {"verbose":false}\r\n' + f"PUB {subject} {len(payload)}\r\n".encode() + payload +
                  b"\r\nPING\r\n")
        reply = b""
        while b"PONG" not in reply:
            reply += s.recv(4096)
        s.close()


def mp_str(s):
    b = s.encode()
    assert len(b) < 32
    return bytes([0xa0 | len(b)]) + b


def start_replicas(nats, specs, count, *flags):
    return [Router(kvrouter, "m", specs, "--nats", nats.url, "--replica-id", f"r{i}", "--replica-warmup-ms", "100",
                   "--health-interval-ms", "0", "--engine-metrics-interval-ms", "0", *flags)
            for i in range(count)]


def live(router):
    status, _, body = router.request("GET", "/v1/router/sets")
    assert status == 200, status
    return json.loads(body)


def booked(router):
    """Per worker name: (this replica's in-flight requests, other replicas')."""
    workers = live(router)["sets"][0]["live"]["workers"]
    return {w["name"]: (w["active_requests"], w["remote"]["active_requests"]) for w in workers}


def totals(router):
    return {name: own + remote for name, (own, remote) in booked(router).items()}


class LongRequest:
    """A streaming completion held open by the mocker's slow decode; `started` once its first
    bytes came (its booking's prefill part is done)."""

    def __init__(self, router, prompt, max_tokens):
        self.started = threading.Event()
        self.status = None
        self.worker = None
        self.thread = threading.Thread(target=self._run, args=(router, prompt, max_tokens), daemon=True)
        self.thread.start()

    def _run(self, router, prompt, max_tokens):
        try:
            c = http.client.HTTPConnection("127.0.0.1", router.port, timeout=60)
            c.request("POST", "/v1/completions", json.dumps({"model": "m", "prompt": prompt, "max_tokens": max_tokens,
                                                             "stream": True, "ignore_eos": True}))
            r = c.getresponse()
            self.status = r.status
            self.worker = r.getheader("x-kvrouter-worker")
            r.read(16)
            self.started.set()
            r.read()
            c.close()
        except Exception as e:  # noqa: BLE001 - a failed request is what the checks look for
            self.status = f"error: {e}"
            self.started.set()

    def join(self):
        self.thread.join(timeout=60)


def metric(router, name):
    return router.metrics().get(name, 0.0)


nats = Nats(free_port())
# Slow decode (20 ms a step): a request of 150 tokens holds its booking for about 3 s.
mockers = [Mocker(mocker_binary, "--step-base-us", "20000", "--decode-us-per-seq", "0") for _ in range(4)]
specs = [f"{m.url},id=w{i}" for i, m in enumerate(mockers)]
routers = []
try:
    routers = start_replicas(nats, specs, 3, "--load-aware")
    f.check(all(wait_for(lambda r=r: r.request("GET", "/ready")[0] == 200, 10) for r in routers),
            "every replica turns ready once connected and past its warm-up")
    f.check(all(wait_for(lambda r=r: len(live(r)["sets"][0]["live"]["peers"]) == 2, 5) for r in routers),
            "every replica hears the two others")

    # 1. Agreement while requests run, 0 everywhere at idle.
    requests = []
    for i in range(12):  # 30 ms apart: each pick sees the ones before it, whichever replica made them
        requests.append(LongRequest(routers[i % 3], [1000 + i, 7, 8, 9] * 8, 150))
        time.sleep(0.03)
    f.check(all(r.started.wait(20) for r in requests) and all(r.status == 200 for r in requests),
            "12 long requests over 3 replicas all started")
    time.sleep(0.4)  # one batch (1 ms) and the status republish (100 ms), with room
    views = [totals(r) for r in routers]
    f.check(views[0] == views[1] == views[2], f"the replicas agree on every worker's booked requests: {views}")
    f.check(sum(views[0].values()) == 12, f"and count all 12 of them: {views[0]}")
    f.check(max(views[0].values()) - min(views[0].values()) <= 1,
            f"load-aware picks over the shared load spread them evenly: {views[0]}")
    own = [sum(o for o, _ in booked(r).values()) for r in routers]
    f.check(own == [4, 4, 4], f"each replica's own part is what it routed: {own}")

    # 2. A dry run shows the total and the remote part.
    status, _, body = routers[0].request("POST", "/v1/completions", {"model": "m", "prompt": [1, 2, 3], "max_tokens": 1},
                                         {"x-kvrouter-dry-run": "1"})
    candidates = json.loads(body)["candidates"] if status == 200 else []
    # 12 prompts of 2 blocks: 24 blocks booked in all, 16 of them by r1 and r2 (r0 routed 4).
    f.check(status == 200 and all(c["active_decode_blocks"] >= c["remote_decode_blocks"] for c in candidates)
            and sum(c["active_decode_blocks"] for c in candidates) == 24
            and sum(c["remote_decode_blocks"] for c in candidates) == 16,
            f"a dry run shows each worker's total decode blocks with the remote part beside them: {candidates}")

    for r in requests:
        r.join()
    idle = wait_for(lambda: all(all(v == (0, 0) for v in booked(r).values()) for r in routers), 3)
    f.check(idle, f"at idle every replica shows 0 on every worker: {[booked(r) for r in routers]}")

    # 3. kill -9 a replica with requests in flight.
    doomed = [LongRequest(routers[2], [2000 + i, 5] * 8, 400) for i in range(4)]
    f.check(all(r.started.wait(20) for r in doomed), "4 long requests run on replica r2")
    time.sleep(0.3)
    f.check(sum(remote for _, remote in booked(routers[0]).values()) == 4, "r0 sees r2's 4 bookings as remote load")
    killed_at = time.time()
    routers[2].proc.send_signal(signal.SIGKILL)
    routers[2].proc.wait()
    gone = wait_for(lambda: all(sum(remote for _, remote in booked(r).values()) == 0 for r in routers[:2]), 6)
    elapsed = time.time() - killed_at
    f.check(gone and elapsed <= 3.6, f"its bookings vanish from r0 and r1 {elapsed:.2f} s after the kill (timeout 3 s)")
    f.check(all(len(live(r)["sets"][0]["live"]["peers"]) == 1 for r in routers[:2]), "and r2 is no longer a peer")
    f.check(metric(routers[0], 'kvrouter_set_replica_peers_dropped_total{set="m",model="m"}') == 1,
            "the dropped peer is counted")
    routers.pop()

    # 4. nats-server restarts mid-load: no client request fails.
    failures, done = [], threading.Event()
    def client(router):
        while not done.is_set():
            try:
                status = router.request("POST", "/v1/completions", {"model": "m", "prompt": [9, 9, 9], "max_tokens": 2})[0]
            except Exception as e:  # noqa: BLE001
                status = str(e)
            if status != 200:
                failures.append(status)
    clients = [threading.Thread(target=client, args=(r,)) for r in routers]
    for c in clients:
        c.start()
    time.sleep(1.0)
    nats.stop()
    f.check(wait_for(lambda: all(metric(r, "kvrouter_replica_nats_connected") == 0 for r in routers), 5),
            "the replicas notice the outage (connected gauge 0)")
    time.sleep(1.5)
    nats.start()
    f.check(wait_for(lambda: all(metric(r, "kvrouter_replica_nats_connected") == 1 for r in routers), 10),
            "and reconnect by themselves")
    time.sleep(1.0)
    done.set()
    for c in clients:
        c.join()
    f.check(not failures, f"no client request failed across the outage ({len(failures)} failed: {failures[:3]})")
    f.check(all(metric(r, "kvrouter_replica_nats_disconnects_total") >= 1 and metric(r, "kvrouter_replica_nats_reconnects_total") >= 1
                for r in routers), "the outage and the return are counted")
    after = [LongRequest(routers[0], [3000, 1] * 8, 200) for _ in range(2)]
    for r in after:
        r.started.wait(20)
    f.check(wait_for(lambda: sum(remote for _, remote in booked(routers[1]).values()) == 2, 3),
            "sync resumes: r0's new bookings show on r1")
    for r in after:
        r.join()
    for r in routers:
        r.stop()
    routers = []

    # 5. Approximate mode: groups sent to different replicas stay on one worker.
    groups = 8
    def groups_kept_together(replicas, base):
        together, placements = 0, {}
        for g in range(groups):
            prefix = [base + 100 * g + k for k in range(64)]
            first = replicas[0].request("POST", "/v1/completions", {"model": "m", "prompt": prefix + [1], "max_tokens": 1})
            placements[g] = first[1].get("x-kvrouter-worker")
            time.sleep(0.05)  # one batch of the first booking, with room
            later = [replicas[1 + k % 2].request("POST", "/v1/completions", {"model": "m", "prompt": prefix + [2 + k],
                                                                            "max_tokens": 1})[1].get("x-kvrouter-worker")
                     for k in range(4)]
            together += all(w == placements[g] for w in later)
        return together, placements
    # Control: the same replicas without sync (each predicts only its own routings).
    routers = [Router(kvrouter, "m", specs, "--no-kv-events", "--health-interval-ms", "0") for _ in range(3)]
    apart, _ = groups_kept_together(routers, 40_000)
    for r in routers:
        r.stop()
    routers = start_replicas(nats, specs, 3, "--no-kv-events")
    for r in routers:
        wait_for(lambda r=r: len(live(r)["sets"][0]["live"]["peers"]) == 2, 5)
    together, placements = groups_kept_together(routers, 50_000)
    f.check(together == groups and apart < groups / 2,
            f"every group's later requests on r1 and r2 went to its first request's worker ({together} of {groups} "
            f"groups; without sync {apart})")
    f.check(len(set(placements.values())) >= 2, f"and the groups themselves are spread: {placements}")

    sets = live(routers[1])
    f.check(sets["replication"]["replica_id"] == "r1" and sets["replication"]["messages_received"] > 0
            and sets["replication"]["sync_lag_ms"]["samples"] > 0,
            f"/v1/router/sets shows the replica, its counters and its sync lag: {sets['replication']}")
    f.check(all(p["last_snapshot_age_s"] is not None and p["last_snapshot_age_s"] < 2.5 for p in sets["sets"][0]["live"]["peers"]),
            f"and per peer the age of its last snapshot: {sets['sets'][0]['live']['peers']}")

    # 6. Messages to drop: malformed, unknown set, an echo of r0's own id.
    before = {reason: metric(routers[0], f'kvrouter_replica_messages_dropped_total{{reason="{reason}"}}')
              for reason in ("malformed", "unknown_set", "echo")}
    nats.publish("kvrouter.m.bookings", b"\xc1 not msgpack")
    nats.publish("kvrouter.no-such-set.bookings", b"\x90")
    echo = bytes([0x97, 1, 0]) + mp_str("r0") + bytes([1, 0x7f, 0, 0x90])  # [1, 0, "r0", 1, 127, 0, []]
    nats.publish("kvrouter.m.bookings", echo)
    def dropped(reason):
        return metric(routers[0], f'kvrouter_replica_messages_dropped_total{{reason="{reason}"}}') - before[reason]
    f.check(wait_for(lambda: dropped("malformed") == 1 and dropped("unknown_set") == 1 and dropped("echo") == 1, 3),
            f"a malformed message, one for an unknown set and an echo are each counted and dropped "
            f"({[dropped(r) for r in before]})")
    f.check(routers[0].request("GET", "/health")[0] == 200 and live(routers[0])["replication"]["connected"],
            "and the replica carries on")
    promtool = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".cache", "tools", "promtool")
    exposition = routers[0].request("GET", "/metrics")[2]
    checked = subprocess.run([promtool, "check", "metrics"], input=exposition, capture_output=True)
    f.check(checked.returncode == 0 and b"kvrouter_replica_sync_lag_seconds_bucket" in exposition,
            f"a replica's /metrics, replica families included, passes promtool check metrics "
            f"({checked.stdout.decode()[:200]}{checked.stderr.decode()[:200]})")
    for r in routers:
        r.stop()
    routers = []

    # 7. NATS down at start: not ready until the warm-up, serving meanwhile.
    nobody = free_port()
    lone = Router(kvrouter, "m", specs, "--nats", f"nats://127.0.0.1:{nobody}", "--replica-warmup-ms", "1500",
                  "--health-interval-ms", "0")
    routers = [lone]
    status, _, body = lone.request("GET", "/ready")
    f.check(status == 503 and b"waiting for NATS" in body, f"/ready says it waits for NATS: {status} {body[:80]}")
    f.check(lone.request("POST", "/v1/completions", {"model": "m", "prompt": [1, 2], "max_tokens": 1})[0] == 200,
            "requests are served on local bookings meanwhile")
    f.check(wait_for(lambda: lone.request("GET", "/ready")[0] == 200, 4), "/ready turns 200 after the warm-up")
    lone.stop()
    routers = []
    # A worker whose replay endpoint never answers (nobody listens there): the replay runs into
    # its 5 s timeout, the warm-up (3 s) ends first.
    silent = f"{mockers[0].url},id=w0,kv_events=tcp://127.0.0.1:{free_port()},replay=tcp://127.0.0.1:{free_port()}"
    started = time.time()
    waiting = Router(kvrouter, "m", [silent], "--nats", nats.url, "--replica-warmup-ms", "3000", "--health-interval-ms", "0")
    routers = [waiting]
    reasons = []
    while time.time() - started < 5:
        status, _, body = waiting.request("GET", "/ready")
        reason = json.loads(body)["status"]
        if not reasons or reasons[-1] != reason:
            reasons.append(reason)
        if status == 200:
            break
        time.sleep(0.05)
    ready_after = time.time() - started
    f.check("replaying the KV events of worker set m" in reasons and reasons[-1] == "ready" and 2.5 < ready_after < 4.5,
            f"/ready waits for the KV-event replay, then for nothing once the warm-up is over: {reasons} "
            f"(ready after {ready_after:.1f} s)")
finally:
    for r in routers:
        try:
            r.stop()
        except Exception:  # noqa: BLE001
            pass
    for m in mockers:
        m.stop()
    nats.stop()
f.exit()
