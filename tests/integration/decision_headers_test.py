#!/usr/bin/python3
"""Integration: every proxied answer says where it went and carries a request id.

- `x-kvrouter-worker` names the worker that answered and `x-kvrouter-overlap-blocks` its cached
  prompt blocks (0 here: no KV events), streaming or not; `--no-decision-headers` drops both.
- `x-request-id`: a client's own goes to the worker and back unchanged; without one (or with an
  unusable one) kvrouter makes one (`kvr-...`), sends it to the worker and returns it; ids differ
  per request.
Usage: decision_headers_test.py PATH/TO/kvrouter"""
import http.client
import json
import sys

from router_harness import Failures, Router, Worker

kvrouter = sys.argv[1]
f = Failures()


def chat(router, stream=False, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", router.port, timeout=10)
    c.request("POST", "/v1/chat/completions", body=json.dumps(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": stream}),
        headers={"Content-Type": "application/json", **(headers or {})})
    r = c.getresponse()
    body = r.read()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


workers = [Worker("w0"), Worker("w1")]
try:
    router = Router(kvrouter, "m", [w.url for w in workers], "--router-mode", "round-robin")
    names = set()
    for stream in (False, True, False, True):
        status, headers, body = chat(router, stream)
        names.add(headers.get("x-kvrouter-worker"))
        answered_by = json.loads(body)["worker"] if not stream else None
        f.check(status == 200 and headers.get("x-kvrouter-overlap-blocks") == "0"
                and (answered_by is None or headers.get("x-kvrouter-worker") == answered_by),
                f"{'a stream' if stream else 'an answer'} names its worker ({headers.get('x-kvrouter-worker')}, "
                f"answered by {answered_by}) and its overlap ({headers.get('x-kvrouter-overlap-blocks')})")
    f.check(names == {"w0", "w1"}, f"round-robin shows both workers in the header ({names})")

    status, headers, _ = chat(router, headers={"X-Request-Id": "client-42"})
    seen = [h.get("x-request-id") for w in workers for h in w.stats()["headers"]]
    f.check(headers.get("x-request-id") == "client-42" and seen.count("client-42") == 1,
            f"a client's request id reaches the worker once and comes back ({headers.get('x-request-id')})")
    ids = []
    for bad in (None, "x" * 200, "has space"):
        _, headers, _ = chat(router, headers={"X-Request-Id": bad} if bad else None)
        ids.append(headers.get("x-request-id", ""))
    seen = [h.get("x-request-id") for w in workers for h in w.stats()["headers"]]
    f.check(all(i.startswith("kvr-") for i in ids) and len(set(ids)) == 3 and all(i in seen for i in ids),
            f"without a usable id kvrouter makes one per request and the worker gets it ({ids})")
    f.check(router.stop() == 0, "kvrouter stops cleanly")

    router = Router(kvrouter, "m", [w.url for w in workers], "--no-decision-headers")
    status, headers, _ = chat(router)
    f.check(status == 200 and "x-kvrouter-worker" not in headers and "x-kvrouter-overlap-blocks" not in headers
            and headers.get("x-request-id", "").startswith("kvr-"),
            "--no-decision-headers drops the decision, keeps the request id")
    router.stop()
finally:
    for w in workers:
        w.stop()
f.exit()
