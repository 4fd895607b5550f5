#!/usr/bin/python3
"""Integration: kvrouter scrapes every worker's engine metrics and routes around engines that
report waiting requests (traffic that bypasses the router), in the modes ingress decides itself
(round-robin) and in the scorer's (kv); bad scrapes are counted, never fatal.

1. Round-robin and load-aware kv: a worker whose /metrics says vllm:num_requests_waiting 5 gets
   no request while the other is free (round-robin obeys the queue: the worker is busy; kv
   prices it: the worker is not busy, only dearer); /v1/router/sets shows its engine gauges;
   once it reports 0 it is used again.
2. A worker answering HTML, lines of garbage, too many labels, or a body past the scrape limit
   is counted (unusable / malformed lines / failures) and keeps being routed to.
3. A kvrouter-mocker's metrics read as vLLM's: its cache_config_info gives block size and block
   count, and a block size other than the card's is warned about once; when it restarts, its
   process_start_time_seconds moves on and its index entries are dropped at once.
4. Two mockers of 32 blocks: the scraped num_gpu_blocks is each worker's cache capacity; once
   one is full, a cold prompt's dry run charges it the 7 blocks it would evict and picks the other.
Usage: engine_metrics_test.py PATH/TO/kvrouter PATH/TO/kvrouter-mocker"""
import json
import sys
import tempfile
import time

from router_harness import Failures, Mocker, Router, Worker, wait_for

kvrouter, mocker_binary = sys.argv[1], sys.argv[2]
f = Failures()
SCRAPE = ["--engine-metrics-interval-ms", "100", "--health-interval-ms", "0"]


def vllm_metrics(waiting, running=1):
    return ("# HELP vllm:num_requests_waiting Requests waiting.\n# TYPE vllm:num_requests_waiting gauge\n"
            f'vllm:num_requests_waiting{{engine="0",model_name="m"}} {waiting}\n'
            f'vllm:num_requests_running{{engine="0",model_name="m"}} {running}\n'
            'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5\n')


def live_workers(router):
    sets = json.loads(router.request("GET", "/v1/router/sets")[2])["sets"]
    return {w["name"]: w for w in sets[0]["live"]["workers"]}


def routed_to(router, n):
    return [router.chat(content=f"request {i}")[1].get("x-kvrouter-worker") for i in range(n)]


