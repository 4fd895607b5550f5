"""What a client makes of a streamed answer (server-sent events), for the migration tests:
the stream read event by event, and the answer a client would assemble from it."""
import http.client
import json

TIMEOUT = 30


def stream(port, path, body, on_event=None):
    """POSTs `body` and reads the SSE answer: (status, headers, [event data], complete) where
    complete says the chunked body ended properly. `on_event(i, data, headers)` runs as each
    event arrives."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    c.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    events, complete = [], False
    try:
        data_lines = []
        while True:
            line = r.readline()
            if not line:
                complete = True
                break
            line = line.decode().rstrip("\r\n")
            if line.startswith("data:"):
                data_lines.append(line[5:].lstrip(" "))
            elif line == "" and data_lines:
                events.append("\n".join(data_lines))
                data_lines = []
                if on_event:
                    on_event(len(events) - 1, events[-1], dict(r.getheaders()))
    except (http.client.IncompleteRead, ConnectionError):
        complete = False
    headers = dict(r.getheaders())
    c.close()
    return r.status, headers, events, complete


def read_answer(events, chat):
    """What a client makes of the events."""
    view = {"text": "", "roles": 0, "ids": set(), "usage": [], "finish": None, "errors": [], "done": False,
            "token_ids": [], "prompt_token_ids": None}
    for data in events:
        if data == "[DONE]":
            view["done"] = True
            continue
        event = json.loads(data)
        if "error" in event:
            view["errors"].append(event["error"])
            continue
        view["ids"].add(event["id"])
        if event.get("usage"):
            view["usage"].append(event["usage"])
        if "prompt_token_ids" in event:
            view["prompt_token_ids"] = event["prompt_token_ids"]
        for choice in event.get("choices", []):
            if chat:
                delta = choice.get("delta", {})
                if "role" in delta:
                    view["roles"] += 1
                view["text"] += delta.get("content") or ""
            else:
                view["text"] += choice.get("text") or ""
                if "prompt_token_ids" in choice:
                    view["prompt_token_ids"] = choice["prompt_token_ids"]
            view["token_ids"] += choice.get("token_ids") or []
            if choice.get("finish_reason"):
                view["finish"] = choice["finish_reason"]
    return view


def chat_body(content, max_tokens, **extra):
    return {"model": "m", "stream": True, "stream_options": {"include_usage": True}, "max_tokens": max_tokens,
            "temperature": 0, "seed": 3, "messages": [{"role": "user", "content": content}], **extra}


def completion_body(prompt, max_tokens, **extra):
    return {"model": "m", "stream": True, "stream_options": {"include_usage": True}, "max_tokens": max_tokens,
            "temperature": 0, "prompt": prompt, **extra}


def set_faults(mockers, **faults):
    for m in mockers:
        status, _ = m.request("POST", "/mocker/faults", faults)
        assert status == 200, faults
