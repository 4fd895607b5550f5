#!/usr/bin/python3
"""Integration: a publisher whose sequence number jumps far ahead of what its replay endpoint
can give back (it answers every replay with only the end marker) makes `kvrouter kv-index`
ask for replay a few times with back-off, then give up, clear that publisher and carry on
live: a handful of replay requests in seconds, not a tight loop, and the batches after the
jump are indexed. Usage: kv_replay_storm_test.py PATH/TO/kvrouter"""
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
    engine = Engine(context, "vllm-array", BLOCK_SIZE, rng_seed=3, forgetful_replay=True)
    router = subprocess.Popen([kvrouter, "kv-index", "--block-size", str(BLOCK_SIZE), "--idle", "2", "--duration", "30",
                               "--worker", f"http://127.0.0.1:9000,kv_events=tcp://127.0.0.1:{engine.port},"
                                           f"replay=tcp://127.0.0.1:{engine.replay_port},id=w0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # the SUB connects
    for _ in range(20):
        engine.publish_step()
    time.sleep(0.3)
    engine.seq = 10 ** 12  # the sequence jumps far ahead
    started = time.time()
    for step in range(60):  # live traffic goes on, in order, for about 3 s
        engine.publish_step()
        time.sleep(0.05)
    elapsed = time.time() - started
    out, err = router.communicate(timeout=60)
    engine.close()
    f = Failures()
    check = f.check
    check(router.returncode == 0, f"kv-index exits 0 ({err.strip()[-200:]})")
    dump = json.loads(out)
    counters = dump["subscriber"][0]
    check(engine.replay_requests <= 5,
          f"{engine.replay_requests} replay requests in {elapsed:.1f} s: a few with back-off, not a tight loop")
    check(counters["replays_given_up"] == 1, f"the gap is given up once ({counters['replays_given_up']})")
    check(counters["replays_without_progress"] >= 2, f"the fruitless replays are counted ({counters['replays_without_progress']})")
    blocks = dump["workers"][0]["blocks"]
    check(blocks > 0, f"the batches after the jump are indexed ({blocks} blocks)")
    check(counters["applied"] >= 20 + 50, f"in-order batches after the jump are applied ({counters['applied']})")
    context.term()
    f.exit()


if __name__ == "__main__":
    main()
