#!/usr/bin/python3
"""Integration: a crash budget of zero. Every hostile request body kvrouter's hardening passes
have met (issue 40 and the first pass before it) goes to one kv-mode router with the Qwen3
tokenizer and chat template; after each, the router must still be alive and answer a plain chat.
Run under ASan + UBSan by scripts/test.sh's second build, where any stack overflow, heap error or
undefined behaviour ends the process and so fails the check that follows it.

Each body is answered 200 (forwarded) or 4xx (refused, naming what it refused); which one is
asserted where the answer is kvrouter's to give. Usage: hostile_bodies_test.py PATH/TO/kvrouter"""
import http.client
import json
import os
import socket
import subprocess
import sys

from router_harness import Failures, Router, Worker

kvrouter = sys.argv[1]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
QWEN3 = os.path.join(REPO, ".cache", "tokenizers", "qwen3")
f = Failures()


def nested(depth):
    return "[" * depth + "]" * depth


def chat(messages, **extra):
    return {"model": "m", "messages": messages, **extra}


def many_keys(count):
    return {f"k{i}": i for i in range(count)}


def tool_call_chat(arguments):
    """The 40 KB request of issue 40: a tool call's arguments string nesting as given."""
    return chat([{"role": "user", "content": "hi"},
                 {"role": "assistant", "content": "",
                  "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}]},
                 {"role": "user", "content": "go"}])


# (what, method, path, body, the statuses kvrouter may answer)
HOSTILE = [
    ("tool-call arguments nesting 20,000 levels (the 40 KB crash)", "POST", "/v1/chat/completions",
     tool_call_chat(nested(20_000)), {400}),
    ("tool-call arguments nesting 100,000 levels", "POST", "/v1/chat/completions", tool_call_chat(nested(100_000)), {400}),
    ("tool-call arguments of 100,000 nested objects", "POST", "/v1/chat/completions",
     tool_call_chat('{"a":' * 100_000 + "1" + "}" * 100_000), {400}),
    ("tool-call arguments nesting 500 levels (under the bound)", "POST", "/v1/chat/completions",
     tool_call_chat(nested(500)), {200}),
    ("tool-call arguments that are not JSON", "POST", "/v1/chat/completions", tool_call_chat("{[}"), {200}),
    ("a response_format schema string nesting 100,000 levels", "POST", "/v1/chat/completions",
     chat([{"role": "user", "content": "hi"}],
          response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": nested(100_000)}}), {200}),
    ("a tool's parameters string nesting 100,000 levels", "POST", "/v1/chat/completions",
     chat([{"role": "user", "content": "hi"}],
          tools=[{"type": "function", "function": {"name": "f", "parameters": nested(100_000)}}]), {200}),
    ("a body nesting 100,000 levels", "POST", "/v1/chat/completions",
     '{"model": "m", "messages": [], "x": ' + nested(100_000) + "}", {400}),
    ("messages nesting 100,000 levels", "POST", "/v1/chat/completions", '{"model": "m", "messages": ' + nested(100_000) + "}",
     {400}),
    ("a completion prompt nesting 100,000 levels", "POST", "/v1/completions", '{"model": "m", "prompt": ' + nested(100_000) + "}",
     {400}),
    ("/tokenize with tool-call arguments nesting 100,000 levels", "POST", "/tokenize",
     {"model": "m", "messages": tool_call_chat(nested(100_000))["messages"]}, {400}),
    ("/tokenize nesting 100,000 levels", "POST", "/tokenize", '{"model": "m", "prompt": ' + nested(100_000) + "}", {400}),
    ("/v1/responses nesting 100,000 levels", "POST", "/v1/responses", '{"model": "m", "input": ' + nested(100_000) + "}",
     {400}),
    ("/v1/messages nesting 100,000 levels", "POST", "/v1/messages", '{"model": "m", "messages": ' + nested(100_000) + "}",
     {400}),
    ("/generate nesting 100,000 levels", "POST", "/generate", '{"input_ids": ' + nested(100_000) + "}", {400}),
    ("invalid UTF-8 in a message", "POST", "/v1/chat/completions",
     b'{"model": "m", "messages": [{"role": "user", "content": "\xff\xfe"}]}', {400}),
    ("a bad escape in a message", "POST", "/v1/chat/completions",
     b'{"model": "m", "messages": [{"role": "user", "content": "\\x41"}]}', {400}),
    ("a lone surrogate escape", "POST", "/v1/chat/completions",
     b'{"model": "m", "messages": [{"role": "user", "content": "\\ud800"}]}', {200, 400}),
    ("an integer past 64 bits as a token id", "POST", "/v1/completions",
     b'{"model": "m", "prompt": [123456789012345678901234567890]}', {400}),
    ("1 MB of one letter, no space", "POST", "/v1/chat/completions", chat([{"role": "user", "content": "a" * (1 << 20)}]),
     {200}),
    ("1 MB of digits", "POST", "/v1/chat/completions", chat([{"role": "user", "content": "7" * (1 << 20)}]), {400}),  # a token per digit: past --max-prompt-tokens (2^20)
    ("1 MB of spaces", "POST", "/v1/chat/completions", chat([{"role": "user", "content": " " * (1 << 20)}]), {200}),
    ("1 MB of alternating scripts", "POST", "/v1/chat/completions",
     chat([{"role": "user", "content": "aЖ中ا1 " * (1 << 17)}]), {200}),
    ("20,000 tiny messages", "POST", "/v1/chat/completions", chat([{"role": "user", "content": "a"}] * 20_000), {200, 400}),
    ("messages that are not objects", "POST", "/v1/chat/completions", chat([1, "x", None, [[]]]), {400}),
    ("content parts of every wrong type", "POST", "/v1/chat/completions",
     chat([{"role": "user", "content": [{"type": "image_url"}, {"type": "text"}, {"type": 7}, 3]}]), {200, 400}),
    ("an image data URI that is not an image", "POST", "/v1/chat/completions",
     chat([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]),
     {200, 400}),
    # Objects of many keys: read key by key into ordered trees (a scan per key) they cost time
    # quadratic in their keys: 40,000 keys in one message, 4.6 s of CPU; 200,000, minutes. Now
    # 30,000 are read in linear time, and 200,000 (about 8x their JSON as template values) are
    # refused before they are built, by the request's value budget (2x its JSON + 8 MiB).
    ("a message of 30,000 keys", "POST", "/v1/chat/completions",
     chat([{"role": "user", "content": "hi", **many_keys(30_000)}]), {200}),
    ("a message of 200,000 keys", "POST", "/v1/chat/completions",
     chat([{"role": "user", "content": "hi", **many_keys(200_000)}]), {400}),
    ("tool-call arguments of 200,000 keys", "POST", "/v1/chat/completions",
     tool_call_chat(json.dumps(many_keys(200_000))), {400}),
    ("tool-call arguments of 4 million numbers", "POST", "/v1/chat/completions",
     tool_call_chat(json.dumps([7] * 4_000_000)), {400}),
    ("a tool's parameters of 200,000 keys", "POST", "/v1/chat/completions",
     chat([{"role": "user", "content": "hi"}],
          tools=[{"type": "function", "function": {"name": "f", "parameters": many_keys(200_000)}}]), {400}),
    ("chat_template_kwargs of 30,000 keys", "POST", "/v1/chat/completions",
     chat([{"role": "user", "content": "hi"}], chat_template_kwargs=many_keys(30_000)), {200}),
    ("chat_template_kwargs of 200,000 keys", "POST", "/v1/chat/completions",
     chat([{"role": "user", "content": "hi"}], chat_template_kwargs=many_keys(200_000)), {400}),
    ("/tokenize of a message of 30,000 keys", "POST", "/tokenize",
     {"model": "m", "messages": [{"role": "user", "content": "hi", **many_keys(30_000)}]}, {200}),
    ("/tokenize of a message of 200,000 keys", "POST", "/tokenize",
     {"model": "m", "messages": [{"role": "user", "content": "hi", **many_keys(200_000)}]}, {400}),
    ("chat_template_kwargs nesting 500 levels", "POST", "/v1/chat/completions",
     chat([{"role": "user", "content": "hi"}], chat_template_kwargs={"x": json.loads(nested(500))}), {200}),
]


def absolute_form_chat(port):
    """POST http://host/v1/chat/completions (RFC 9112 absolute form): the router's answer."""
    body = json.dumps(chat([{"role": "user", "content": "hi"}])).encode()
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST http://127.0.0.1:%d/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (port, len(body)) + body)
    answer = b""
    while chunk := s.recv(65536):
        answer += chunk
    s.close()
    return answer


worker = Worker("w0")
router = Router(kvrouter, "m", [worker.url], "--tokenizer", QWEN3, "--max-body-bytes", str(32 << 20))
try:
    for what, method, path, body, allowed in HOSTILE:
        payload = body if isinstance(body, (bytes, str)) else json.dumps(body)
        try:
            status, _, answer = router.request(method, path, payload.encode() if isinstance(payload, str) else payload,
                                               {"Content-Type": "application/json"})
        except (OSError, http.client.HTTPException) as error:  # the router died mid-answer
            status, answer = None, repr(error).encode()
        f.check(status in allowed, f"{what}: answered {status} (expected one of {sorted(allowed)}) {answer[:160]!r}")
        if status is None:  # give a dying process the moment it takes to be gone
            try:
                router.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
        alive = router.proc.poll() is None
        f.check(alive, f"{what}: the router is alive afterwards (exit status {router.proc.returncode})")
        if not alive:
            break
        status, _, _ = router.chat()
        f.check(status == 200, f"{what}: a plain chat is answered afterwards")
    deep = router.request("POST", "/v1/chat/completions", json.dumps(tool_call_chat(nested(20_000))).encode())
    error = json.loads(deep[2]).get("error", {})
    f.check(error.get("param") == "messages[1].tool_calls[0].function.arguments" and "512" in error.get("message", ""),
            f"the refusal names the field and the bound: {error}")
    dense = router.request("POST", "/v1/chat/completions", json.dumps(tool_call_chat(json.dumps([7] * 4_000_000))).encode())
    error = json.loads(dense[2]).get("error", {})
    f.check(error.get("param") == "messages[1].tool_calls[0].function.arguments" and "JSON values" in error.get("message", ""),
            f"a value-dense refusal names the field: {error}")
    seen_before = worker.stats()["requests"]
    answer = absolute_form_chat(router.port)
    f.check(answer.startswith(b"HTTP/1.1 200"), f"an absolute-form chat target is routed as a chat: {answer[:120]!r}")
    f.check(worker.stats()["requests"] == seen_before + 1, "and reaches the worker")
    paths = worker.stats()["paths"]
    f.check(paths[-1] == "/v1/chat/completions", f"the worker sees the origin-form path: {paths[-1]}")
finally:
    if router.proc.poll() is None:
        router.stop()
    worker.stop()
f.exit()