workers = [Worker(f"w{i}") for i in range(2)]
router = None
try:
    # 1. Waiting requests make a worker busy (round-robin) or dearer (kv).
    for mode, obeys in ((["--router-mode", "round-robin"], True), (["--load-aware"], False)):
        name = " ".join(mode)
        for w, waiting in zip(workers, (5, 0)):
            w.set_metrics(vllm_metrics(waiting))
        router = Router(kvrouter, "m", [f"{w.url},id={w.name}" for w in workers], *mode, *SCRAPE)
        scraped = wait_for(lambda: live_workers(router)["w0"]["engine"].get("waiting_requests") == 5
                           and time.sleep(0.3) is None, 5)
        f.check(bool(scraped), f"{name}: the scrape reaches the router")
        live = live_workers(router)
        f.check(live["w0"]["busy"] == obeys, f"{name}: w0 {'is' if obeys else 'is not'} busy ({live['w0']['busy']})")
        f.check(live["w0"]["engine"] == {"waiting_requests": 5, "running_requests": 1, "kv_cache_usage": 0.5},
                f"{name}: /v1/router/sets shows w0's engine gauges ({live['w0']['engine']})")
        f.check(router.worker_gauge("kvrouter_worker_engine_waiting_requests", "w0") == 5 and
                router.worker_gauge("kvrouter_worker_busy", "w0") == (1 if obeys else 0), f"{name}: /metrics too")
        picks = routed_to(router, 8)
        f.check(picks == ["w1"] * 8, f"{name}: every request goes to the worker without a queue ({picks})")
        workers[0].set_metrics(vllm_metrics(0))
        f.check(bool(wait_for(lambda: live_workers(router)["w0"]["engine"].get("waiting_requests") == 0 and
                              not live_workers(router)["w0"]["busy"], 5)), f"{name}: w0 reports 0 waiting: free again")
        time.sleep(0.3)
        # Two idle workers tie in kv mode, and the selector breaks ties at random: of 8 requests,
        # 1 run in 128 sent all to one worker (the ASan run once did). 24 make that 1 in 8 million.
        picks = routed_to(router, 24)
        both = "w0" in picks and "w1" in picks
        f.check(both, f"{name}: both workers are used again ({picks})" + ("" if both else f"; live: {live_workers(router)}"))
        # Both busy: no queue (busy_threshold 0), so requests still go through.
        for w in workers:
            w.set_metrics(vllm_metrics(3))
        time.sleep(0.5)
        statuses = [router.chat()[0] for _ in range(4)]
        f.check(statuses == [200] * 4, f"{name}: all busy and no queue: requests are routed as before ({statuses})")
        router.stop()

    # 2. Bad scrapes.
    router = Router(kvrouter, "m", [f"{w.url},id={w.name}" for w in workers], "--router-mode", "round-robin", *SCRAPE)
    workers[0].set_metrics(vllm_metrics(0))

    def counter(name):
        return router.metrics().get(f'{name}{{set="m",model="m"}}', 0)
    workers[1].set_metrics("<html><body>oops</body></html>\n")
    f.check(bool(wait_for(lambda: counter("kvrouter_set_engine_scrapes_unusable_total") >= 2, 5)), "an HTML answer is counted unusable")
    labels = ",".join(f'l{i}="v"' for i in range(100))
    workers[1].set_metrics("garbage line\nvllm:num_requests_waiting{engine=0} 1\n"
                           f"vllm:num_requests_waiting{{{labels}}} 1\nvllm:num_requests_waiting NaN\n")
    before = counter("kvrouter_set_engine_metrics_malformed_lines_total")
    f.check(bool(wait_for(lambda: counter("kvrouter_set_engine_metrics_malformed_lines_total") >= before + 6, 5)),
            "malformed lines are counted")
    workers[1].set_metrics("# " + "x" * (9 << 20) + "\n")
    before = counter("kvrouter_set_engine_scrape_failures_total")
    f.check(bool(wait_for(lambda: counter("kvrouter_set_engine_scrape_failures_total") > before, 10)),
            "an answer past the scrape limit is a failed scrape")
    picks = routed_to(router, 6)
    f.check(picks.count("w1") == 3, f"a worker with bad metrics is still routed to ({picks})")
    f.check(router.proc.poll() is None, "kvrouter is still running")
    router.stop()

    # 3. The mocker's metrics.
    sockets = tempfile.mkdtemp()
    kv, replay = f"ipc://{sockets}/kv", f"ipc://{sockets}/replay"
    mocker = Mocker(mocker_binary, "--block-size", "32", "--num-blocks", "1234")
    try:
        router = Router(kvrouter, "m", [f"{mocker.url},id=engine"], "--block-size", "16", *SCRAPE)
        engine = wait_for(lambda: live_workers(router)["engine"]["engine"].get("num_gpu_blocks") and
                          live_workers(router)["engine"]["engine"], 5)
        f.check(bool(engine) and engine["block_size"] == 32 and engine["num_gpu_blocks"] == 1234 and
                engine["waiting_requests"] == 0 and engine["running_requests"] == 0,
                f"the mocker's metrics read as vLLM's ({engine})")
        f.check(router.wait_for_log("reports block_size 32 in vllm:cache_config_info, but the card says 16"),
                "a block size other than the card's is warned about")
        time.sleep(0.5)
        router.stop()
        f.check(router.full_log().count("reports block_size 32") == 1, "... once")
    finally:
        mocker.stop()

    # An engine restart empties its cache at once, before any KV batch says so.
    mocker = Mocker(mocker_binary, "--kv-events-endpoint", kv, "--replay-endpoint", replay, "--model", "m")
    try:
        router = Router(kvrouter, "m", [f"{mocker.url},id=engine,kv_events={kv},replay={replay}"], *SCRAPE)
        status, _, _ = router.request("POST", "/v1/completions", {"model": "m", "prompt": list(range(256)), "max_tokens": 1})
        f.check(status == 200, "a token-id completion goes through")
        cached = wait_for(lambda: router.worker_gauge("kvrouter_worker_index_blocks", "engine") > 0, 5)
        f.check(bool(cached), "its blocks reach the index from the engine's KV events")
        f.check(mocker.request("POST", "/mocker/restart")[0] == 200, "the engine restarts (and publishes nothing)")
        dropped = wait_for(lambda: router.worker_gauge("kvrouter_worker_index_blocks", "engine") == 0, 5)
        f.check(bool(dropped) and router.worker_gauge("kvrouter_worker_engine_restarts_total", "engine") == 1,
                "the next scrape shows the restart (process_start_time_seconds moved on): its index entries are dropped")
        f.check(router.wait_for_log("restarted (its process_start_time_seconds moved on)"), "... and the log says so")
        router.stop()
    finally:
        mocker.stop()

    # 4. Full caches: the mockers' num_gpu_blocks is each worker's cache capacity, and a cold
    # prompt goes where it evicts nothing (the dry run shows the terms).
    mockers = []
    try:
        for i in range(2):
            mockers.append(Mocker(mocker_binary, "--num-blocks", "32", "--kv-events-endpoint", f"ipc://{sockets}/kv{i}",
                                  "--replay-endpoint", f"ipc://{sockets}/replay{i}", "--model", "m"))
        specs = [f"{m.url},id=e{i},kv_events=ipc://{sockets}/kv{i},replay=ipc://{sockets}/replay{i}" for i, m in enumerate(mockers)]
        router = Router(kvrouter, "m", specs, *SCRAPE)
        f.check(bool(wait_for(lambda: all(w["engine"].get("num_gpu_blocks") == 32 for w in live_workers(router).values()), 5)),
                "both engines' capacities are scraped")
        filler = list(range(1000, 1496))  # 31 blocks, and the answer's token in the 32nd: one engine's whole cache
        status, headers, _ = router.request("POST", "/v1/completions", {"model": "m", "prompt": filler, "max_tokens": 1})
        full = headers.get("x-kvrouter-worker")
        f.check(status == 200 and full in ("e0", "e1"), f"a prompt fills one engine's cache ({status}, {full})")
        f.check(bool(wait_for(lambda: router.worker_gauge("kvrouter_worker_index_blocks", full) == 31, 5)),
                "its 31 full blocks reach the index")
        cold = {"model": "m", "prompt": list(range(5000, 5128)), "max_tokens": 1}  # 8 blocks nobody caches
        status, _, body = router.request("POST", "/v1/completions", cold, {"x-kvrouter-dry-run": "1"})
        decision = json.loads(body) if status == 200 else {}
        views = {c["worker"]: c for c in decision.get("candidates", [])}
        roomy = "e1" if full == "e0" else "e0"
        f.check(decision.get("worker") == roomy, f"the cold prompt goes to the engine with room ({decision.get('worker')})")
        if full in views and roomy in views:
            f.check(views[full]["cache_capacity_blocks"] == 32 and views[full]["cached_blocks"] == 31 and
                    views[full]["evicted_blocks"] == 7 and views[roomy]["evicted_blocks"] == 0,
                    f"the dry run shows capacity, cached and evicted blocks ({views[full]}, {views[roomy]})")
            f.check(views[full]["cost"] - views[roomy]["cost"] == 7 * 8.0,
                    f"7 evicted blocks (8 new, 1 free) at the default eviction_weight 8 are the whole difference in cost "
                    f"({views[full]['cost']} vs {views[roomy]['cost']})")
        router.stop()
    finally:
        for m in mockers:
            m.stop()
    router = None
finally:
    if router:
        router.stop()
    for w in workers:
        w.stop()
f.exit()
