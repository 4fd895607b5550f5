#!/usr/bin/python3
"""Integration: prefill/decode disaggregation, SGLang protocol, end to end on loopback.

kvrouter serves set "sg": two kvrouter-mockers with --role prefill --pd sglang (p0, p1, each
with a bootstrap server on its own port) and two with --role decode --pd sglang (d0, d1). Both
legs of a request get the body with the prefill worker's bootstrap_host, bootstrap_port and a
fresh bootstrap_room, and run at once: the prefill mocker computes the prompt and holds its
blocks in the room; the decode mocker asks the prefill's bootstrap server for the room, checks
the blocks' hashes against its own, then decodes and streams. kvrouter drains the prefill leg.

1. Chats (streamed and not) and completions answer exactly what one aggregated mocker answers
   for the same prompt, from a decode worker; every room met (prefill legs = decode legs that
   got matching blocks), no transfer failed; the decode workers got the prefill's address.
2. The two legs run at once and carry the same room (a fake prefill server records both).
3. Faults, against fake prefill servers: an error status before the decode answers (the client
   gets it, the decode leg is cut), a prefill that never answers (504 after --pd-timeout-secs,
   the decode leg cut), a bootstrap that never arrives (the decode worker's 500 waits for the
   prefill's verdict; the prefill answered, so the 500 is the answer), a client that leaves
   during both legs. A decode failure while the prefill worker is gone is the prefill's: the
   pair is chosen again (5).
4. `n: 2` is split too (an SGLang decode worker needs a room).
5. Every booking returns to zero after successes and faults; a prefill worker gone: retried on
   a new pair, every answer 200.
6. /metrics counts the paths, the faults and both legs' timings.

Usage: sglang_disaggregation_test.py PATH/TO/kvrouter PATH/TO/kvrouter-mocker
"""
import http.server
import json
import os
import socket
import sys
import tempfile
import threading
import time

from pd_harness import busy_workers, chat_body, compare_with_aggregated, generation_cases
from router_harness import Failures, Mocker, Router, free_port, wait_for

kvrouter, mocker_binary = sys.argv[1], sys.argv[2]
f = Failures()


class FakeSglangPrefill(http.server.BaseHTTPRequestHandler):
    """A prefill worker and its bootstrap server on one port, misbehaving as the model says."""
    protocol_version = "HTTP/1.1"
    legs = []     # prefill bodies received
    fetches = []  # rooms the decode side asked for
    lock = threading.Lock()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with FakeSglangPrefill.lock:
            FakeSglangPrefill.legs.append(body)
        if body.get("model") == "sg-hang":
            time.sleep(20)  # cut by kvrouter long before
            return
        if body.get("model") == "sg-noroom":  # a prefill that "succeeds" after the decode side failed
            time.sleep(0.4)
            return self.answer(200, {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"content": "a"}}]})
        self.answer(500, {"error": {"message": "prefill engine failed", "type": "InternalServerError", "code": 500}})

    def do_GET(self):
        if self.path.startswith("/mocker/bootstrap/"):
            with FakeSglangPrefill.lock:
                FakeSglangPrefill.fetches.append(int(self.path.rsplit("/", 1)[1]))
            room = int(self.path.rsplit("/", 1)[1])
            room_model = wait_for(lambda: next((leg.get("model") for leg in list(FakeSglangPrefill.legs)
                                                if leg.get("bootstrap_room") == room), None), 1)  # the legs race
            if room_model == "sg-noroom":  # the blocks never come: the decode worker fails the request
                return self.answer(404, {"error": {"message": "no such room"}})
            time.sleep(20)  # the room never fills
            return
        self.answer(200, {})  # health checks

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


