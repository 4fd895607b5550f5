#!/usr/bin/python3
"""Integration: a set's KV events decoded on several threads. kvrouter serves four workers with
`--kv-decoders 2`: /v1/router/sets shows two decoder components sharing the four publishers;
each worker's events, whichever thread decodes them, reach the index in their own order (a
burst of store / remove / store batches per worker ends stored, one ending removed ends
empty), and dry runs route each worker's prompt to it. Killing "kv_subscriber" takes down both
threads; each is restarted and counted on its own, and events flow again through both.
Usage: kv_decoders_test.py PATH/TO/kvrouter"""
import json
import struct
import sys
import time

import msgpack
import zmq

from router_harness import Failures, Router, Worker, wait_for

WORKERS = 4
kvrouter = sys.argv[1]
f = Failures()


context = zmq.Context()
pubs = []
for _ in range(WORKERS):
    pub = context.socket(zmq.PUB)
    pubs.append((pub, pub.bind_to_random_port("tcp://127.0.0.1")))
workers = [Worker(f"w{i}") for i in range(WORKERS)]
router = Router(kvrouter, "m", [f"{w.url},id=w{i},kv_events=tcp://127.0.0.1:{port}" for i, (w, (_, port)) in
                                enumerate(zip(workers, pubs))],
                "--block-size", "16", "--kv-decoders", "2", "--health-interval-ms", "0",
                "--engine-metrics-interval-ms", "0", "--fault-injection", "--restart-backoff-ms", "300")
sequences = [0] * WORKERS


def publish(worker, *events):
    pub = pubs[worker][0]
    pub.send_multipart([b"", struct.pack(">Q", sequences[worker]), msgpack.packb([time.time(), list(events), 0])])
    sequences[worker] += 1


def prompt_of(worker, round_):
    first = 10000 * (worker + 1) + 1000 * round_
    return list(range(first, first + 64))


def stored(worker, round_):
    tokens = prompt_of(worker, round_)
    return ["BlockStored", [tokens[0] + b for b in range(4)], None, tokens, 16, None, "GPU"]


def removed(worker, round_):
    return ["BlockRemoved", [prompt_of(worker, round_)[0] + b for b in range(4)], "GPU"]


def decide(worker, round_):
    _, _, body = router.request("POST", "/v1/completions", {"model": "m", "prompt": prompt_of(worker, round_) + [1, 2]},
                                {"x-kvrouter-dry-run": "1"})
    return json.loads(body)


def pipeline():
    return json.loads(router.request("GET", "/v1/router/sets")[2])["sets"][0]["pipeline"]


def events_reach_every_worker(round_):
    """Each worker publishes store / remove / store bursts of its own prompt (w3's last word is
    a removal); true once dry runs see every worker's final state."""
    for _ in range(5):
        for w in range(WORKERS):
            publish(w, stored(w, round_))
            publish(w, removed(w, round_))
            publish(w, stored(w, round_), *([removed(w, round_)] if w == WORKERS - 1 else []))

    def final_states_seen():
        for w in range(WORKERS - 1):
            decision = decide(w, round_)
            if decision["worker"] != f"w{w}" or decision["overlap_blocks"] != 4:
                return False
        return decide(WORKERS - 1, round_)["overlap_blocks"] == 0
    return wait_for(final_states_seen, 5)


try:
    time.sleep(0.5)  # the SUB sockets connect
    view = pipeline()
    f.check(view["kv_decoders"] == 2 and view["kv_publishers"] == WORKERS,
            f"two decoder threads share the four publishers ({view['kv_decoders']} threads, {view['kv_publishers']})")
    f.check(sorted(view["components"]) == ["kv_subscriber/0", "kv_subscriber/1"],
            f"each is a supervised component ({sorted(view['components'])})")

    # Warm up: a first store per worker, retried until the subscriptions are live.
    f.check(bool(wait_for(lambda: [publish(w, stored(w, 0)) for w in range(WORKERS)] and
                          all(decide(w, 0)["overlap_blocks"] == 4 for w in range(WORKERS)), 10)),
            "every worker's events reach the index, from both threads")
    f.check(bool(events_reach_every_worker(1)),
            "bursts of store / remove / store batches end stored on each worker, and a last removal ends empty: "
            "each publisher's batches kept their order")

    f.check(router.request("POST", "/v1/router/faults", {"set": "m", "component": "kv_subscriber"})[0] == 202,
            "the fault naming kv_subscriber is accepted")
    back = wait_for(lambda: all(c["running"] and c["restarts"] == 1 for c in pipeline()["components"].values()), 10)
    f.check(bool(back), f"both decoder threads died and were restarted, each counted once ({pipeline()['components']})")
    metrics = router.metrics()
    for shard in ("kv_subscriber/0", "kv_subscriber/1"):
        key = f'kvrouter_component_restarts_total{{set="m",model="m",component="{shard}"}}'
        f.check(metrics.get(key) == 1, f"/metrics counts {shard}'s restart ({metrics.get(key)})")
    f.check(bool(wait_for(lambda: events_reach_every_worker(2), 10)),
            "after the restarts every worker's events reach the index again, in order")
except Exception:
    print(f"kvrouter exit status: {router.proc.poll()}; its log's end:\n{router.log[-8000:]}")
    raise
finally:
    router.stop()
    for w in workers:
        w.stop()
    for pub, _ in pubs:
        pub.close(0)
    context.term()
f.exit()
