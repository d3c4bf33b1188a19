"""Small A2A peers that go wrong on purpose, for tests/a2a/test_client.py: http.server on 127.0.0.1.

    with peer(answer) as fake:    # an agent card at fake.url, and JSON-RPC at fake.url + "/"
        ...

`answer(request, h)` writes the answer to each JSON-RPC request (a dict); `card(url)` (a
keyword) makes the agent card, `good_card` by default. Every request is kept in `fake.asked`,
as (method, its params, its Authorization header). Helpers write the usual answers: `whole`
(a JSON reply), `events` (a server-sent event stream) and `task`.
"""

import contextlib
import json
import threading
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from microagent.tool import read_json


def good_card(url, *, streaming=True, version="1.0", binding="JSONRPC", skills=None, rpc=None):
    """An A2A 1.0 agent card for an agent at url, its JSON-RPC at url + "/" (or `rpc`)."""
    return {"name": "Fake office", "description": "A fake.", "version": "1.0",
            "supportedInterfaces": [{"url": rpc or url + "/", "protocolBinding": binding,
                                     "protocolVersion": version}],
            "capabilities": {"streaming": streaming}, "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": skills if skills is not None else
            [{"id": "desk", "name": "desk", "description": "Answers.", "tags": []}]}


def task(task_id, state, words=None, artifacts=()):
    """A Task as A2A 1.0 writes it (JSON), in `state` (COMPLETED: TASK_STATE_COMPLETED)."""
    status = {"state": f"TASK_STATE_{state}"}
    if words is not None:
        status["message"] = {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": words}]}
    return {"id": task_id, "contextId": "c1", "status": status,
            "artifacts": [{"artifactId": f"a{i}", "parts": [{"text": text}]}
                          for i, text in enumerate(artifacts)]}


def status(task_id, state, words=None):
    """A stream's statusUpdate event's result."""
    found = task(task_id, state, words)
    return {"statusUpdate": {"taskId": task_id, "contextId": "c1", "status": found["status"]}}


def whole(h, body, status=200, content_type="application/json"):
    """Write a whole reply: `body` as JSON, or bytes as they are."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    h.send_response(status)
    h.send_header("Content-Type", content_type)
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


def reply(request, result):
    """A JSON-RPC reply to `request` with `result`."""
    return {"jsonrpc": "2.0", "id": request["id"], "result": result}


def events(h, request, results, then=None):
    """Write a server-sent event stream: each of `results` an event; then `then(h)`, if given."""
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.end_headers()
    for result in results:
        h.wfile.write(b"data: " + json.dumps(reply(request, result)).encode() + b"\n\n")
        h.wfile.flush()
    if then is not None:
        then(h)


@contextlib.contextmanager
def peer(answer, card=good_card):
    """A fake A2A agent on 127.0.0.1 (`url`, and the requests it was `asked`), answering
    JSON-RPC requests with `answer`."""
    asked = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            made = card(url)
            if callable(made):  # it writes its own answer
                made(self)
            else:
                whole(self, made)

        def do_POST(self):
            request = read_json(self.rfile.read(int(self.headers["Content-Length"])).decode())
            asked.append((request["method"], request["params"], self.headers.get("Authorization")))
            try:
                answer(request, self)
            except (BrokenPipeError, ConnectionResetError):  # the client hung up, as it should
                pass
            self.close_connection = True

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    url = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield types.SimpleNamespace(url=url, asked=asked)
    finally:
        server.shutdown()
        server.server_close()
