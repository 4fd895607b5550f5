#!/usr/bin/python3
"""A hybrid model's KV-cache groups: kvrouter predicts what the engine really reuses.

Three mockers model a hybrid engine (`--hybrid-sliding-window 48 --hybrid-mamba`): full
attention in group 0, a sliding window of 48 tokens in group 1 that frees what falls out of its
window at once, and a mamba group 2 that keeps one state per prompt, at its last full block.
They publish vLLM's events with `group_idx` and `kv_cache_spec_kind` (map form, array form) and
report `usage.prompt_tokens_details.cached_tokens` (`--enable-prompt-tokens-details`), the
truth. kvrouter routes 2000 token-id completions of shared-prefix groups, one at a time, and
says in `x-kvrouter-overlap-blocks` how many blocks it predicted the chosen worker would reuse.
For at least 95% of the requests the prediction is within one block of the engine's own count.

The test also counts what one chain of every group's blocks would predict: the longest prefix
any earlier prompt on the worker shares (no eviction here: the caches hold everything). The
engine reuses less for most of them, which is why a router that ignores the groups is wrong.

usage: hybrid_groups_test.py KVROUTER_BINARY MOCKER_BINARY [REQUESTS]
(500 requests under KVR_SANITIZER_BUILD)
"""
import json
import os
import random
import sys
import tempfile
import time

from router_harness import Failures, Mocker, Router

BLOCK = 16


def prompts(count, seed=40):
    """Shared-prefix groups of conversations: a prompt is a new question on the group's system
    prompt, the next turn of an earlier prompt (all of it, and more), or an earlier prompt cut
    somewhere and continued otherwise (an edited question, a branch)."""
    rng = random.Random(seed)
    groups = [[rng.randrange(1000, 50000) for _ in range(BLOCK * rng.randrange(2, 12))] for _ in range(24)]
    seen = {g: [] for g in range(len(groups))}
    for _ in range(count):
        g = rng.randrange(len(groups))
        base = groups[g]
        draw = rng.random()
        if seen[g] and draw < 0.5:
            base = rng.choice(seen[g][-8:])
        elif seen[g] and draw < 0.8:
            earlier = rng.choice(seen[g])
            base = earlier[:BLOCK * rng.randrange(1, len(earlier) // BLOCK + 1)]
        tokens = base + [rng.randrange(1000, 50000) for _ in range(rng.randrange(5, 4 * BLOCK))]
        if len(tokens) > 60 * BLOCK:  # a conversation too long starts again
            tokens = groups[g] + tokens[-2 * BLOCK:]
        seen[g].append(tokens)
        yield tokens


def shared_blocks(a, b):
    n = 0
    while (n + 1) * BLOCK <= min(len(a), len(b)) and a[n * BLOCK:(n + 1) * BLOCK] == b[n * BLOCK:(n + 1) * BLOCK]:
        n += 1
    return n


def main():
    kvrouter, mocker_bin = sys.argv[1], sys.argv[2]
    # Under the sanitizers (KVR_SANITIZER_BUILD) a quarter of them: the same checks, in the time
    # CI has for that build.
    requests = int(sys.argv[3]) if len(sys.argv) > 3 else 500 if os.environ.get("KVR_SANITIZER_BUILD") else 2000
    f = Failures()
    sockets = tempfile.mkdtemp()
    common = ["--block-size", str(BLOCK), "--num-blocks", "100000", "--speedup", "100", "--hybrid-sliding-window", "48",
              "--hybrid-mamba", "--enable-prompt-tokens-details"]
    mockers, workers = [], []
    for i, form in enumerate(["vllm-map", "vllm-array", "vllm-map"]):
        kv = f"ipc://{sockets}/m{i}"
        mockers.append(Mocker(mocker_bin, *common, "--kv-events-endpoint", kv, "--event-format", form))
        workers.append(f"{mockers[-1].url},kv_events={kv},id=m{i}")
    router = Router(kvrouter, "m", workers, "--block-size", str(BLOCK))
    try:
        within, exact, one_chain_wrong, reused_any = 0, 0, 0, 0
        history = {}
        worst = []
        for n, tokens in enumerate(prompts(requests)):
            status, headers, body = router.request("POST", "/v1/completions",
                                                   {"model": "m", "prompt": tokens, "max_tokens": 1})
            if status != 200:
                f.check(False, f"request {n} answered {status}: {body[:200]!r}")
                break
            worker = headers.get("x-kvrouter-worker")
            predicted = int(headers.get("x-kvrouter-overlap-blocks", "-1"))
            actual = json.loads(body)["usage"]["prompt_tokens_details"]["cached_tokens"] // BLOCK
            one_chain = max((shared_blocks(tokens, earlier) for earlier in history.get(worker, [])), default=0)
            history.setdefault(worker, []).append(tokens)
            within += abs(predicted - actual) <= 1
            exact += predicted == actual
            one_chain_wrong += abs(one_chain - actual) > 1
            reused_any += actual > 0
            if abs(predicted - actual) > 1 and len(worst) < 5:
                worst.append((n, worker, predicted, actual, one_chain))
            time.sleep(0.01)  # the engine's events reach the router before the next request is routed
        else:
            share = within / requests
            print(f"{requests} requests: predicted within one block of the engine's cached tokens {within} "
                  f"({share:.1%}), exactly {exact}; the engine reused blocks for {reused_any}; one chain of every "
                  f"group's blocks would be off by more than a block for {one_chain_wrong}; worst {worst}")
            f.check(share >= 0.95, f"at least 95% of predictions within one block of the engine's ({share:.1%})")
            f.check(reused_any >= requests // 3, f"the workload reuses the cache ({reused_any} requests)")
            f.check(one_chain_wrong >= requests // 10,
                    f"the groups matter: one chain would be wrong by more than a block for {one_chain_wrong}")
    finally:
        router.stop()
        for m in mockers:
            m.stop()
    f.exit()


main()
