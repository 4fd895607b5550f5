#!/usr/bin/python3
"""kvrouter's demo until the simulated engine and the load generator land: three stand-in
workers (tests/integration/fake_worker.py), then the same conversation-shaped traffic through
kvrouter in approximate kv mode (Qwen3 tokenizer) and in round-robin mode. kv mode keeps each
document's requests on the worker that already holds its prefix; round-robin scatters them.

Usage: scripts/demo.py PATH/TO/kvrouter PATH/TO/tokenizer.json
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from router_harness import Router, Worker  # noqa: E402

kvrouter, tokenizer = sys.argv[1], sys.argv[2]
documents = {
    "manual": "You are a support assistant for a router of LLM requests. The router reads the KV-cache events "
              "of every worker and sends each request where most of its prompt is already cached. " * 6,
    "story": "Once upon a time a cluster of inference servers learned to share their memories, so that a "
             "conversation begun on one of them could continue without recomputing its past. " * 6,
}
questions = ["What does it do?", "Why does it matter?", "How is load balanced?", "What if a worker fails?"]
traffic = [(doc, q) for q in questions for doc in documents]  # interleaved, as real traffic is

workers = [Worker(f"w{i}") for i in range(3)]
try:
    print(f"workers: {', '.join(w.url for w in workers)}\n")
    rows = {}
    for mode, flags in (("kv (approximate, Qwen3 tokens)", ["--no-kv-events", "--tokenizer", tokenizer]),
                        ("round-robin", ["--router-mode", "round-robin"])):
        router = Router(kvrouter, "demo", [f"{w.url},id={w.name}" for w in workers], "--health-interval-ms", "0", *flags)
        print(f"== {mode}")
        placed = {doc: [] for doc in documents}
        for doc, question in traffic:
            body = {"model": "demo", "prompt": documents[doc] + question, "max_tokens": 16}
            _, _, decision = router.request("POST", "/v1/completions", body, {"x-kvrouter-dry-run": "1"})
            decision = json.loads(decision)
            status, _, answer = router.request("POST", "/v1/completions", body)
            worker = json.loads(answer)["worker"]
            placed[doc].append(worker)
            print(f"  {doc:7s} {question:26s} -> {worker}  ({decision['overlap_blocks']:2d} of "
                  f"{decision['prompt_blocks']} blocks already cached there, HTTP {status})")
        routed = {w.name: sum(ws.count(w.name) for ws in placed.values()) for w in workers}
        rows[mode] = {doc: len(set(ws)) for doc, ws in placed.items()}
        print(f"  requests per worker: {routed}\n")
        router.stop()
    print("== workers each document's requests went to (fewer = more prefix-cache reuse)")
    print(f"  {'mode':34s} " + " ".join(f"{d:>8s}" for d in documents))
    for mode, counts in rows.items():
        print(f"  {mode:34s} " + " ".join(f"{counts[d]:>8d}" for d in documents))
finally:
    for w in workers:
        w.stop()
