#!/usr/bin/python3
"""Peak memory (VmHWM) a kv router with the Qwen3 tokenizer adds for one chat of many tiny
messages, and for one of prose: a fresh router per body. Usage: tiny_messages_memory.py PATH/TO/kvrouter"""
import json, sys, time, os
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "integration"))
from router_harness import Router, Worker
QWEN3 = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".cache", "tokenizers", "qwen3")
def hwm(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmHWM"): return int(line.split()[1]) * 1024
cases = [
  ("30 MB of 1-char messages", {"model": "m", "messages": [{"role": "user", "content": "a"}] * 1_000_000}),
  ("3 MB of 1-char messages", {"model": "m", "messages": [{"role": "user", "content": "a"}] * 100_000}),
  ("1 MB prose message", {"model": "m", "messages": [{"role": "user", "content": "The quick brown fox jumps. " * 40000}]}),
]
for name, body in cases:
    w = Worker("w0")
    r = Router(sys.argv[1], "m", [w.url], "--tokenizer", QWEN3, "--max-body-bytes", str(64 << 20), "--max-prompt-tokens", str(1 << 20))
    r.chat()
    data = json.dumps(body).encode()
    before = hwm(r.proc.pid)
    t = time.time()
    status, _, ans = r.request("POST", "/v1/chat/completions", data, {"Content-Type": "application/json"}, timeout=120)
    after = hwm(r.proc.pid)
    print(f"{name}: body {len(data)/1e6:.1f} MB, status {status}, peak +{(after-before)/1e6:.0f} MB ({(after-before)/len(data):.1f}x body), {time.time()-t:.2f} s, {ans[:100]!r}")
    r.stop(); w.stop()
