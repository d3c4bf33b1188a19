"""A stand-in model server for the tests: the chat completions wire format, with scripted replies.

    server = serve([reply(calls=[("add", '{"a": 2, "b": 3}')]), reply("It is 5.")])
    brain = chat_policy("stand-in", server.url)
    ...                    # each request gets the next scripted reply
    server.requests        # the JSON bodies it was sent, in order
    server.close()

A reply goes out whole, or, when the request asks for `stream`, as server-sent
events cut into small pieces that split words and split the JSON of tool-call
arguments mid-token, the way a real model's tokens fall. A script entry can also
be an HTTP error (with a Retry-After), a slow answer, a stream that stalls, a
stream made by hand (`stream_of`), or any raw body at all.

It is a real `http.server` on 127.0.0.1, on a free port, in a thread. No model,
no network beyond this machine.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PIECE = 3  # characters per streamed piece: small enough to split words and JSON tokens


def reply(content: str | None = None, calls=(), usage=(20, 5), delay: float = 0.0, stall_after: int | None = None,
          pause: float = 0.0) -> dict:
    """A scripted answer: words, tool calls [(name, arguments JSON text)], and what it cost.

    `delay` waits before answering; `pause` waits between streamed events; `stall_after`
    stops a stream after that many events until the server is closed.
    """
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"id": f"call_abc{i}", "type": "function", "function": {"name": n, "arguments": a}}
                                 for i, (n, a) in enumerate(calls)]
    return {"message": message, "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                                          "total_tokens": sum(usage)},
            "delay": delay, "pause": pause, "stall_after": stall_after}


def error(status: int, message: str = "scripted failure", retry_after: str | None = None) -> dict:
    """A scripted HTTP error, with the JSON error body OpenAI-compatible servers send."""
    return {"status": status, "message": message, "retry_after": retry_after}


def raw(text: str) -> dict:
    """A scripted 200 answer with exactly this body: a web page, say, or a hand-made stream."""
    return {"raw": text}


def stream_of(*deltas: dict) -> dict:
    """A scripted stream made by hand: one chunk per delta, as server-sent events, then [DONE]."""
    events = [{"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": d}]} for d in deltas]
    return raw("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n")


def chunks(message: dict, usage: dict | None, piece: int = PIECE) -> list[dict]:
    """A whole reply message cut into the chunks of a stream, `piece` characters at a time."""
    def chunk(delta, finish=None):
        return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    out = [chunk({"role": "assistant", "content": ""})]
    text = message.get("content") or ""
    out += [chunk({"content": text[i:i + piece]}) for i in range(0, len(text), piece)]
    for i, call in enumerate(message.get("tool_calls", [])):
        name, args = call["function"]["name"], call["function"]["arguments"]
        out.append(chunk({"tool_calls": [{"index": i, "id": call["id"], "type": "function",
                                          "function": {"name": name, "arguments": ""}}]}))
        out += [chunk({"tool_calls": [{"index": i, "function": {"arguments": args[j:j + piece]}}]})
                for j in range(0, len(args), piece)]
    out.append(chunk({}, "tool_calls" if message.get("tool_calls") else "stop"))
    if usage is not None:
        out.append({"object": "chat.completion.chunk", "choices": [], "usage": usage})
    return out


class Server:
    """The running stand-in: its url, what it was sent, and whether a client hung up on a stream."""

    def __init__(self, script: list[dict]):
        self.script, self.requests, self.headers = list(script), [], []
        self.hung_up = threading.Event()  # a client closed the connection while we were streaming
        self.closing = threading.Event()
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    outer.requests.append(body)
                    outer.headers.append(dict(self.headers))
                    entry = outer.script.pop(0) if outer.script else error(500, "the script has no more replies")
                try:
                    outer.answer(self, body, entry)
                except (BrokenPipeError, ConnectionResetError):
                    outer.hung_up.set()

            def log_message(self, *args):  # quiet: the tests read what matters from the Server
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()  # quick to shut down

    def answer(self, handler, body: dict, entry: dict) -> None:
        if "status" in entry:
            said = json.dumps({"error": {"message": entry["message"], "type": "scripted"}})
            retry = {} if entry["retry_after"] is None else {"Retry-After": entry["retry_after"]}
            return send(handler, entry["status"], said, "application/json", retry)
        if "raw" in entry:
            return send(handler, 200, entry["raw"], "text/html")
        self.closing.wait(entry["delay"])
        if not body.get("stream"):
            whole = {"object": "chat.completion", "model": body.get("model"), "usage": entry["usage"],
                     "choices": [{"index": 0, "message": entry["message"], "finish_reason": "stop"}]}
            return send(handler, 200, json.dumps(whole), "application/json")
        usage = entry["usage"] if body.get("stream_options", {}).get("include_usage") else None
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.end_headers()  # no length: the stream ends when the server closes the connection
        handler.wfile.write(b": a comment line, which clients must skip\r\n\r\n")
        for n, c in enumerate(chunks(entry["message"], usage)):
            if n == entry["stall_after"]:
                self.closing.wait()
            handler.wfile.write(b"data: " + json.dumps(c).encode() + b"\r\n\r\n")
            self.closing.wait(entry["pause"])
        handler.wfile.write(b"data: [DONE]\r\n\r\n")

    def close(self) -> None:
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def send(handler, status: int, text: str, content_type: str, headers: dict | None = None) -> None:
    """Answer with a whole body."""
    data = text.encode()
    handler.send_response(status)
    for name, value in {"Content-Type": content_type, "Content-Length": str(len(data)), **(headers or {})}.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


def serve(script: list[dict]) -> Server:
    """Start a stand-in server that answers each request with the next entry of `script`."""
    return Server(script)
