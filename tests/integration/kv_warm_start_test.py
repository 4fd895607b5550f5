#!/usr/bin/python3
"""Integration: a subscriber learns idle engines' caches at once. `kvrouter kv-index`, started
after an engine published 30 batches and went quiet, asks its replay endpoint from 0 without
waiting for a live batch (there will be none), and prints an index equal to the engine's cache
as soon as the replay has settled. Usage: kv_warm_start_test.py PATH/TO/kvrouter"""
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
    engine = Engine(context, "vllm-map", BLOCK_SIZE, rng_seed=11)
    for _ in range(30):
        engine.publish_step()
    started = time.time()
    out = subprocess.run([kvrouter, "kv-index", "--block-size", str(BLOCK_SIZE), "--idle", "1", "--duration", "20",
                          "--worker", f"http://127.0.0.1:9000,kv_events=tcp://127.0.0.1:{engine.port},"
                                      f"replay=tcp://127.0.0.1:{engine.replay_port},id=w0"],
                         capture_output=True, text=True, timeout=60)
    elapsed = time.time() - started
    engine.close()
    f = Failures()
    check = f.check
    check(out.returncode == 0, f"kv-index exits 0 ({out.stderr.strip()[-200:]})")
    dump = json.loads(out.stdout)
    indexed = sorted(int(h) for h in dump["workers"][0]["sequence_hashes"])
    truth = engine.truth()
    check(len(truth) > 0 and indexed == truth, f"the idle engine's cache is indexed ({len(indexed)} of {len(truth)} blocks)")
    check(dump["subscriber"][0]["live_batches"] == 0, "from its replay alone (no live batch came)")
    check(elapsed < 5, f"printed {elapsed:.1f} s after start (1 s of --idle after the replay settled)")
    context.term()
    f.exit()


if __name__ == "__main__":
    main()
