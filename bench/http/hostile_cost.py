#!/usr/bin/python3
"""What one hostile request costs a kv-mode router (Qwen3 tokenizer and chat template): the
router's CPU seconds and its peak resident memory above what it held before, for bodies up to
--max-body-bytes (32 MiB, the default) of every shape an attacker can choose. One router for
all; before each body its peak (VmHWM) is reset through /proc/PID/clear_refs, so each row's
peak is that request's own. Issue 40 bounds each at 1 s of CPU and 4x its body.

Usage: hostile_cost.py PATH/TO/kvrouter [MiB [WORD]]   (MiB: the body size to aim at, default 32;
WORD: only the bodies whose description contains it)"""
import json
import os
import random
import string
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "integration"))
from router_harness import Router, Worker  # noqa: E402

QWEN3 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".cache", "tokenizers", "qwen3")
TICKS = os.sysconf("SC_CLK_TCK")


def status_kb(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field):
            return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def chat(content, **extra):
    return {"model": "m", "messages": [{"role": "user", "content": content}], **extra}


def shapes(size):
    prose = "The quick brown fox jumps over the lazy dog, again and again. "
    tiny = {"role": "user", "content": "a"}
    tiny_bytes = len(json.dumps(tiny)) + 2
    yield "one letter in one message", "/v1/chat/completions", chat("a" * size)
    yield "prose in one message", "/v1/chat/completions", chat(prose * (size // len(prose)))
    yield "digits (a token each)", "/v1/chat/completions", chat("7" * size)
    yield "spaces", "/v1/chat/completions", chat(" " * size)
    yield "alternating scripts", "/v1/chat/completions", chat("aЖ中ا1 " * (size // 12))
    rng = random.Random(7)
    yield "random letters in one message", "/v1/chat/completions", chat(
        "".join(rng.choices(string.ascii_lowercase, k=size)))
    yield "spaces and tabs at random", "/v1/chat/completions", chat("".join(rng.choices(" \t", weights=[3, 1], k=size * 3 // 4)))
    yield "tiny messages, as many as fit", "/v1/chat/completions", {"model": "m", "messages": [tiny] * (size // tiny_bytes)}
    yield "tiny messages, 150,000 (under the token bound)", "/v1/chat/completions", {"model": "m", "messages": [tiny] * 150_000}
    yield "text parts of one letter", "/v1/chat/completions", chat([{"type": "text", "text": "a"}] * (size // 32))
    yield "one message of many keys", "/v1/chat/completions", {
        "model": "m", "messages": [{"role": "user", "content": "hi", **{f"k{i}": i for i in range(size // 20)}}]}
    yield "tool-call arguments, a long array", "/v1/chat/completions", {"model": "m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": json.dumps([7] * (size // 3))}}]}]}
    yield "tool-call arguments, an array of small objects", "/v1/chat/completions", {"model": "m", "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": json.dumps([{"a": 1}] * (size // 12))}}]}]}
    yield "tools of many parameters", "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
            f"p{i}": {"type": "integer"} for i in range(size // 32)}}}}]}
    yield "prose as a completion prompt", "/v1/completions", {"model": "m", "prompt": prose * (size // len(prose))}
    yield "token ids as a completion prompt", "/v1/completions", {"model": "m", "prompt": [7] * (size // 3)}
    yield "prose in a field no one reads", "/v1/chat/completions", chat("hi", user=prose * (size // len(prose)))
    yield "/tokenize of prose", "/tokenize", {"model": "m", "prompt": prose * (size // len(prose))}
    yield "/tokenize of a chat of prose", "/tokenize", {"model": "m", "messages": [
        {"role": "user", "content": prose * (size // len(prose))}]}
    yield "/v1/responses of tiny inputs", "/v1/responses", {"model": "m", "input": [tiny] * (size // tiny_bytes)}
    yield "/v1/messages of prose", "/v1/messages", {"model": "m", "max_tokens": 8, "messages": [
        {"role": "user", "content": prose * (size // len(prose))}]}


def main():
    size = int(sys.argv[2]) << 20 if len(sys.argv) > 2 else 32 << 20
    size -= 4096  # room for the envelope: every body stays under --max-body-bytes
    worker = Worker("w0")
    router = Router(sys.argv[1], "m", [worker.url], "--tokenizer", QWEN3, "--max-body-bytes", str(32 << 20))
    pid = router.proc.pid
    print(f"{'body':48} {'MB':>6} {'status':>6} {'CPU s':>6} {'peak MB':>8} {'x body':>7}")
    try:
        router.chat()
        for what, path, body in shapes(size):
            if len(sys.argv) > 3 and sys.argv[3] not in what:
                continue
            data = json.dumps(body, ensure_ascii=False).encode()
            with open(f"/proc/{pid}/clear_refs", "w") as refs:
                refs.write("5")  # VmHWM := VmRSS
            rss, cpu = status_kb(pid, "VmRSS"), cpu_seconds(pid)
            try:
                status, _, _ = router.request("POST", path, data, {"Content-Type": "application/json"}, timeout=300)
            except OSError as error:
                status = type(error).__name__[:6]
            spent = cpu_seconds(pid) - cpu
            peak = status_kb(pid, "VmHWM") - rss
            print(f"{what:48} {len(data) / 1e6:6.1f} {status:>6} {spent:6.2f} {peak / 1e6:8.1f} {peak / len(data):7.2f}",
                  flush=True)
    finally:
        router.stop()
        worker.stop()


main()
