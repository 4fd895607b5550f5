#!/usr/bin/python3
"""Integration: a worker that fails mid-answer costs the client nothing (docs/migration.md).

Five kvrouter-mockers serve model m; their answers are greedy (each token follows from every
token before it), so an answer continued elsewhere from its prompt's and its first tokens' ids
reads on exactly as it would have. kvrouter asks the engines for token ids, follows each
streamed answer, and when a worker fails after the client got part of it, sends the
continuation (a completion whose prompt is those ids) to another worker and relays its tokens
into the same stream.

1. The worker streaming a chat is killed (SIGKILL) mid-answer: the client's stream reads as the
   uninterrupted answer: the same text, one role delta, one id, one usage counting the whole
   answer, finish_reason from the worker that finished, no token ids it did not ask for, no
   error. Counted as a migration (broken) and in the access log.
2. Every stream breaks after 15 tokens (a mocker fault): a 40-token chat and a 40-token
   completion are continued twice and still read as the uninterrupted answers; a client that
   asked for token ids gets all of them.
3. Every stream ends with an engine error event after 8 tokens: after --migration-limit (3)
   continuations the stream ends with an error event of kvrouter's (a whole HTTP answer),
   counted as refused (limit_reached); no error event of the engine's reaches the client.
4. A request asking for logprobs is not continued: an error event, counted (logprobs).
5. Every booking is back to 0.

Usage: migration_test.py PATH/TO/kvrouter PATH/TO/kvrouter-mocker
"""
import json
import os
import signal
import sys
import tempfile
import time

from router_harness import Failures, Mocker, Router, wait_for
from sse_client import chat_body, completion_body, read_answer, set_faults, stream

kvrouter, mocker_binary = sys.argv[1], sys.argv[2]
f = Failures()


# A token every 10 ms or so: a 40-token answer streams for long enough to be cut in the middle.
# Five workers: one is killed, and a continuation never goes back to a worker that failed the request.
mockers = [Mocker(mocker_binary, "--model", "m", "--speedup", "0.2") for _ in range(5)]
reference = Mocker(mocker_binary, "--model", "m")  # never routed to: the uninterrupted answers
log_path = os.path.join(tempfile.mkdtemp(), "access.log")
# A worker blamed for a broken stream is back after 300 ms; a dead one is seen down within ~100 ms.
router = Router(kvrouter, "m", [f"{m.url},id=w{i}" for i, m in enumerate(mockers)], "--engine-metrics-interval-ms", "0",
                "--access-log", log_path, "--unhealthy-backoff-ms", "300", "--health-interval-ms", "100",
                "--health-failures", "1")


def reference_answer(path, body, chat):
    status, _, events, complete = stream(reference.port, path, body)
    assert status == 200 and complete
    return read_answer(events, chat)


def access_lines():
    return [json.loads(line) for line in open(log_path)] if os.path.exists(log_path) else []


