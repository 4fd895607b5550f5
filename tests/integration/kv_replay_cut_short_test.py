#!/usr/bin/python3
"""Integration: an engine whose replay answers are cut short (a ROUTER socket drops what exceeds
its send high-water mark, the end marker included, so a replay of a large buffer ends silently)
is still caught up quickly: `kvrouter kv-index`, started after the engine has published 450
batches, replays them 100 at a time, each replay ending once it goes quiet rather than at the
5 s replay timeout, and its index then equals the engine's cache while live traffic goes on.
Usage: kv_replay_cut_short_test.py PATH/TO/kvrouter"""
import json
import os
import subprocess
import sys
import time

import zmq

sys.path.insert(0, os.path.dirname(__file__))
from kv_publisher import Engine  # noqa: E402
from router_harness import Failures  # noqa: E402

BLOCK_SIZE = 4


def main():
    kvrouter = sys.argv[1]
    context = zmq.Context()
    engine = Engine(context, "vllm-array", BLOCK_SIZE, rng_seed=5, replay_limit=100)
    for _ in range(450):  # before the router starts: only a replay can tell it about these
        engine.publish_step()
    started = time.time()
    router = subprocess.Popen([kvrouter, "kv-index", "--block-size", str(BLOCK_SIZE), "--idle", "1.5", "--duration", "30",
                               "--worker", f"http://127.0.0.1:9000,kv_events=tcp://127.0.0.1:{engine.port},"
                                           f"replay=tcp://127.0.0.1:{engine.replay_port},id=w0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)  # the SUB connects; then live traffic, in order, while the replays run
    for _ in range(40):
        engine.publish_step()
        time.sleep(0.05)
    out, err = router.communicate(timeout=60)
    elapsed = time.time() - started
    engine.close()
    f = Failures()
    check = f.check
    check(router.returncode == 0, f"kv-index exits 0 ({err.strip()[-200:]})")
    dump = json.loads(out)
    counters = dump["subscriber"][0]
    check(counters["replays_cut_short"] >= 4, f"each replay of 100 batches ended when it went quiet ({counters['replays_cut_short']})")
    check(counters["replayed"] >= 450, f"the 450 batches published before the router started were replayed ({counters['replayed']})")
    check(counters["replay_unavailable"] == 0, f"no replay timed out and cleared the index ({counters['replay_unavailable']})")
    truth = engine.truth()
    indexed = sorted(int(h) for h in dump["workers"][0]["sequence_hashes"])
    check(indexed == truth, f"the index equals the engine's cache ({len(indexed)} vs {len(truth)} blocks)")
    check(elapsed < 12, f"caught up in {elapsed:.1f} s (timeouts would take 5 s per replay)")
    context.term()
    f.exit()


if __name__ == "__main__":
    main()
