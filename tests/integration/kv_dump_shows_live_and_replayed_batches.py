#!/usr/bin/python3
"""Integration: `kvrouter kv-dump --connect ... --replay ... --from 2` prints the replayed batches
2..4 (marked replay, in order) and then the live ones, every event with its fields.

Usage: kv_dump_shows_live_and_replayed_batches.py PATH/TO/kvrouter
"""
import json
import os
import subprocess
import sys
import time

import zmq

sys.path.insert(0, os.path.dirname(__file__))
from kv_publisher import Engine  # noqa: E402


def main():
    kvrouter = sys.argv[1]
    context = zmq.Context()
    engine = Engine(context, "vllm-map", 4, topic=b"kv", rng_seed=5)
    for _ in range(5):
        engine.publish_step(drop=True)  # history only the replay socket can show
    dump = subprocess.Popen([kvrouter, "kv-dump", "--connect", f"tcp://127.0.0.1:{engine.port}", "--topic", "kv",
                             "--replay", f"tcp://127.0.0.1:{engine.replay_port}", "--from", "2", "--count", "6",
                             "--duration", "20"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    for _ in range(3):
        engine.publish_step()
        time.sleep(0.05)
    out, err = dump.communicate(timeout=30)
    engine.close()
    lines = [json.loads(line) for line in out.splitlines()]
    seqs = [(line["seq"], line["source"]) for line in lines]
    expected = [(2, "replay"), (3, "replay"), (4, "replay"), (5, "live"), (6, "live"), (7, "live")]
    if dump.returncode != 0 or seqs != expected:
        sys.exit(f"kv-dump printed {seqs}, expected {expected} (exit {dump.returncode}): {err}")
    first = next(e for line in lines for e in line["events"] if e["type"] == "BlockStored")
    for field in ("type", "block_hashes", "parent_block_hash", "token_ids", "block_size", "medium", "group_idx",
                  "kv_cache_spec_kind", "images", "lora_name"):
        if field not in first:
            sys.exit(f"kv-dump's event lacks {field}: {first}")
    if lines[0]["topic"] != "kv" or lines[3]["topic"] != "kv" or lines[0]["dp_rank"] != 0:
        sys.exit(f"topic or dp rank missing: {lines[0]}")
    print("kv-dump printed replayed then live batches with every field")


if __name__ == "__main__":
    main()
