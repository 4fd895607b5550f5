#!/usr/bin/python3
"""Integration: an engine killed mid-answer costs the client nothing (issue 41, docs/migration.md).

Three kvrouter-mockers with the Qwen3 tokenizer and chat template serve model m behind a kv-mode
kvrouter with the same tokenizer. Their answers are greedy over the whole context, in the
tokenizer's own ids, so an answer continued elsewhere reads on exactly as it would have.

For a chat and a completion of 300 tokens, streamed and whole, the process of the worker serving
the answer exits after it has generated 50, 150 and 299 tokens (the mockers' `die_at_context_tokens`
fault: an engine dying once the answer's context reaches that length). Each time the client's
answer must equal the answer of a run without faults: the same text, 300 tokens, the usage
counting the whole answer, finish_reason `length`, one id, one role delta, no error. Each
killed worker is restarted on its port. A whole answer is streamed from the engine by kvrouter
and gathered, and reads as the engine's own non-streamed answer.

All of it twice: with engines that report token ids (vLLM's `return_token_ids`), and with
engines that answer with text alone (`--no-token-ids`, as SGLang's OpenAI API), where kvrouter
rebuilds the ids with its own tokenizer and template (`kvrouter_migration_ids_from_text_total`).

Usage: migration_kill_test.py PATH/TO/kvrouter PATH/TO/kvrouter-mocker QWEN3_MODEL_DIR
"""
import http.client
import json
import os
import sys
import time

from router_harness import Failures, Mocker, Router, wait_for
from sse_client import chat_body, completion_body, read_answer, set_faults, stream

kvrouter, mocker_binary, model_dir = sys.argv[1:4]
f = Failures()
ANSWER_TOKENS = 300
# Under the sanitizers (KVR_SANITIZER_BUILD) each 300-token answer takes seconds: one kill point
# and the fleet with token ids, so the run stays within its time; the release build runs all.
SANITIZED = os.environ.get("KVR_SANITIZER_BUILD") == "1"
KILL_POINTS = (150,) if SANITIZED else (50, 150, 299)


