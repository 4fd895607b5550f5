"""What the disaggregation tests share: request bodies, answers' text, direct mocker calls and
the bookings a dry run shows."""
import http.client
import json


def chat_body(model, content, stream=False, **extra):
    return {"model": model, "stream": stream, "max_tokens": 12, "messages": [{"role": "user", "content": content}], **extra}


def answer_text(status, body, stream):
    """The generated text of an answer (SSE streams joined); None unless 200."""
    if status != 200:
        return None
    if not stream:
        choice = json.loads(body)["choices"][0]
        return choice.get("message", {}).get("content", choice.get("text"))
    text = ""
    for line in body.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            choice = json.loads(line[6:])["choices"][0]
            text += choice.get("delta", {}).get("content") or choice.get("text") or ""
    return text


def direct(mocker, path, body):
    """POSTs `body` to one mocker itself: (status, body bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", mocker.port, timeout=30)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def busy_workers(router, set_names):
    """(set, worker) pairs with booked load, as a dry run per set shows them."""
    busy = []
    for name in set_names:
        _, _, body = router.request("POST", "/v1/chat/completions", chat_body(name, "probe"), {"x-kvrouter-dry-run": "1"})
        busy += [(name, c["worker"]) for c in json.loads(body)["candidates"] if c["active_prefill_tokens"] or c["active_decode_blocks"]]
    return busy


def generation_cases(model, words):
    """Six chats (every other one streamed) and two completions (one streamed) of `model`:
    (path, body, stream) each, prompts made of `words`."""
    cases = [("/v1/chat/completions", chat_body(model, f"{words} topic {i} " * 8, stream=i % 2 == 0), i % 2 == 0)
             for i in range(6)]
    cases += [("/v1/completions", {"model": model, "prompt": f"{words} number {i} " * 10, "max_tokens": 9, "stream": s}, s)
              for i, s in ((1, False), (2, True))]
    return cases


def compare_with_aggregated(router, reference, cases):
    """Sends each case through `router` and straight to the aggregated `reference` mocker:
    (whether each answer's text equals the reference's, the workers that answered)."""
    same, workers_seen = [], set()
    for path, body, stream in cases:
        status, headers, data = router.request("POST", path, body)
        expected = answer_text(*direct(reference, path, body), stream)
        got = answer_text(status, data, stream)
        same.append(got == expected and bool(got))
        workers_seen.add(headers.get("x-kvrouter-worker"))
    return same, workers_seen
