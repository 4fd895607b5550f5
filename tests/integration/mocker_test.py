#!/usr/bin/python3
"""kvrouter-mocker behaves as an engine does, and kvrouter's index of it is its true cache.

Three mockers on loopback (ipc:// sockets for KV events: they bind, as vLLM binds wildcard
endpoints), publishing vLLM's map form with 25% of batches dropped, SGLang's form over two
data-parallel ranks, and vLLM's array form with 32-byte bin hashes. `kvrouter kv-index`
subscribes to all of them on three decoder threads (m0 and m2 share one, each of m1's ranks
has its own) while token-id traffic with shared prefixes fills small caches (so
blocks are evicted) and one mocker restarts, losing its first batches after the restart. Its
index must equal every rank's `/mocker/cache` block for block. Then: streaming is
incremental, prefix-cache metrics count hits, bad requests get OpenAI-shaped errors, and a
multimodal mocker's events let kvrouter match image blocks.

usage: mocker_test.py KVROUTER_BINARY MOCKER_BINARY
"""
import http.client
import json
import os
import random
import subprocess
import sys
import tempfile
import time

from router_harness import Failures, Mocker, Router


def prompt(group, variant, rng_seed):
    """Token ids: a 64-token prefix shared by the group, then a private tail."""
    rng = random.Random(group * 1000 + variant * 7 + rng_seed)
    shared = [group * 100 + i for i in range(64)]
    return shared + [rng.randrange(1000, 50000) for _ in range(rng.randrange(8, 60))]


