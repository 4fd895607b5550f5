#!/usr/bin/python3
"""Integration: under overload kvrouter holds requests in the set's queue, by priority, within
its bounds, and lets nothing leak.

Two slow fake workers (each answers 0.5 s after a request arrives). A worker is busy while a
request it was sent has not answered (its booked prompt exceeds busy_threshold x
max_num_batched_tokens), so each worker takes one request at a time and the rest wait.
1. Priority: normal requests fill the queue, then a low one, then two high ones: the high ones
   reach the workers next, the low one last.
2. Bound: 30 requests at once against a queue of 4: the extra ones get 429 at once, with
   Retry-After and code queue_full; the queue never holds more than 4; the admitted all succeed.
3. Timeout: with workers slower than the queue timeout, queued requests get 503 queue_timeout
   when their time is up, not later.
4. A client that leaves while queued is taken out of the queue and never reaches a worker.
5. After the run every booking and the queue are back to 0.
6. A bad priority header is a 400 naming it.
Usage: admission_test.py PATH/TO/kvrouter"""
import json
import socket
import sys
import threading
import time

from router_harness import Failures, Router, Worker, wait_for

kvrouter = sys.argv[1]
f = Failures()
PROMPT = "x" * 400  # about 104 tokens as the router estimates them: past one 64-token batch


def send(router, tag, priority=None, results=None, timeout=30):
    headers = {"Content-Type": "application/json"}
    if priority:
        headers["x-kvrouter-priority"] = priority
    start = time.time()
    status, head, body = router.request("POST", "/v1/chat/completions",
                                        {"model": "m", "messages": [{"role": "user", "content": f"{tag} {PROMPT}"}]},
                                        headers, timeout=timeout)
    result = {"tag": tag, "status": status, "headers": head, "body": body, "took": time.time() - start}
    if results is not None:
        results.append(result)
    return result


def in_background(router, tags, priority=None, results=None):
    threads = [threading.Thread(target=send, args=(router, tag, priority, results)) for tag in tags]
    for t in threads:
        t.start()
    return threads


def arrival_order(workers):
    """Tags of the requests the workers received, in the order they arrived."""
    arrivals = sorted(a for w in workers for a in w.stats()["arrivals"])
    return [json.loads(body)["messages"][0]["content"].split(" ")[0] for _, body in arrivals]


def queue_depth(router):
    m = router.metrics()
    return sum(v for k, v in m.items() if k.startswith("kvrouter_queue_depth{"))


workers = [Worker(f"w{i}", "--first-delay", "0.5") for i in range(2)]
router = Router(kvrouter, "m", [f"{w.url},id={w.name}" for w in workers],
                "--router-mode", "least-loaded", "--busy-threshold", "1", "--max-num-batched-tokens", "64",
                "--queue-size", "16", "--queue-timeout-secs", "10", "--queue-age-boost-secs", "60",
                "--health-interval-ms", "0", "--engine-metrics-interval-ms", "0")
