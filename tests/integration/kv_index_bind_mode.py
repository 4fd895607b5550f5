#!/usr/bin/python3
"""Integration: the bind topology. `kvrouter kv-index --kv-bind` binds one SUB; two engines connect
their PUB sockets to it (as vLLM does when its endpoint names a host) and are told apart by
topic prefix, one with SGLang's `\\0sgl-kv-epoch=...` suffix. The index must equal both
engines' ground truth.

Usage: kv_index_bind_mode.py PATH/TO/kvrouter
"""
import json
import os
import subprocess
import sys
import time

import zmq

sys.path.insert(0, os.path.dirname(__file__))
from kv_publisher import Engine  # noqa: E402
from router_harness import free_port  # noqa: E402


def main():
    kvrouter = sys.argv[1]
    port = free_port()
    router = subprocess.Popen([kvrouter, "kv-index", "--kv-bind", f"tcp://127.0.0.1:{port}", "--block-size", "4",
                               "--idle", "2", "--duration", "30",
                               "--worker", "http://127.0.0.1:9001,id=a,topic=eng-a",
                               "--worker", "http://127.0.0.1:9002,id=b,topic=eng-b"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    context = zmq.Context()
    # The engines' caches and payloads come from the test publisher; here they connect instead of binding.
    engines = [Engine(context, "vllm-array", 4, rng_seed=11), Engine(context, "vllm-map", 4, rng_seed=12)]
    topics = [b"eng-a", b"eng-b\x00sgl-kv-epoch=1"]
    pubs = []
    for e in engines:
        e.pub.close(0)  # the test publisher binds by default; this topology connects
        pub = context.socket(zmq.PUB)
        pub.connect(f"tcp://127.0.0.1:{port}")
        pubs.append(pub)
    time.sleep(1.0)
    for step in range(200):
        for e, pub, topic in zip(engines, pubs, topics):
            e.pub = pub
            e.topic = topic
            e.publish_step()
        if step % 50 == 0:
            time.sleep(0.02)
    out, err = router.communicate(timeout=60)
    for e in engines:
        e.close()
    if router.returncode != 0:
        sys.exit(f"kv-index failed: {err}")
    index = json.loads(out)
    failures = []
    for i, e in enumerate(engines):
        got = sorted(int(h) for h in index["workers"][i]["sequence_hashes"])
        print(f"{'ab'[i]}: {len(e.truth())} blocks in truth, {len(got)} in the index, "
              f"gaps {index['subscriber'][i]['gaps']}")
        if got != e.truth():
            failures.append(f"worker {'ab'[i]}: the index differs from the engine")
    if failures:
        sys.exit("\n".join(failures))
    print("bind mode: the index equals both engines' ground truth")


if __name__ == "__main__":
    main()
