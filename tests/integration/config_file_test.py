#!/usr/bin/python3
"""Integration: worker sets from a config file.

1. The gate matrix end to end through `kvrouter explain`: every mode x credit {0, 0.5, 1, 2} x
   use_kv_events {on, off} x card override {absent, present}; with the override present the
   global config is the opposite corner, so a set that consulted it would be caught.
2. `kvrouter --config FILE` serves two sets, routes each model to its own workers, and shows
   the same sets on /v1/router/sets as `explain` prints.

Usage: config_file_test.py PATH/TO/kvrouter
"""
import json
import os
import subprocess
import sys
import tempfile

from router_harness import BackgroundLoad, Failures, Router, Worker

kvrouter = sys.argv[1]
f = Failures()
tmp = tempfile.mkdtemp()


def write(name, document):
    path = os.path.join(tmp, name)
    with open(path, "w") as out:
        json.dump(document, out)
    return path


def explain(path):
    result = subprocess.run([kvrouter, "explain", "--config", path], capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(result.stderr)
    return json.loads(result.stdout)["sets"]


modes = ["kv", "round-robin", "random", "power-of-two", "least-loaded"]
rows = [(m, c, e) for m in modes for c in (0.0, 0.5, 1.0, 2.0) for e in (True, False)]
mismatches = []
override_sets = []
for i, (mode, credit, events) in enumerate(rows):
    knobs = {"router_mode": mode, "overlap_score_credit": credit, "use_kv_events": events}
    # Override absent: the global config is the row.
    sets = explain(write(f"absent{i}.json", {"router": knobs, "worker_sets": [
        {"name": "s", "model": "m", "workers": [{"url": "http://127.0.0.1:9"}]}]}))
    override_sets.append({"name": f"s{i}", "model": f"m{i}", "workers": [{"url": "http://127.0.0.1:9"}],
                          "router_config": knobs})
    overlap = mode == "kv" and credit > 0
    for label, s in (("absent", sets[0]),):
        if (s["uses_prefix_overlap"], s["kv_events_subscribed"], s["mm_routing_enabled"]) != (overlap, overlap and events, overlap):
            mismatches.append(f"{label} {knobs}: {s}")
# Override present: one file, global config = kv, credit 1, events on (the opposite corner for most rows).
present = explain(write("present.json", {"router": {"router_mode": "kv", "overlap_score_credit": 1.0, "use_kv_events": True},
                                         "worker_sets": override_sets}))
for (mode, credit, events), s in zip(rows, present):
    overlap = mode == "kv" and credit > 0
    if (s["uses_prefix_overlap"], s["kv_events_subscribed"], s["mm_routing_enabled"]) != (overlap, overlap and events, overlap):
        mismatches.append(f"present {mode} {credit} {events}: {s}")
    if s["effective_router_config"]["router_mode"] != mode or s["effective_router_config"]["overlap_score_credit"] != credit:
        mismatches.append(f"present {mode} {credit}: effective config {s['effective_router_config']}")
f.check(not mismatches and len(rows) * 2 == 80, f"the gate holds on all 80 rows of the matrix through explain {mismatches[:3]}")

result = subprocess.run([kvrouter, "explain", "--config", write("bad.json", {"worker_sets": [
    {"name": "a", "model": "m", "workers": [{"url": "http://h:1"}], "router_config": {"router_mode": "fastest"}}]})],
    capture_output=True, text=True)
f.check(result.returncode == 2 and 'worker set "a": router_config: unknown router_mode "fastest"' in result.stderr,
        f"an invalid file exits 2 naming the set and the problem ({result.stderr.strip()})")

workers = [Worker("a"), Worker("b")]
try:
    path = write("serve.json", {"router": {"router_mode": "round-robin"}, "worker_sets": [
        {"name": "set-a", "model": "ma", "workers": [{"id": "a", "url": workers[0].url}]},
        {"name": "set-b", "model": "mb", "workers": [{"id": "b", "url": workers[1].url}],
         "router_config": {"router_mode": "kv", "overlap_score_credit": 0.0, "use_kv_events": False}}]})
    router = Router(kvrouter, None, [], "--config", path)
    status_a, _, body_a = router.chat(model="ma")
    status_b, _, body_b = router.chat(model="mb")
    f.check(status_a == 200 and json.loads(body_a)["worker"] == "a", "model ma is served by set-a's worker")
    f.check(status_b == 200 and json.loads(body_b)["worker"] == "b", "model mb is served by set-b's worker")
    _, _, models = router.request("GET", "/v1/models")
    f.check(sorted(m["id"] for m in json.loads(models)["data"]) == ["ma", "mb"], "/v1/models lists both sets' models")
    ready = [router.request("GET", path)[0] for path in ("/ready?model=ma", "/ready?model=m%62", "/ready?model=nope")]
    f.check(ready == [200, 200, 404], f"/ready?model=M answers for M's set (percent-decoded), 404 for no set ({ready})")
    _, _, live = router.request("GET", "/v1/router/sets")
    live_sets = json.loads(live)["sets"]
    pipelines = [s.pop("pipeline") for s in live_sets]
    live_states = [s.pop("live") for s in live_sets]
    f.check(live_sets == explain(path), "/v1/router/sets shows what explain prints")
    f.check([[w["name"] for w in live["workers"]] for live in live_states] == [["a"], ["b"]] and
            all(live["queue"]["enabled"] is False for live in live_states),
            f"... and each set's live state: its workers and its queue ({live_states})")
    f.check(pipelines[0]["hashers"] == 0 and pipelines[1]["hashers"] == 0 and not pipelines[1]["kv_subscriber"],
            f"round-robin and load-aware sets run no hashers and no KV subscriber ({pipelines})")

    # -- live edits, under load: requests keep succeeding throughout
    import time
    load = BackgroundLoad(router, "mb")

    def rewrite(document):
        time.sleep(0.05)
        with open(path + ".tmp", "w") as out:
            json.dump(document, out)
        os.replace(path + ".tmp", path)

    def wait_for_sets(predicate, timeout=5.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            sets = json.loads(router.request("GET", "/v1/router/sets")[2])["sets"]
            if predicate(sets):
                return sets
            time.sleep(0.1)
        return None

    base = json.load(open(path))
    retuned = json.loads(json.dumps(base))
    retuned["worker_sets"][1]["router_config"]["router_temperature"] = 0.5
    rewrite(retuned)
    sets = wait_for_sets(lambda s: s[1]["effective_router_config"]["router_temperature"] == 0.5)
    f.check(sets is not None and router.wait_for_log("retuned in place set-b; kept set-a"),
            "a temperature edit retunes set-b in place (no restart), set-a kept")
    approximate = json.loads(json.dumps(base))
    approximate["worker_sets"][1]["router_config"] = {"router_mode": "kv", "overlap_score_credit": 1.0, "use_kv_events": False}
    rewrite(approximate)
    sets = wait_for_sets(lambda s: s[1]["uses_prefix_overlap"])
    f.check(sets is not None and not sets[0]["uses_prefix_overlap"] and sets[1]["pipeline"]["hashers"] > 0
            and not sets[1]["pipeline"]["kv_subscriber"],
            "an edit turning set-b to approximate kv starts its hashers (no KV subscriber), set-a untouched")
    with_events = json.loads(json.dumps(base))
    with_events["worker_sets"][1]["router_config"] = {"router_mode": "kv", "overlap_score_credit": 1.0}
    with_events["worker_sets"][1]["workers"][0]["kv_events"] = "tcp://127.0.0.1:1"
    rewrite(with_events)
    sets = wait_for_sets(lambda s: s[1]["kv_events_subscribed"])
    f.check(sets is not None and sets[1]["pipeline"]["kv_subscriber"] and sets[1]["pipeline"]["kv_publishers"] == 1,
            "kv mode with events starts set-b's KV subscriber")
    rewrite(base)
    sets = wait_for_sets(lambda s: not s[1]["uses_prefix_overlap"])
    f.check(sets is not None and not sets[1]["pipeline"]["kv_subscriber"] and sets[1]["pipeline"]["hashers"] == 0,
            "and back to load-aware stops its hashers and KV subscriber")

    with open(path, "w") as out:
        out.write('{"worker_sets": [{"name": "broken"')
    f.check(router.wait_for_log("config change rejected"), "the invalid edit is read, and rejected")
    kept = json.loads(router.request("GET", "/v1/router/sets")[2])["sets"]
    for s_ in kept:
        s_.pop("pipeline")
        s_.pop("live")
    f.check(kept == explain(write("copy.json", base)), "an invalid edit is rejected and the last good config stays in force")
    reloads = {k: v for k, v in router.metrics().items() if k.startswith("kvrouter_config_reloads_total")}
    f.check(reloads.get('kvrouter_config_reloads_total{source="file",result="rejected"}') == 1 and
            reloads.get('kvrouter_config_reloads_total{source="file",result="applied"}', 0) >= 3,
            f"/metrics counts the reloads applied and the one rejected ({reloads})")
    f.check(router.chat(model="ma")[0] == 200, "set-a still serves after the rejected edit")

    without_a = json.loads(json.dumps(base))
    without_a["worker_sets"] = without_a["worker_sets"][1:]
    rewrite(without_a)
    f.check(wait_for_sets(lambda s: len(s) == 1) is not None and router.chat(model="ma")[0] == 404,
            "removing a set from the file stops serving its model")
    statuses = load.stop()
    f.check(len(statuses) > 20 and set(statuses) == {200},
            f"no request failed during the reloads ({len(statuses)} requests, statuses {sorted(set(statuses))})")
    f.check(router.stop() == 0, "kvrouter stops cleanly")
    log = router.full_log()
    f.check("config change rejected" in log and "config reloaded" in log, "reloads and the rejection are logged")
finally:
    for w in workers:
        w.stop()
f.exit()
