#!/usr/bin/python3
"""Integration: kvrouter answers vLLM's /tokenize and /detokenize itself, with the set's own
tokenizer and chat template, exactly as HuggingFace `tokenizers` does.

1. /tokenize of every text of the golden corpus gives the ids HF `tokenizers` gives
   (tests/data/tokenizer/qwen3_golden.json); /detokenize of those ids gives HF's decoding back,
   and of every first half (often cut inside a character) HF's replacement characters.
2. A chat's /tokenize equals `kvrouter render-chat --tokenize` (the template rendered as the
   engines render it, golden-tested against Jinja2 in chat_template_golden.py).
3. Errors: an id outside the vocabulary, a body that is not an object, neither prompt nor
   messages: 400 naming the problem. None of these requests reached a worker.
4. A prompt or chat past --max-prompt-tokens: 400 naming the limit and the field (tokenizing
   stops there), as the router refuses such prompts on every other route.
5. What only the engine knows (`return_token_strs`), and sets without a tokenizer, pass through
   to a worker (a kvrouter-mocker, whose answer carries `max_model_len`).

Usage: tokenize_test.py PATH/TO/kvrouter PATH/TO/kvrouter-mocker QWEN3_MODEL_DIR GOLDEN_JSON CORPUS_JSON
"""
import json
import subprocess
import sys

from router_harness import Failures, Mocker, Router

kvrouter, mocker_binary, model_dir, golden_path, corpus_path = sys.argv[1:6]
f = Failures()
golden = json.load(open(golden_path))
texts = json.load(open(corpus_path))["texts"]


def post(router, path, document):
    status, _, body = router.request("POST", path, document)
    return status, json.loads(body)


mocker = Mocker(mocker_binary, "--model", "m")
router = None
try:
    router = Router(kvrouter, "m", [f"{mocker.url},id=engine"], "--tokenizer", model_dir, "--engine-metrics-interval-ms", "0")
    mismatched, undecoded, cut = [], [], []
    for i, text in enumerate(texts):
        status, answer = post(router, "/tokenize", {"model": "m", "prompt": text, "add_special_tokens": False})
        if status != 200 or answer["tokens"] != golden["ids"][i] or answer["count"] != len(golden["ids"][i]):
            mismatched.append((i, status, answer))
        status, answer = post(router, "/detokenize", {"model": "m", "tokens": golden["ids"][i]})
        if status != 200 or answer["prompt"] != golden["decoded"][i]:
            undecoded.append((i, status, answer))
        half = golden["ids"][i][:len(golden["ids"][i]) // 2]
        status, answer = post(router, "/detokenize", {"tokens": half})
        if status != 200 or answer["prompt"] != golden["decoded_half"][i]:
            cut.append((i, status, answer))
    f.check(not mismatched, f"/tokenize gives HF tokenizers' ids for all {len(texts)} corpus texts ({mismatched[:2]})")
    f.check(not undecoded, f"/detokenize gives HF's text back for every one ({undecoded[:2]})")
    f.check(not cut, f"and HF's replacement characters for ids cut inside a character ({cut[:2]})")
    status, answer = post(router, "/tokenize", {"prompt": "Hello, world!"})
    f.check(status == 200 and answer["tokens"] == [9707, 11, 1879, 0], f"add_special_tokens (default) adds none for Qwen ({answer})")

    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is a KV cache?"}]
    status, answer = post(router, "/tokenize", {"model": "m", "messages": messages})
    cli = subprocess.run([kvrouter, "render-chat", "--tokenizer-config", model_dir + "/tokenizer_config.json", "--tokenize",
                          "--tokenizer", model_dir + "/tokenizer.json"], input=json.dumps(messages), capture_output=True,
                         text=True, timeout=30)
    f.check(status == 200 and cli.returncode == 0 and answer["tokens"] == json.loads(cli.stdout),
            f"a chat's /tokenize equals render-chat --tokenize ({status}, {cli.stderr.strip()[:120]})")

    for document, why in (({"tokens": [1, 10 ** 9]}, "is not in the vocabulary"), ({"tokens": "x"}, "tokens must be an array"),
                          ({"model": "m"}, "give prompt or messages"), ({"prompt": 5}, "prompt must be a string")):
        path = "/detokenize" if "tokens" in document else "/tokenize"
        status, answer = post(router, path, document)
        f.check(status == 400 and why in answer["error"]["message"], f"{path} {document}: 400 '{why}' ({status} {answer})")
    status, _, body = router.request("POST", "/tokenize", b"[[[[1]]]]")
    f.check(status == 400, "a body that is not an object: 400")
    served = router.metrics()
    f.check(served["kvrouter_tokenize_answered_total"] >= 3 * len(texts) and
            served.get('kvrouter_worker_routed_total{set="m",model="m",worker="engine"}', 0) == 0,
            "all of these were answered by kvrouter, none routed to the engine")

    status, answer = post(router, "/tokenize", {"model": "m", "prompt": "a b c", "return_token_strs": True})
    f.check(status == 200 and "max_model_len" in answer, f"return_token_strs passes through to the engine ({answer})")
    router.stop()

    router = Router(kvrouter, "m", [f"{mocker.url},id=engine"], "--tokenizer", model_dir, "--engine-metrics-interval-ms", "0",
                    "--max-prompt-tokens", "64")
    long_text = " ".join(["word"] * 5000)
    for document, field in (({"prompt": long_text}, "prompt"), ({"messages": [{"role": "user", "content": long_text}]}, "messages")):
        status, answer = post(router, "/tokenize", document)
        f.check(status == 400 and answer["error"]["message"] == "the prompt is longer than the 64 tokens this router accepts"
                and answer["error"]["param"] == field, f"/tokenize past --max-prompt-tokens: 400 naming {field} ({status} {answer})")
    status, answer = post(router, "/tokenize", {"prompt": " ".join(["word"] * 64)})
    f.check(status == 200 and answer["count"] == 64, f"a prompt of exactly the limit is tokenized ({status} {answer})")
    router.stop()
    router = Router(kvrouter, "m", [f"{mocker.url},id=engine"], "--engine-metrics-interval-ms", "0")
    status, answer = post(router, "/tokenize", {"model": "m", "prompt": "a b c"})
    f.check(status == 200 and answer.get("max_model_len") and answer["count"] == 3,
            f"without a tokenizer, /tokenize passes through to the engine ({answer})")
    f.check(router.stop() == 0, "kvrouter stops cleanly")
    router = None
finally:
    if router and router.proc.poll() is None:
        router.proc.kill()
    mocker.stop()
f.exit()
