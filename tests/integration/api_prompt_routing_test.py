#!/usr/bin/python3
"""Integration: `/v1/responses` and Anthropic-style `/v1/messages` route by prefix like the chat
they render to, and what is not certain to render that way routes on load and is counted.

Two kvrouter-mockers in approximate mode (the index predicted from the router's own decisions)
with the Qwen3 tokenizer and chat template:
1. A /v1/responses request (instructions + input) is routed; the equivalent chat completion
   (system + user) then finds every one of its blocks on that worker (dry run).
2. The same for /v1/messages (system + messages).
3. A /v1/responses request with tools is routed on load (no prompt blocks) and counted in
   kvrouter_prompts_routed_on_load_total; the worker still gets its body as sent.

Usage: api_prompt_routing_test.py PATH/TO/kvrouter PATH/TO/kvrouter-mocker QWEN3_MODEL_DIR
"""
import json
import sys

from router_harness import Failures, Mocker, Router

kvrouter, mocker_binary, model_dir = sys.argv[1:4]
f = Failures()
LONG = "You answer questions about distributed systems. " * 30


def post(router, path, document, headers=None):
    status, answer_headers, body = router.request("POST", path, document, headers)
    return status, answer_headers, json.loads(body)


def dry_chat(router, messages):
    return post(router, "/v1/chat/completions", {"model": "m", "messages": messages}, {"x-kvrouter-dry-run": "1"})[2]


mockers = [Mocker(mocker_binary, "--model", "m") for _ in range(2)]
router = None
try:
    router = Router(kvrouter, "m", [f"{m.url},id=e{i}" for i, m in enumerate(mockers)], "--tokenizer", model_dir,
                    "--no-kv-events", "--engine-metrics-interval-ms", "0")
    status, headers, answer = post(router, "/v1/responses", {"model": "m", "instructions": LONG + "one",
                                                            "input": "What is a KV cache?"})
    decision = dry_chat(router, [{"role": "system", "content": LONG + "one"}, {"role": "user", "content": "What is a KV cache?"}])
    f.check(status == 200 and answer["object"] == "response" and decision["worker"] == headers["x-kvrouter-worker"] and
            decision["prompt_blocks"] > 10 and decision["overlap_blocks"] >= decision["prompt_blocks"] - 1,
            f"a /v1/responses prompt is indexed as the chat it renders to ({headers.get('x-kvrouter-worker')}: "
            f"{decision['worker']} {decision['overlap_blocks']}/{decision['prompt_blocks']})")

    status, headers, answer = post(router, "/v1/messages", {"model": "m", "max_tokens": 8, "system": LONG + "two",
                                                           "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]})
    decision = dry_chat(router, [{"role": "system", "content": LONG + "two"}, {"role": "user", "content": "Hi"}])
    f.check(status == 200 and answer["type"] == "message" and decision["worker"] == headers["x-kvrouter-worker"] and
            decision["overlap_blocks"] >= decision["prompt_blocks"] - 1 and decision["prompt_blocks"] > 10,
            f"so is a /v1/messages prompt ({decision['overlap_blocks']}/{decision['prompt_blocks']})")

    before = router.metrics()["kvrouter_prompts_routed_on_load_total"]
    body = {"model": "m", "input": LONG, "tools": [{"type": "function", "name": "f", "parameters": {}}]}
    status, _, decision = post(router, "/v1/responses", body, {"x-kvrouter-dry-run": "1"})
    f.check(status == 200 and decision["overlap_blocks"] == 0 and
            router.metrics()["kvrouter_prompts_routed_on_load_total"] == before + 1,
            f"a /v1/responses request with tools routes on load, counted ({decision.get('prompt_blocks')})")
    status, _, answer = post(router, "/v1/responses", body)
    f.check(status == 200 and answer["object"] == "response", "and is still served by a worker")
    f.check(router.stop() == 0, "kvrouter stops cleanly")
    router = None
finally:
    if router and router.proc.poll() is None:
        router.proc.kill()
    for m in mockers:
        m.stop()
f.exit()
