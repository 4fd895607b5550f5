#!/usr/bin/python3
"""Integration: worker-set cards from a real etcd (Debian's etcd-server) on loopback.

A set appears when its key is put, changes when it is rewritten (load-aware <-> approximate kv,
a worker removed under load with no failed request), disappears when its key is deleted or its
lease expires, an invalid card is refused while the rest keeps working, and the router re-lists
after etcd restarts.

Usage: etcd_discovery_test.py PATH/TO/kvrouter
"""
import base64
import http.client
import json
import subprocess
import sys
import tempfile
import time

from router_harness import BackgroundLoad, Failures, Router, Worker, free_port

kvrouter = sys.argv[1]
f = Failures()
data_dir = tempfile.mkdtemp()
client_port, peer_port = free_port(), free_port()


def start_etcd():
    proc = subprocess.Popen(["etcd", "--name", "kvr", "--data-dir", data_dir,
                             "--listen-client-urls", f"http://127.0.0.1:{client_port}",
                             "--advertise-client-urls", f"http://127.0.0.1:{client_port}",
                             "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
                             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
                             "--initial-cluster", f"kvr=http://127.0.0.1:{peer_port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 15
    while time.time() < deadline:
        try:
            etcd("/v3/kv/range", {"key": b64("x")})
            return proc
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("etcd did not start")


def b64(text):
    return base64.b64encode(text.encode()).decode()


def etcd(path, body):
    c = http.client.HTTPConnection("127.0.0.1", client_port, timeout=5)
    c.request("POST", path, body=json.dumps(body))
    answer = json.loads(c.getresponse().read())
    c.close()
    return answer


def put(key, card, lease=None):
    body = {"key": b64("/kvrouter/" + key), "value": b64(card if isinstance(card, str) else json.dumps(card))}
    if lease:
        body["lease"] = lease
    etcd("/v3/kv/put", body)


def card(name, model, workers, override=None):
    c = {"name": name, "model": model, "workers": [{"id": w.name, "url": w.url} for w in workers]}
    if override:
        c["router_config"] = override
    return c


load_aware = {"router_mode": "kv", "overlap_score_credit": 0.0, "use_kv_events": False}
approximate = {"router_mode": "kv", "overlap_score_credit": 1.0, "use_kv_events": False}

etcd_proc = start_etcd()
workers = [Worker("w1"), Worker("w2"), Worker("w3")]
router = None
try:
    put("a", card("set-a", "ma", workers[:1]))
    router = Router(kvrouter, None, [], "--etcd", f"http://127.0.0.1:{client_port}", "--router-mode", "round-robin",
                    "--health-interval-ms", "0")

    def sets():
        return json.loads(router.request("GET", "/v1/router/sets")[2])["sets"]

    def wait_for(predicate, timeout=5.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if predicate():
                return True
            time.sleep(0.1)
        return False

    f.check(wait_for(lambda: [s["model"] for s in sets()] == ["ma"]), "the set already in etcd is served at start")
    f.check(router.chat(model="ma")[0] == 200, "its model answers")

    put("b", card("set-b", "mb", workers[1:], load_aware))
    f.check(wait_for(lambda: len(sets()) == 2), "a card put later adds its set")
    f.check(not sets()[1]["uses_prefix_overlap"], "set-b is load-aware")

    load = BackgroundLoad(router, "mb")
    put("b", card("set-b", "mb", workers[1:], approximate))
    f.check(wait_for(lambda: sets()[1]["uses_prefix_overlap"] and sets()[1]["pipeline"]["hashers"] > 0),
            "rewriting the card turns set-b to approximate kv, with hashers")
    with_events = card("set-b", "mb", workers[1:], {"router_mode": "kv", "overlap_score_credit": 1.0})
    with_events["workers"][0]["kv_events"] = "tcp://127.0.0.1:1"
    put("b", with_events)
    f.check(wait_for(lambda: sets()[1]["pipeline"]["kv_subscriber"] and sets()[1]["kv_events_subscribed"]),
            "kv mode with events starts set-b's KV subscriber")
    put("b", card("set-b", "mb", workers[1:], load_aware))
    f.check(wait_for(lambda: not sets()[1]["uses_prefix_overlap"] and not sets()[1]["pipeline"]["kv_subscriber"]
                     and sets()[1]["pipeline"]["hashers"] == 0),
            "and back to load-aware stops its subscriber and hashers")
    put("b", card("set-b", "mb", workers[1:2], load_aware))  # w3 removed under load
    only_w2 = lambda: {json.loads(router.chat(model="mb")[2])["worker"] for _ in range(4)} == {"w2"}
    f.check(wait_for(only_w2), "the removed worker gets no new requests")
    after = len(load.statuses)
    f.check(wait_for(lambda: len(load.statuses) >= max(after + 10, 25), timeout=15), "the load goes on after the change")
    statuses = load.stop()
    f.check(len(statuses) > 20 and set(statuses) == {200},
            f"no request failed while the set changed and lost a worker ({len(statuses)} requests, {sorted(set(statuses))})")

    put("c", "{not json")
    f.check(router.wait_for_log("etcd key /kvrouter/c rejected"), "the invalid card is read, rejected and logged with its key")
    f.check(len(sets()) == 2 and router.chat(model="ma")[0] == 200, "an invalid card is refused and the rest keeps serving")

    etcd("/v3/kv/deleterange", {"key": b64("/kvrouter/a")})
    f.check(wait_for(lambda: router.chat(model="ma")[0] == 404), "deleting a key removes its set")

    lease = etcd("/v3/lease/grant", {"TTL": 2})["ID"]
    put("d", card("set-d", "md", workers[:1]), lease)
    f.check(wait_for(lambda: router.chat(model="md")[0] == 200), "a card under a lease is served")
    f.check(wait_for(lambda: router.chat(model="md")[0] == 404, timeout=10), "and removed when the lease expires")

    etcd_proc.terminate()
    etcd_proc.wait()
    time.sleep(1.5)
    f.check(router.chat(model="mb")[0] == 200, "with etcd down the last known sets keep serving")
    etcd_proc = start_etcd()
    put("e", card("set-e", "me", workers[:1]))
    f.check(wait_for(lambda: router.chat(model="me")[0] == 200, timeout=10), "after etcd restarts the router lists again")
    f.check(router.stop() == 0, "kvrouter stops cleanly")
finally:
    if router and router.proc.poll() is None:
        router.proc.kill()
    etcd_proc.kill()
    for w in workers:
        w.stop()
f.exit()