def main():
    kvrouter, mocker_bin = sys.argv[1], sys.argv[2]
    f = Failures()
    sockets = tempfile.mkdtemp()
    common = ["--block-size", "16", "--num-blocks", "48", "--speedup", "100"]
    specs = [
        ("m0", ["--event-format", "vllm-map", "--drop-batches-pct", "25"], ""),
        ("m1", ["--event-format", "sglang", "--dp-size", "2"], ",dp_size=2"),
        ("m2", ["--event-format", "vllm-array", "--bin-hashes"], ""),
    ]
    mockers = {}
    workers = []
    for name, flags, extra in specs:
        kv, replay = f"ipc://{sockets}/{name}", f"ipc://{sockets}/{name}-replay"
        mockers[name] = Mocker(mocker_bin, *common, "--kv-events-endpoint", kv, "--replay-endpoint", replay, *flags)
        workers += ["--worker", f"{mockers[name].url},kv_events={kv},replay={replay},id={name}{extra}"]
    index = subprocess.Popen([kvrouter, "kv-index", *workers, "--kv-decoders", "3", "--block-size", "16", "--idle", "3", "--duration", "90"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)  # let the subscriptions settle before the first batch
        sent = 0
        for round_ in range(6):
            for name, m in mockers.items():
                for group in range(4):
                    status, _ = m.request("POST", "/v1/completions",
                                          {"model": "m", "prompt": prompt(group, round_, hash(name) % 97), "max_tokens": 2})
                    sent += status == 200
            if round_ == 1:
                # One certain gap whatever the 25 % drops do: a batch dropped, the next delivered.
                for drop_pct, group in ((100, 7), (0, 8)):
                    mockers["m0"].request("POST", "/mocker/faults", {"drop_batches_pct": drop_pct})
                    mockers["m0"].request("POST", "/v1/completions",
                                          {"model": "m", "prompt": prompt(group, 7, 7), "max_tokens": 1})
                    time.sleep(0.1)  # published under this setting
                mockers["m0"].request("POST", "/mocker/faults", {"drop_batches_pct": 25})
            if round_ == 3:
                # A restart whose first batches are lost, as when the router's SUB reconnects to a
                # restarted engine late: the next live sequence, lower than the last one, shows the
                # restart, and kvrouter replays the new engine's batches from 0.
                mockers["m0"].request("POST", "/mocker/faults", {"drop_batches_pct": 100})
                f.check(mockers["m0"].request("POST", "/mocker/restart")[0] == 200, "m0 restarts mid-run")
                mockers["m0"].request("POST", "/v1/completions", {"model": "m", "prompt": prompt(9, 9, 9), "max_tokens": 1})
                time.sleep(0.1)  # its batches are published (and dropped) before drops go back to 25 %
                mockers["m0"].request("POST", "/mocker/faults", {"drop_batches_pct": 25})
        # The last batches must arrive live, or nothing would reveal a gap at the very end.
        mockers["m0"].request("POST", "/mocker/faults", {"drop_batches_pct": 0})
        for group in range(2):
            mockers["m0"].request("POST", "/v1/completions", {"model": "m", "prompt": prompt(group, 99, 1), "max_tokens": 1})
        f.check(sent == 72, f"every request is answered ({sent}/72)")
        out, err = index.communicate(timeout=120)
        dump = json.loads(out)
        by_worker = {w["worker"]: set(w["sequence_hashes"]) for w in dump["workers"]}
        for name, m in mockers.items():
            ranks = json.loads(m.request("GET", "/mocker/cache")[1])["ranks"]
            for r, rank in enumerate(ranks):
                label = name if len(ranks) == 1 else f"{name}/dp{r}"
                truth = set(rank["sequence_hashes"])
                got = by_worker.get(label, set())
                f.check(got == truth and len(truth) > 0,
                        f"the index of {label} equals its cache ({len(got)} vs {len(truth)} blocks; "
                        f"{len(got - truth)} extra, {len(truth - got)} missing)")
        evicted = sum(m.metric("vllm:prefix_cache_queries_total") for m in mockers.values()) / 16 > 48 * 4
        f.check(evicted, "the traffic exceeded the caches, so blocks were evicted")
        m0 = next(s for s in dump["subscriber"] if s["publisher"] == "m0")
        f.check(m0["gaps"] > 0 and m0["replayed"] > 0 and m0["restarts"] >= 1,
                f"m0's drops were replayed and its restart seen (gaps {m0['gaps']}, replayed {m0['replayed']}, "
                f"restarts {m0['restarts']})")
        f.check(mockers["m0"].metric("kvrouter_mocker_kv_event_batches_dropped_total") > 0, "m0 did drop batches")
    finally:
        if index.poll() is None:
            index.kill()
        for m in mockers.values():
            m.stop()

    # Multimodal: the mocker expands a data-URI image exactly as kvrouter does and names it in
    # extra_keys; kvrouter, routing on the mocker's KV events alone, finds the same image's blocks
    # in full and another image's only up to the image.
    from mm_routing_test import IMAGE_PAD, TEMPLATE, TOKENIZER, chat, data_uri, png, rendered_ids
    kv, replay = f"ipc://{sockets}/mm", f"ipc://{sockets}/mm-replay"
    engine = Mocker(mocker_bin, "--kv-events-endpoint", kv, "--replay-endpoint", replay, "--event-format", "vllm-map",
                    "--tokenizer", TOKENIZER, "--tokenizer-config", TEMPLATE, "--image-token-id", str(IMAGE_PAD),
                    "--speedup", "100")
    router = Router(kvrouter, "vl", [f"{engine.url},kv_events={kv},replay={replay},id=engine"], "--router-mode", "kv",
                    "--tokenizer", TOKENIZER, "--tokenizer-config", TEMPLATE, "--image-token-id", str(IMAGE_PAD),
                    "--health-interval-ms", "0")
    try:
        a, b = data_uri(png(224, 224, 10)), data_uri(png(224, 224, 240))
        status, _, _ = router.request("POST", "/v1/chat/completions", dict(chat("vl", a), max_tokens=2))
        f.check(status == 200, "an image chat goes through kvrouter to the mocker")
        deadline, same = time.time() + 10, {}
        while time.time() < deadline:
            same = json.loads(router.request("POST", "/v1/chat/completions", chat("vl", a), {"x-kvrouter-dry-run": "1"})[2])
            if same["overlap_blocks"] > 0:
                break
            time.sleep(0.1)
        f.check(same["overlap_blocks"] == same["prompt_tokens"] // 16,
                f"from the engine's events alone, the same image overlaps in full ({same['overlap_blocks']} blocks)")
        other = json.loads(router.request("POST", "/v1/chat/completions", chat("vl", b), {"x-kvrouter-dry-run": "1"})[2])
        before_image = rendered_ids(kvrouter, chat("vl", a)).index(IMAGE_PAD)
        f.check(other["overlap_blocks"] == before_image // 16,
                f"another image overlaps only up to it ({other['overlap_blocks']} == {before_image // 16} blocks)")
    finally:
        router.stop()
        engine.stop()

    # Streaming arrives token by token, at the modelled step time (100 ms a step here).
    slow = Mocker(mocker_bin, "--step-base-us", "100000", "--prefill-us-per-token", "0", "--decode-us-per-seq", "0")
    try:
        c = http.client.HTTPConnection("127.0.0.1", slow.port, timeout=30)
        c.request("POST", "/v1/chat/completions",
                  json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4, "stream": True}))
        r = c.getresponse()
        start, arrivals, lines = time.time(), [], []
        while True:
            line = r.fp.readline()
            if not line:
                break
            if line.startswith(b"data: "):
                arrivals.append(time.time() - start)
                lines.append(line[6:].strip())
                if lines[-1] == b"[DONE]":
                    break
        f.check(r.getheader("Content-Type") == "text/event-stream" and lines[-1] == b"[DONE]" and len(lines) == 5,
                f"a chat stream is 4 vLLM chunks then [DONE] ({len(lines)} lines)")
        gaps = [b - a for a, b in zip(arrivals, arrivals[1:4])]
        f.check(all(0.07 < g < 0.5 for g in gaps), f"chunks arrive one step apart: {[round(g, 3) for g in gaps]} s")
        first = json.loads(lines[0])
        f.check(first["object"] == "chat.completion.chunk" and first["choices"][0]["delta"]["role"] == "assistant",
                "the first chunk carries the assistant role")

        ids = list(range(1000, 1100))
        for _ in range(2):
            status, body = slow.request("POST", "/v1/completions", {"model": "m", "prompt": ids, "max_tokens": 1})
        f.check(status == 200 and json.loads(body)["usage"]["prompt_tokens"] == 100, "a token-id prompt is answered")
        f.check(slow.metric("vllm:prefix_cache_hits_total") >= 96,
                f"the repeated prompt's 6 full blocks hit the prefix cache ({slow.metric('vllm:prefix_cache_hits_total')} tokens)")
        status, body = slow.request("POST", "/v1/completions", "{not json")
        f.check(status == 400 and "error" in json.loads(body), "malformed JSON gets a 400 with an error object")
        status, body = slow.request("POST", "/v1/completions", {"model": "m", "prompt": list(range(300000)), "max_tokens": 1})
        f.check(status == 400 and "KV blocks" in json.loads(body)["error"]["message"],
                "a prompt larger than the whole cache gets a 400 naming the cause")
        status, body = slow.request("GET", "/nope?x=1")
        f.check(status == 200 and json.loads(body)["echo"]["target"] == "/nope?x=1",
                "a route the mocker has no engine behaviour for is echoed back (for pass-through tests)")
    finally:
        slow.stop()
    f.exit()


if __name__ == "__main__":
    main()