def whole(port, path, body):
    """POSTs a non-streamed `body`: (status, headers, the answer's JSON)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, dict(r.getheaders()), json.loads(data)


def text_of(answer, chat):
    choice = answer["choices"][0]
    return choice["message"]["content"] if chat else choice["text"]


def kill_and_restart(mockers, router, prompt_tokens, kill_at, what, send):
    """Arms every worker to die once an answer's context reaches prompt_tokens + kill_at, runs
    `send()` (which returns the answer's head), checks that exactly the worker serving it
    died, and restarts it on its port."""
    set_faults(mockers, die_at_context_tokens=prompt_tokens + kill_at)
    result = send()
    headers = result[1]
    dead = [i for i, m in enumerate(mockers) if m.proc.poll() is not None]
    f.check(len(dead) == 1 and headers.get("x-kvrouter-worker") == f"w{dead[0]}",
            f"{what}: the worker serving the answer died ({dead}, served by {headers.get('x-kvrouter-worker')})")
    set_faults([m for i, m in enumerate(mockers) if i not in dead], die_at_context_tokens=0)
    for i in dead:
        mockers[i] = mockers[i].restarted()
        f.check(wait_for(lambda: router.worker_gauge("kvrouter_worker_healthy", f"w{i}") == 1, 10),
                f"{what}: the restarted worker is routable again")
    time.sleep(0.25)  # past the dead worker's backoff
    return result


def run_fleet(text_only):
    label = "text alone" if text_only else "token ids"
    flags = ["--model", "m", "--tokenizer", model_dir + "/tokenizer.json", "--tokenizer-config",
             model_dir + "/tokenizer_config.json", "--speedup", "20"] + (["--no-token-ids"] if text_only else [])
    mockers = [Mocker(mocker_binary, *flags) for _ in range(3)]
    router = Router(kvrouter, "m", [f"{m.url},id=w{i}" for i, m in enumerate(mockers)], "--tokenizer", model_dir,
                    "--engine-metrics-interval-ms", "0", "--migration-whole-answers", "true", "--unhealthy-backoff-ms", "200", "--health-interval-ms", "100",
                    "--health-failures", "1")
    migrations = 0
    try:
        for path, body, chat in [("/v1/chat/completions", chat_body("tell me how a router reuses a KV cache", ANSWER_TOKENS), True),
                                 ("/v1/completions", completion_body("A KV cache aware router sends each request", ANSWER_TOKENS), False)]:
            status, _, events, complete = stream(router.port, path, body)
            want = read_answer(events, chat)
            f.check(status == 200 and complete and len(want["usage"]) == 1 and want["usage"][0]["completion_tokens"] == ANSWER_TOKENS,
                    f"{label}, {path}: the answer without faults is whole ({status}, {want['usage']})")
            if not want["usage"]:
                continue
            prompt_tokens = want["usage"][0]["prompt_tokens"]
            for kill_at in KILL_POINTS:
                what = f"{label}, {path}, streamed, killed after {kill_at} tokens"
                status, headers, events, complete = kill_and_restart(mockers, router, prompt_tokens, kill_at, what,
                                                                     lambda: stream(router.port, path, body))
                got = read_answer(events, chat)
                f.check(status == 200 and complete and got["done"] and not got["errors"],
                        f"{what}: the stream ends properly, with no error ({status}, {complete}, {got['errors']})")
                f.check(got["text"] == want["text"], f"{what}: the client reads the uninterrupted answer "
                        f"({got['text'][:40]!r}... vs {want['text'][:40]!r}...)")
                f.check(got["usage"] == want["usage"] and got["finish"] == want["finish"] == "length",
                        f"{what}: one usage counting the whole answer, finish_reason length ({got['usage']}, {got['finish']})")
                f.check(len(got["ids"]) == 1 and got["roles"] == (1 if chat else 0) and not got["token_ids"],
                        f"{what}: one id, one role delta, no token ids it did not ask for")
                migrations += 1

            # The same answer asked for whole: kvrouter streams it from the engine and gathers it.
            whole_body = {k: v for k, v in body.items() if k != "stream_options"}
            whole_body["stream"] = False
            status, _, direct = whole(mockers[0].port, path, whole_body)
            status_via, _, via = whole(router.port, path, whole_body)
            f.check(status == status_via == 200 and text_of(via, chat) == text_of(direct, chat) == want["text"] and
                    via["usage"] == direct["usage"] and via["choices"][0]["finish_reason"] == "length" and
                    via["object"] == direct["object"] and (via["choices"][0]["message"]["role"] == "assistant" if chat else True),
                    f"{label}, {path}: a whole answer gathered by kvrouter reads as the engine's own "
                    f"({json.dumps(via)[:120]} vs {json.dumps(direct)[:120]})")
            for kill_at in KILL_POINTS:
                what = f"{label}, {path}, whole, killed after {kill_at} tokens"
                status, headers, got = kill_and_restart(mockers, router, prompt_tokens, kill_at, what,
                                                        lambda: whole(router.port, path, whole_body))
                f.check(status == 200 and text_of(got, chat) == want["text"] and got["usage"] == direct["usage"] and
                        got["choices"][0]["finish_reason"] == "length" and "token_ids" not in got["choices"][0] and
                        headers.get("Content-Type") == "application/json",
                        f"{what}: the client gets the uninterrupted answer, whole ({status}, {json.dumps(got)[:160]})")
                migrations += 1
        metrics = router.metrics()
        started = sum(v for k, v in metrics.items() if k.startswith('kvrouter_migrations_total{set="m"'))
        f.check(started == migrations, f"{label}: every kill is one migration ({started} of {migrations})")
        from_text = metrics.get('kvrouter_migration_ids_from_text_total{set="m",model="m"}')
        f.check(from_text == (migrations if text_only else 0),
                f"{label}: ids rebuilt from the text {'for every one' if text_only else 'for none'} ({from_text})")
        f.check(sum(v for k, v in metrics.items() if k.startswith("kvrouter_migration_refused_total")) == 0, f"{label}: none refused")
        f.check(router.stop() == 0, f"{label}: kvrouter stops cleanly")
    finally:
        if router.proc.poll() is None:
            router.proc.kill()
        for m in mockers:
            if m.proc.poll() is None:
                m.stop()


run_fleet(text_only=False)
if not SANITIZED:
    run_fleet(text_only=True)
f.exit()
