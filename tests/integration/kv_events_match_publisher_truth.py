#!/usr/bin/python3
"""Integration: two engine-shaped publishers in another process than the router (vLLM array form
with int64 hashes; vLLM map form with bin hashes and 4-frame replay), each dropping batches on
purpose and then restarting at sequence 0. `kvrouter kv-index` subscribes as the router does;
at the end its index must equal each publisher's ground truth, block for block.

Usage: kv_events_match_publisher_truth.py PATH/TO/kvrouter
"""
import json
import os
import subprocess
import sys
import time

import zmq

sys.path.insert(0, os.path.dirname(__file__))
from kv_publisher import Engine  # noqa: E402

BLOCK_SIZE = 4


def main():
    kvrouter = sys.argv[1]
    context = zmq.Context()
    engines = [Engine(context, "vllm-array", BLOCK_SIZE, rng_seed=1),
               Engine(context, "vllm-map", BLOCK_SIZE, topic=b"kv", rng_seed=2)]
    args = [kvrouter, "kv-index", "--block-size", str(BLOCK_SIZE), "--idle", "3", "--duration", "60"]
    for i, e in enumerate(engines):
        args += ["--worker", f"http://127.0.0.1:{9000 + i},kv_events=tcp://127.0.0.1:{e.port},"
                             f"replay=tcp://127.0.0.1:{e.replay_port},id=w{i},topic={e.topic.decode()}"]
    router = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)  # let the router's SUB sockets connect (later joins are replayed anyway)

    for phase in ("before restart", "after restart"):
        for step in range(300):
            for e in engines:
                # Drop ~10% of live batches, never the last one (a lost tail shows no gap), and
                # the first three after a restart (as when the router's SUB reconnects late).
                drop = step < 299 and (e.rng.random() < 0.10 or (phase == "after restart" and step < 3))
                e.publish_step(drop=drop)
            if step % 50 == 0:
                time.sleep(0.02)
        if phase == "before restart":
            time.sleep(0.3)
            for e in engines:
                e.restart()

    out, err = router.communicate(timeout=90)
    for e in engines:
        e.close()
    if router.returncode != 0:
        print(err, file=sys.stderr)
        sys.exit(f"kvrouter kv-index exited with {router.returncode}")
    index = json.loads(out)
    failures = []
    for i, e in enumerate(engines):
        worker = index["workers"][i]
        stats = index["subscriber"][i]
        got = sorted(int(h) for h in worker["sequence_hashes"])
        truth = e.truth()
        print(f"w{i} ({e.encoding}): {len(truth)} blocks in truth, {len(got)} in the index; "
              f"dropped {e.dropped}, gaps {stats['gaps']}, replayed {stats['replayed']}, "
              f"restarts {stats['restarts']}, other-tier events {worker['events']['other_tier_events']}")
        if got != truth:
            failures.append(f"w{i}: index differs from truth: missing {len(set(truth) - set(got))}, "
                            f"extra {len(set(got) - set(truth))}")
        if stats["gaps"] == 0 or stats["replayed"] == 0:
            failures.append(f"w{i}: expected gaps and replays, got {stats}")
        if stats["restarts"] != 1:
            failures.append(f"w{i}: expected one restart, got {stats['restarts']}")
        if stats["decode_errors"] != 0:
            failures.append(f"w{i}: decode errors {stats['decode_errors']}")
        if worker["events"]["other_tier_events"] == 0:
            failures.append(f"w{i}: the CPU-tier events were not counted")
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)
    print("kv-index equals both publishers' ground truth")


if __name__ == "__main__":
    main()
