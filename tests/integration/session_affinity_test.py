#!/usr/bin/python3
"""Integration: session affinity. With `session_affinity_ttl_secs`, every turn of a conversation
(named by the `x-session-id` header, or the body's `user`) goes to the worker that served its
first, even in round-robin mode; when that worker goes down the conversation moves once and
stays where it moved.

1. Control: without affinity, round-robin spreads one conversation's turns over the workers.
2. 20 conversations x 5 turns (10 by header, 10 by `user`, interleaved), 3 workers: each
   conversation's turns reach one worker, and the conversations are spread.
3. The worker of some conversations is marked down: each of them moves once (counted in
   kvrouter_set_session_moves_total), and its later turns stay on the new worker after the
   first comes back.

Usage: session_affinity_test.py PATH/TO/kvrouter
"""
import json
import sys

from router_harness import Failures, Router, Worker, wait_for

kvrouter = sys.argv[1]
f = Failures()


def turn(router, conversation, i):
    body = {"model": "m", "messages": [{"role": "user", "content": f"turn {i}"}]}
    headers = {}
    if conversation % 2 == 0:
        headers["x-session-id"] = f"conversation-{conversation}"
    else:
        body["user"] = f"user-{conversation}"
    status, answer_headers, _ = router.request("POST", "/v1/chat/completions", body, headers)
    assert status == 200, status
    return answer_headers["x-kvrouter-worker"]


workers = [Worker(f"w{i}") for i in range(3)]
specs = [f"{w.url},id={w.name}" for w in workers]
router = None
try:
    router = Router(kvrouter, "m", specs, "--router-mode", "round-robin")
    spread = {turn(router, 0, i) for i in range(6)}
    f.check(len(spread) == 3, f"without affinity, round-robin spreads a conversation's turns ({sorted(spread)})")
    router.stop()

    router = Router(kvrouter, "m", specs, "--router-mode", "round-robin", "--session-affinity-ttl-secs", "60",
                    "--health-interval-ms", "100", "--health-failures", "1", "--health-successes", "1")
    seen = {c: [] for c in range(20)}
    for i in range(5):
        for c in range(20):
            seen[c].append(turn(router, c, i))
    split = {c: sorted(set(ws)) for c, ws in seen.items() if len(set(ws)) != 1}
    f.check(not split, f"every turn of each of 20 conversations reaches one worker ({split})")
    home = {c: ws[0] for c, ws in seen.items()}
    f.check(len(set(home.values())) == 3, f"and the conversations are spread over the workers ({sorted(set(home.values()))})")
    m = router.metrics()
    f.check(m['kvrouter_set_session_bindings{set="m",model="m"}'] == 20, "20 bindings are held")

    # w1 goes down: its conversations move once.
    on_w1 = [c for c, w in home.items() if w == "w1"]
    workers[1].set_health(503)
    f.check(router.wait_for_log("worker w1") and wait_for(lambda: not json.loads(router.request("GET", "/v1/router/sets")[2])
                                                          ["sets"][0]["live"]["workers"][1]["healthy"], 5),
            "w1 is marked down")
    moved = {c: turn(router, c, 5) for c in on_w1}
    f.check(on_w1 and all(w != "w1" for w in moved.values()), f"w1's conversations move ({moved})")
    workers[1].set_health(200)
    f.check(bool(wait_for(lambda: json.loads(router.request("GET", "/v1/router/sets")[2])["sets"][0]["live"]["workers"][1]
                          ["healthy"], 5)), "w1 is up again")
    later = {c: [turn(router, c, 6 + i) for i in range(3)] for c in on_w1}
    f.check(all(set(ws) == {moved[c]} for c, ws in later.items()), f"and stay where they moved ({later})")
    others = {c: turn(router, c, 9) for c in home if c not in on_w1}
    f.check(all(others[c] == home[c] for c in others), "the other conversations never moved")
    moves = router.metrics()['kvrouter_set_session_moves_total{set="m",model="m"}']
    f.check(moves == len(on_w1), f"each moved conversation is counted once ({moves} of {len(on_w1)})")
    f.check(router.stop() == 0, "kvrouter stops cleanly")
finally:
    if router and router.proc.poll() is None:
        router.proc.kill()
    for w in workers:
        w.stop()
f.exit()