try:
    # 1. Priority.
    results = []

    def queued(priority):
        return router.metrics().get(f'kvrouter_queue_depth{{set="m",model="m",priority="{priority}"}}', 0)
    threads = in_background(router, [f"normal{i}" for i in range(6)], None, results)
    f.check(bool(wait_for(lambda: queued("normal") == 4, 5)), "two normal requests go to the workers, four wait")
    threads += in_background(router, ["low0"], "low", results)
    f.check(bool(wait_for(lambda: queued("low") == 1, 5)), "the low one waits behind them")
    threads += in_background(router, ["high0", "high1"], "high", results)
    for t in threads:
        t.join()
    order = arrival_order(workers)
    f.check(all(r["status"] == 200 for r in results), f"every queued request is answered ({[r['status'] for r in results]})")
    f.check(sorted(order[2:4]) == ["high0", "high1"],
            f"the high-priority requests overtake the normal ones queued before them ({order})")
    f.check(order[-1] == "low0", f"the low-priority request goes last ({order})")
    waits = wait_for(lambda: router.metrics().get('kvrouter_queue_wait_seconds_count{set="m",model="m"}', 0) >= 7, 3)
    f.check(bool(waits), "the wait histogram counts the seven requests that waited")

    # 2. The bound.
    router.stop()
    router = Router(kvrouter, "m", [f"{w.url},id={w.name}" for w in workers],
                    "--busy-threshold", "1", "--max-num-batched-tokens", "64", "--queue-size", "4",
                    "--queue-timeout-secs", "30", "--health-interval-ms", "0", "--engine-metrics-interval-ms", "0")
    results, depths = [], []
    stop_sampling = threading.Event()

    def sample():
        while not stop_sampling.is_set():
            depths.append(queue_depth(router))
            time.sleep(0.1)
    sampler = threading.Thread(target=sample)
    sampler.start()
    threads = in_background(router, [f"burst{i}" for i in range(30)], None, results)
    for t in threads:
        t.join()
    time.sleep(1.2)  # one more snapshot
    stop_sampling.set()
    sampler.join()
    rejected = [r for r in results if r["status"] == 429]
    admitted = [r for r in results if r["status"] == 200]
    f.check(len(rejected) + len(admitted) == 30, f"every request is admitted or refused ({[r['status'] for r in results]})")
    f.check(len(admitted) >= 6 and len(rejected) >= 15,
            f"the two workers and the queue of 4 take some, the rest are refused ({len(admitted)} admitted)")
    f.check(all(r["took"] < 1.0 for r in rejected), f"refusals come at once ({max((r['took'] for r in rejected), default=0):.2f} s)")
    f.check(all(r["headers"].get("Retry-After") == "1" for r in rejected), "every 429 says when to retry")
    f.check(all(json.loads(r["body"])["error"]["code"] == "queue_full" for r in rejected), "... with code queue_full")
    f.check(max(depths) <= 4 and max(depths) >= 1, f"the queue is used and never exceeds its bound (max {max(depths)})")
    m = router.metrics()
    f.check(m.get('kvrouter_queue_rejections_total{set="m",model="m",reason="queue_full"}') == len(rejected),
            "/metrics counts the refusals by reason")

    # 3. The timeout.
    for w in workers:
        w.control(first_delay=40)
    router.stop()
    router = Router(kvrouter, "m", [f"{w.url},id={w.name}" for w in workers],
                    "--busy-threshold", "1", "--max-num-batched-tokens", "64", "--queue-size", "8",
                    "--queue-timeout-secs", "1", "--health-interval-ms", "0", "--engine-metrics-interval-ms", "0",
                    "--upstream-timeout-secs", "60")
    slow = in_background(router, ["slow0", "slow1"], None, [])
    time.sleep(0.3)
    results = []
    threads = in_background(router, [f"late{i}" for i in range(3)], None, results)
    for t in threads:
        t.join()
    f.check([r["status"] for r in results] == [503] * 3, f"queued requests time out ({[r['status'] for r in results]})")
    f.check(all(json.loads(r["body"])["error"]["code"] == "queue_timeout" for r in results), "... with code queue_timeout")
    f.check(all(0.9 <= r["took"] < 1.6 for r in results),
            f"... when their time is up, not later ({[round(r['took'], 2) for r in results]})")

    # 4. A client that leaves while queued.
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": f"gone {PROMPT}"}]}).encode()
    s = socket.create_connection(("127.0.0.1", router.port))
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    time.sleep(0.3)
    s.close()
    f.check(wait_for(lambda: router.metrics().get('kvrouter_queue_rejections_total{set="m",model="m",reason="client_left"}') == 1, 3),
            "a client that leaves while queued is taken out of the queue")
    f.check("gone" not in arrival_order(workers), "... and its request never reaches a worker")

    # 6. A bad priority.
    status, _, answer = router.request("POST", "/v1/chat/completions",
                                       {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                                       {"x-kvrouter-priority": "urgent"})
    f.check(status == 400 and "x-kvrouter-priority" in json.loads(answer)["error"]["message"],
            f"an unknown priority is a 400 naming the header ({status})")

    # 5. Nothing leaks: the slow requests end (cut by the router's stop) ... first, bookings.
    for w in workers:
        w.control(first_delay=0)
    router.stop()
    router = Router(kvrouter, "m", [f"{w.url},id={w.name}" for w in workers],
                    "--busy-threshold", "1", "--max-num-batched-tokens", "64", "--queue-size", "64",
                    "--health-interval-ms", "0", "--engine-metrics-interval-ms", "0")
    for w in workers:
        w.control(first_delay=0.05)
    results = []
    threads = in_background(router, [f"tail{i}" for i in range(40)], None, results)
    for t in threads:
        t.join()
    f.check(all(r["status"] == 200 for r in results), "40 requests through a queue of 64 all succeed")
    settled = wait_for(lambda: (lambda m: all(v == 0 for k, v in m.items() if k.startswith(
        ("kvrouter_worker_active_requests{", "kvrouter_worker_active_prefill_tokens{", "kvrouter_queue_depth{"))))(router.metrics()), 3)
    f.check(bool(settled), "after the run every booking and the queue are 0")
    m = router.metrics()
    f.check(m.get('kvrouter_queue_wait_seconds_count{set="m",model="m"}', 0) > 0, "waits were recorded in the histogram")
finally:
    router.stop()
    for w in workers:
        w.stop()
f.exit()