flags = ("--model", "sg", "--block-size", "16", "--speedup", "20", "--pd", "sglang", "--kv-lease-secs", "3")
bootstrap = {"p0": free_port(), "p1": free_port()}
mockers = {p: Mocker(mocker_binary, *flags, "--role", "prefill", "--bootstrap-port", str(port)) for p, port in bootstrap.items()}
mockers.update({d: Mocker(mocker_binary, *flags, "--role", "decode") for d in ("d0", "d1")})
reference = Mocker(mocker_binary, "--model", "sg", "--block-size", "16", "--speedup", "20")  # aggregated
fake = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeSglangPrefill)
fake.daemon_threads = True
threading.Thread(target=fake.serve_forever, daemon=True).start()
fake_port = fake.server_address[1]
set_names = ("sg", "sg-500", "sg-hang", "sg-noroom")
router = None
try:
    sets = [{"name": "sg", "model": "sg", "block_size": 16,
             "workers": [{"id": p, "url": mockers[p].url, "role": "prefill", "bootstrap_port": bootstrap[p]} for p in ("p0", "p1")] +
                        [{"id": d, "url": mockers[d].url, "role": "decode"} for d in ("d0", "d1")],
             "disaggregation": {"protocol": "sglang"}, "router_config": {"router_mode": "kv", "use_kv_events": False}}]
    for name in set_names[1:]:
        sets.append({"name": name, "model": name, "block_size": 16,
                     "workers": [{"id": f"{name}-prefill", "url": f"http://127.0.0.1:{fake_port}", "role": "prefill",
                                  "bootstrap_port": fake_port},
                                 {"id": f"{name}-d0", "url": mockers["d0"].url, "role": "decode"}],
                     "disaggregation": {"protocol": "sglang"}, "router_config": {"router_mode": "kv", "use_kv_events": False}})
    config = os.path.join(tempfile.mkdtemp(), "sets.json")
    with open(config, "w") as out:
        json.dump({"worker_sets": sets}, out)
    router = Router(kvrouter, None, [], "--config", config, "--pd-timeout-secs", "1", "--engine-metrics-interval-ms", "0")

    # 1. Answers equal the aggregated ones; every room met.
    cases = generation_cases("sg", "sglang")
    same, workers_seen = compare_with_aggregated(router, reference, cases)
    f.check(all(same), f"SGLang-disaggregated answers equal one aggregated worker's for the same prompts ({same})")
    f.check(workers_seen <= {"d0", "d1"}, f"and come from a decode worker ({workers_seen})")
    stats = lambda: {name: json.loads(mockers[name].request("GET", "/mocker/pd")[1]) for name in mockers}
    pd_stats = wait_for(lambda: (s := stats()) and s["p0"]["prefill_legs"] + s["p1"]["prefill_legs"] >= len(cases) and s, 3) or stats()
    met = pd_stats["d0"]["remote_prefills"] + pd_stats["d1"]["remote_prefills"]
    legs = pd_stats["p0"]["prefill_legs"] + pd_stats["p1"]["prefill_legs"]
    served = pd_stats["p0"]["transfers_served"] + pd_stats["p1"]["transfers_served"]
    failures = sum(pd_stats[n]["transfer_failures"] for n in mockers)
    f.check(met == len(cases) and legs == len(cases) and served == len(cases) and failures == 0,
            f"every prefill leg filled its room and every decode leg took matching blocks from it "
            f"({legs} prefill legs, {served} rooms served, {met} decode legs matched, {failures} failures)")
    last = [pd_stats[d]["last_kv_transfer_params"] for d in ("d0", "d1") if pd_stats[d]["last_kv_transfer_params"]]
    f.check(last and all(p["bootstrap_host"] == "127.0.0.1" and p["bootstrap_port"] in bootstrap.values() and
                         0 <= p["bootstrap_room"] < 2 ** 63 for p in last),
            f"the decode legs carry the prefill worker's bootstrap address and a 63-bit room ({last[:1]})")

    # 2 + 3. The legs run at once with one room; a prefill that never answers is cut: 504.
    started = time.time()
    status, _, data = router.request("POST", "/v1/chat/completions", chat_body("sg-hang", "x", stream=True))
    took = time.time() - started
    f.check(status == 504 and took < 4 and "prefill worker" in json.loads(data)["error"]["message"],
            f"a prefill leg without an answer is cut after --pd-timeout-secs: 504 ({status} after {took:.1f} s)")
    leg = FakeSglangPrefill.legs[-1]
    f.check(leg.get("bootstrap_host") == "127.0.0.1" and leg.get("bootstrap_port") == fake_port and
            leg.get("bootstrap_room") in FakeSglangPrefill.fetches,
            f"both legs ran at once with the same room: the decode worker asked the prefill's bootstrap server for it "
            f"(prefill leg room {leg.get('bootstrap_room')}, fetched {FakeSglangPrefill.fetches[-2:]})")
    status, _, data = router.request("POST", "/v1/chat/completions", chat_body("sg-500", "x"))
    f.check(status == 500 and json.loads(data)["error"]["message"] == "prefill engine failed",
            f"a prefill error status before the decode leg answered is the client's answer ({status} {data[:100]})")
    started = time.time()
    status, _, data = router.request("POST", "/v1/chat/completions", chat_body("sg-noroom", "x"))
    took = time.time() - started
    f.check(status == 500 and 0.3 < took < 4 and "KV transfer" in json.loads(data)["error"]["message"],
            f"a bootstrap that never arrives: the decode worker's failure waits for the prefill leg, which answered, "
            f"so it is the client's answer ({status} after {took:.1f} s)")
    # A client leaving while both legs run.
    fetched_before = len(FakeSglangPrefill.fetches)
    s = socket.create_connection(("127.0.0.1", router.port))
    payload = json.dumps(chat_body("sg-hang", "leaving")).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
              str(len(payload)).encode() + b"\r\n\r\n" + payload)
    wait_for(lambda: len(FakeSglangPrefill.fetches) > fetched_before, 5)
    s.close()

    # 4. n > 1 is split too.
    before = router.metrics()
    status, headers, data = router.request("POST", "/v1/chat/completions", chat_body("sg", "two choices please", n=2))
    after = router.metrics()
    f.check(status == 200 and headers.get("x-kvrouter-worker") in ("d0", "d1") and
            after['kvrouter_pd_requests_total{path="disaggregated"}'] == before['kvrouter_pd_requests_total{path="disaggregated"}'] + 1,
            f"a request for two choices runs disaggregated too ({status} {headers.get('x-kvrouter-worker')})")

    # 5. Bookings back to zero.
    left = wait_for(lambda: not busy_workers(router, set_names), 3)
    f.check(left, f"after successes, faults, timeouts and a departed client every booking is released "
                  f"({busy_workers(router, set_names)})")
    metrics = router.metrics()
    f.check(metrics["kvrouter_pd_prefill_timeouts_total"] >= 1 and metrics["kvrouter_pd_prefill_error_statuses_total"] >= 1 and
            metrics['kvrouter_pd_requests_total{path="disaggregated"}'] >= len(cases) + 4 and
            metrics["kvrouter_pd_prefill_seconds_count"] >= len(cases) and
            metrics["kvrouter_pd_decode_first_byte_seconds_count"] >= len(cases) and
            metrics["kvrouter_pd_decode_seconds_count"] >= len(cases),
            "/metrics counts the paths, the faults, and both legs' timings")
    f.check(metrics.get('kvrouter_worker_failures_total{set="sg-hang",model="sg-hang",worker="sg-hang-prefill"}', 0) == 0,
            "a timed-out or abandoned prefill leg does not mark its worker failed")

    mockers["p1"].stop()
    answers = [router.request("POST", "/v1/chat/completions", chat_body("sg", f"after p1 left {i} " * 5)) for i in range(6)]
    statuses = [a[0] for a in answers]
    failed = [(a[0], a[1].get("x-kvrouter-worker"), a[2][:200]) for a in answers if a[0] != 200]
    f.check(statuses == [200] * 6, f"with a prefill worker gone, its requests are retried on a new pair ({statuses}; {failed})")
    if failed:
        print("router log, last lines:\n" + "\n".join(router.full_log().splitlines()[-40:]))
    f.check(wait_for(lambda: not busy_workers(router, set_names), 3), "and their bookings are released too")
    f.check(router.stop() == 0, "kvrouter stops cleanly")
finally:
    if router and router.proc.poll() is None:
        router.proc.kill()
    for m in list(mockers.values()) + [reference]:
        if m.proc.poll() is None:
            m.stop()
    fake.shutdown()
f.exit()