try:
    # -- 1. the worker dies mid-answer ---------------------------------------------------------
    body = chat_body("tell me about caches and routing", 40)
    want = reference_answer("/v1/chat/completions", body, True)
    killed = {}

    def kill_after_five_tokens(i, data, headers):
        if i == 5 and not killed:  # the worker streaming the answer, as its head names it
            name = headers["x-kvrouter-worker"]
            mockers[int(name[1:])].proc.send_signal(signal.SIGKILL)
            mockers[int(name[1:])].proc.wait()
            killed["worker"] = name

    status, headers, events, complete = stream(router.port, "/v1/chat/completions", body, kill_after_five_tokens)
    got = read_answer(events, True)
    f.check(status == 200 and complete, f"a stream whose worker is killed mid-answer still ends properly ({status}, complete={complete})")
    f.check(killed.get("worker") == headers.get("x-kvrouter-worker"), f"the worker killed was the one streaming ({killed}, {headers.get('x-kvrouter-worker')})")
    f.check(got["text"] == want["text"], f"the client reads the uninterrupted answer ({got['text'][:60]!r}... vs {want['text'][:60]!r}...)")
    f.check(got["roles"] == 1 and len(got["ids"]) == 1, f"one role delta and one id ({got['roles']}, {got['ids']})")
    f.check(len(got["usage"]) == 1 and got["usage"][0]["completion_tokens"] == 40 and
            got["usage"][0]["prompt_tokens"] == want["usage"][0]["prompt_tokens"],
            f"one usage counting the whole answer ({got['usage']} vs {want['usage']})")
    f.check(got["finish"] == "length" and got["done"] and not got["errors"], f"finish_reason, [DONE], no error ({got['finish']}, {got['errors']})")
    f.check(not got["token_ids"] and got["prompt_token_ids"] is None, "no token ids the client did not ask for")
    metrics = router.metrics()
    f.check(metrics.get('kvrouter_migrations_total{set="m",model="m",reason="broken"}') == 1,
            "the migration is counted as a broken stream")
    f.check(router.wait_for_log("migrated from worker " + killed.get("worker", "?")), "a log line names the worker the answer left")
    lines = wait_for(lambda: [l for l in access_lines() if l.get("migrations")], 5)
    f.check(len(lines) == 1 and lines[0]["outcome"] == "completed" and lines[0]["worker"] != killed.get("worker"),
            f"the access log records one migration, completed on another worker ({lines})")
    alive = [m for i, m in enumerate(mockers) if f"w{i}" != killed.get("worker")]
    f.check(wait_for(lambda: router.worker_gauge("kvrouter_worker_healthy", killed["worker"]) == 0, 5), "the killed worker is seen down")

    def after_backoff():
        time.sleep(0.4)  # the workers blamed for the last answer's breaks are routable again

    # -- 2. streams break every 15 tokens: continued twice ------------------------------------
    set_faults(alive, break_streams_after_tokens=15)
    for path, body, chat in [("/v1/chat/completions", chat_body("a second question about blocks", 40), True),
                             ("/v1/completions", completion_body("once upon a time the cache", 40), False),
                             ("/v1/chat/completions", chat_body("ids please", 40, return_token_ids=True), True)]:
        want = reference_answer(path, body, chat)
        after_backoff()
        status, _, events, complete = stream(router.port, path, body)
        got = read_answer(events, chat)
        what = f"{path}{' with token ids' if body.get('return_token_ids') else ''}"
        f.check(status == 200 and complete and got["done"] and not got["errors"], f"{what}: cut twice, the stream ends properly")
        f.check(got["text"] == want["text"], f"{what}: the client reads the uninterrupted answer")
        f.check(len(got["ids"]) == 1 and got["roles"] == (1 if chat else 0) and len(got["usage"]) == 1 and
                got["usage"][0]["completion_tokens"] == 40, f"{what}: one id, one role, one whole usage ({got['usage']})")
        if body.get("return_token_ids"):
            f.check(got["token_ids"] == want["token_ids"] and got["prompt_token_ids"] == want["prompt_token_ids"],
                    f"{what}: the client that asked for token ids gets every one")
        else:
            f.check(not got["token_ids"], f"{what}: no token ids the client did not ask for")
    metrics = router.metrics()
    broken = metrics.get('kvrouter_migrations_total{set="m",model="m",reason="broken"}')
    f.check(broken == 7, f"two migrations per answer counted, after the first one ({broken})")
    f.check(metrics.get('kvrouter_migration_carried_tokens_count{set="m",model="m"}') == 7, "the carried tokens are observed")

    # -- 3. engine error events: past the limit, kvrouter's own error event ----------------------
    set_faults(alive, break_streams_after_tokens=0, error_event_after_tokens=8)
    after_backoff()
    status, _, events, complete = stream(router.port, "/v1/chat/completions", chat_body("fail me", 40))
    got = read_answer(events, True)
    f.check(status == 200 and complete and got["done"], "past the migration limit the stream still ends as a whole HTTP answer")
    f.check(len(got["errors"]) == 1 and "limit_reached" in got["errors"][0]["message"] and len(got["text"].split()) == 32,
            f"one error event of kvrouter's after 4 x 8 tokens, none of the engine's ({got['errors']}, {len(got['text'].split())} words)")
    metrics = router.metrics()
    f.check(metrics.get('kvrouter_migrations_total{set="m",model="m",reason="error_event"}') == 3,
            "three continuations after error events")
    f.check(metrics.get('kvrouter_migration_refused_total{reason="limit_reached"}') == 1, "the fourth is refused: limit_reached")

    # -- 4. logprobs are not continued -------------------------------------------------------------
    set_faults(alive, error_event_after_tokens=0, break_streams_after_tokens=5)
    after_backoff()
    status, _, events, complete = stream(router.port, "/v1/chat/completions", chat_body("with logprobs", 20, logprobs=True))
    got = read_answer(events, True)
    f.check(status == 200 and complete and len(got["errors"]) == 1 and "logprobs" in got["errors"][0]["message"],
            f"a stream asking for logprobs ends with an error event when its worker fails ({got['errors']})")
    f.check(router.metrics().get('kvrouter_migration_refused_total{reason="logprobs"}') == 1, "counted: logprobs")

    # -- 5. bookings ---------------------------------------------------------------------------------
    set_faults(alive, break_streams_after_tokens=0)
    def bookings():
        m = router.metrics()
        return sum(v for k, v in m.items() if k.startswith("kvrouter_worker_active_requests{"))
    f.check(wait_for(lambda: bookings() == 0, 5), f"every booking is released ({bookings()})")
    # Each leg of a migrated answer counts itself in while it streams and out when it ends.
    in_flight = lambda: router.metrics().get("kvrouter_proxied_requests_in_flight")
    f.check(wait_for(lambda: in_flight() == 0, 5), f"no answer is left streaming ({in_flight()})")
finally:
    router.stop()
    for m in mockers + [reference]:
        if m.proc.poll() is None:
            m.stop()

f.exit()
