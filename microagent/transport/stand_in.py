"""A stand-in model server: the chat completions wire format, with scripted replies.

    from microagent.transport.stand_in import reply, serve

    with serve([reply(calls=[("add", '{"a": 2, "b": 3}')]), reply("It is 5.")]) as server:
        brain = chat_policy("stand-in", server.url)
        ...                 # each request gets the next scripted reply
        server.requests     # the JSON bodies it was sent, in order (server.paths: where)

It is a real `http.server` on 127.0.0.1, on a free port, in a thread of its own:
no model, and no network beyond this machine. The tests, the benchmarks and the
notebooks drive the LLM brain against it.

A reply goes out whole, or, when the request asks to `stream`, as server-sent
events cut into small pieces that split words and split the JSON of a call's
arguments mid-token, the way a real model's tokens fall. It speaks as the real
servers do: `id`, `created` and `model` on every reply and chunk, finish_reason
"tool_calls" for calls, and (`verbose=True`, as llama.cpp's Python server does)
every delta repeating its call's id and name, absent fields as explicit nulls.
Like that server, it refuses an assistant message whose content is null (HTTP
500, a validation error).

It can also play a hostile or broken server, for the transport's tests: an HTTP
error (with a Retry-After, or its body a byte at a time), a redirect, a slow
answer, a stream that stalls, is cut short or holds only keep-alives, a stream
made by hand (`stream_of`), any raw body (`raw`), a body sent a byte at a time
(`drip`), and a chunked body whose chunk sizes drip or whose trailer never ends
(`chunked`). "$AUTHORIZATION" in a scripted reply is replaced by the request's
Authorization header, as a server that echoes the key would.
"""

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PIECE = 3  # characters per streamed piece: small enough to split words and JSON tokens
CREATED = 1700000000  # a fixed time, so what the server sends is the same every run


def reply(content=None, calls=(), usage=(20, 5), delay: float = 0.0,
          stall_after: int | None = None, pause: float = 0.0, finish: str | None = None,
          verbose: bool = False, cut_after: int | None = None) -> dict:
    """A scripted answer: words, tool calls [(name, arguments JSON text)], what it cost.

    `delay` waits before answering; `pause` waits between streamed events; `stall_after`
    stops a stream after that many events until the server is closed; `cut_after` ends
    it there, without [DONE]. `finish` is the finish_reason ("length": cut off).
    """
    message = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [{"id": f"call_abc{i}", "type": "function",
                                  "function": {"name": n, "arguments": a}}
                                 for i, (n, a) in enumerate(calls)]
    return {"message": message, "usage": {"prompt_tokens": usage[0],
                                          "completion_tokens": usage[1],
                                          "total_tokens": sum(usage)},
            "delay": delay, "pause": pause, "stall_after": stall_after,
            "cut_after": cut_after, "finish": finish or ("tool_calls" if calls else "stop"),
            "verbose": verbose}


def error(status: int, message: str = "scripted failure", retry_after: str | None = None,
          every: float | None = None) -> dict:
    """A scripted HTTP error, with the JSON error body OpenAI-compatible servers send;
    `every`: the body goes a byte at a time, that many seconds apart."""
    return {"status": status, "message": message, "retry_after": retry_after,
            "every": every}


def moved(status: int, location: str) -> dict:
    """A scripted redirect to `location`."""
    return {"status": status, "location": location}


def raw(text: str, content_type: str = "text/html") -> dict:
    """A scripted 200 answer with exactly this body: a web page, say, or a hand-made stream."""
    return {"raw": text, "content_type": content_type}


def drip(text: str, every: float, stream: bool = True) -> dict:
    """A 200 answer sent one byte every `every` seconds: a stream, or a whole body."""
    return {"drip": text, "every": every, "stream": stream}


def chunked(text: str, content_type: str = "text/event-stream",
            trailer_every: float | None = None, sizes_every: float | None = None) -> dict:
    """A 200 answer in chunked transfer encoding, one chunk per line of `text`.

    `trailer_every`: after the last chunk, a trailer line that many seconds apart, for
    ever. `sizes_every`: each chunk's size line goes a byte at a time (its size written
    with a thousand leading zeros), that many seconds apart.
    """
    return {"chunked": text, "content_type": content_type, "trailer_every": trailer_every,
            "sizes_every": sizes_every}


def keep_alives(count: int, pause: float) -> dict:
    """A stream of only keep-alive comments, `pause` seconds apart, then cut short."""
    return {"keep_alives": count, "pause": pause}


def stream_of(*deltas: dict, done: bool = True) -> dict:
    """A stream made by hand: one chunk per delta, as server-sent events, then [DONE]."""
    events = "".join(f"data: {json.dumps(chunk(d))}\n\n" for d in deltas)
    return raw(events + ("data: [DONE]\n\n" if done else ""), "text/event-stream")


def chunk(delta: dict | None, finish=None, usage=None, model: str = "stand-in") -> dict:
    """One chunk of a stream, with the fields every real server sends."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    out = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": CREATED,
           "model": model, "choices": choices}
    if usage is not None:
        out["usage"] = usage
    return out


def chunks(message: dict, usage: dict | None, piece: int = PIECE, finish: str | None = None,
           verbose: bool = False, model: str = "stand-in") -> list[dict]:
    """A whole reply message cut into the chunks of a stream, `piece` characters at a time."""
    def delta(**fields):
        if verbose:  # every field, null when absent, as llama.cpp's Python server sends
            return {"role": None, "content": None, "tool_calls": None, **fields}
        return fields

    out = [chunk(delta(role="assistant", content=""), model=model)]
    text = message.get("content") or ""
    out += [chunk(delta(content=text[i:i + piece]), model=model)
            for i in range(0, len(text), piece)]
    for i, call in enumerate(message.get("tool_calls", [])):
        name, args = call["function"]["name"], call["function"]["arguments"]
        first = {"index": i, "id": call["id"], "type": "function",
                 "function": {"name": name, "arguments": ""}}
        out.append(chunk(delta(tool_calls=[first]), model=model))
        for j in range(0, len(args), piece):
            bit = {"index": i, "function": {"arguments": args[j:j + piece]}}
            if verbose:  # the id and the name again, in every piece
                bit = {**first, "function": {"name": name, "arguments": args[j:j + piece]}}
            out.append(chunk(delta(tool_calls=[bit]), model=model))
    finish = finish or ("tool_calls" if message.get("tool_calls") else "stop")
    out.append(chunk(delta(), finish, model=model))
    if usage is not None:
        out.append(chunk(None, usage=usage, model=model))
    return out


def whole(message: dict, usage: dict, finish: str, model: str = "stand-in") -> dict:
    """A whole reply, with the fields every real server sends."""
    return {"id": "chatcmpl-1", "object": "chat.completion", "created": CREATED,
            "model": model, "choices": [{"index": 0, "message": message,
                                         "finish_reason": finish}], "usage": usage}


def null_content(body: dict) -> str | None:
    """What llama.cpp's Python server says of an assistant content of null, or None."""
    for i, m in enumerate(body.get("messages", [])):
        if m.get("role") == "assistant" and "content" in m and m["content"] is None:
            kinds = [("System", "literal_error", "role", "\"Input should be 'system'\""),
                     ("User", "literal_error", "role", "\"Input should be 'user'\""),
                     ("Assistant", "string_type", "content",
                      "'Input should be a valid string'"),
                     ("Tool", "literal_error", "role", "\"Input should be 'tool'\""),
                     ("Tool", "missing", "tool_call_id", "'Field required'")]
            lines = [f"  {{'type': '{kind}', 'loc': ('body', 'messages', {i}, "
                     f"'ChatCompletionRequest{name}Message', '{field}'), 'msg': {msg}, "
                     "'input': None}" for name, kind, field, msg in kinds]
            return (f"{len(lines)} validation errors:\n" + "\n".join(lines)
                    + '\n\n  File "app.py", line 376')
    return None


class StandIn:
    """The running stand-in: its url, what it was sent, and whether a client hung up."""

    def __init__(self, script: list[dict], certificate: str | None = None):
        self.script, self.requests, self.headers, self.sent = list(script), [], [], []
        self.paths = []  # the path (and query) of each request, in order
        self.hung_up = threading.Event()  # a client closed the connection mid-answer
        self.closing = threading.Event()
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with outer.lock:
                    outer.requests.append(body)
                    outer.paths.append(self.path)
                    outer.headers.append(dict(self.headers))
                    entry = outer.script.pop(0) if outer.script else error(
                        400, "the stand-in's script is over: give it more replies")
                if "usage" in entry:  # a reply: a hostile server repeats the key it was sent
                    said = json.dumps(entry["message"]).replace(
                        "$AUTHORIZATION", self.headers.get("Authorization", ""))
                    entry = {**entry, "message": json.loads(said)}
                refused = null_content(body)
                if refused is not None:
                    entry = error(500, refused)
                try:
                    outer.answer(self, body, entry)
                except (BrokenPipeError, ConnectionResetError):
                    outer.hung_up.set()

            do_GET = do_POST  # a client that follows a redirect with a GET finds the script

            def log_message(self, *args):  # quiet: the tests read what matters from StandIn
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        scheme = "http"
        if certificate is not None:  # a PEM file with the certificate and its key
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.load_cert_chain(certificate)
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()

    def answer(self, handler, body: dict, entry: dict) -> None:
        if "location" in entry:
            return send(handler, entry["status"], "", "text/plain",
                        {"Location": entry["location"]})
        if "status" in entry:
            said = json.dumps({"error": {"message": entry["message"], "type": "scripted"}})
            retry = {} if entry["retry_after"] is None else {"Retry-After": entry["retry_after"]}
            if entry["every"] is None:
                return send(handler, entry["status"], said, "application/json", retry)
            return self.dripped(handler, entry["status"], said.encode(), entry["every"], retry)
        if "raw" in entry:
            return send(handler, 200, entry["raw"], entry["content_type"])
        if "drip" in entry:
            data = entry["drip"].encode()
            if entry["stream"]:
                start_stream(handler)
                return self.dribble(handler, data, entry["every"])
            return self.dripped(handler, 200, data, entry["every"])
        if "chunked" in entry:
            return self.chunked(handler, entry)
        if "keep_alives" in entry:
            start_stream(handler)
            for _ in range(entry["keep_alives"]):
                handler.wfile.write(b": keep-alive\r\n\r\n")
                handler.wfile.flush()
                if self.closing.wait(entry["pause"]):
                    return
            return
        self.closing.wait(entry["delay"])
        model = body.get("model", "stand-in")
        if not body.get("stream"):
            said = whole(entry["message"], entry["usage"], entry["finish"], model)
            self.sent.append(said)
            return send(handler, 200, json.dumps(said), "application/json")
        usage = entry["usage"] if (body.get("stream_options") or {}).get("include_usage") \
            else None
        start_stream(handler)
        handler.wfile.write(b": a comment line, which clients must skip\r\n\r\n")
        for n, c in enumerate(chunks(entry["message"], usage, finish=entry["finish"],
                                     verbose=entry["verbose"], model=model)):
            if n == entry["stall_after"]:
                self.closing.wait()
            if n == entry["cut_after"]:
                return  # the connection closes: no [DONE]
            self.sent.append(c)
            handler.wfile.write(b"data: " + json.dumps(c).encode() + b"\r\n\r\n")
            handler.wfile.flush()
            self.closing.wait(entry["pause"])
        handler.wfile.write(b"data: [DONE]\r\n\r\n")

    def dripped(self, handler, status: int, data: bytes, every: float, headers=None):
        """A whole body of known length, sent a byte at a time."""
        handler.send_response(status)
        for name, value in {"Content-Type": "application/json",
                            "Content-Length": str(len(data)), **(headers or {})}.items():
            handler.send_header(name, value)
        handler.end_headers()
        self.dribble(handler, data, every)

    def dribble(self, handler, data: bytes, every: float) -> None:
        for i in range(len(data)):
            handler.wfile.write(data[i:i + 1])
            handler.wfile.flush()
            if self.closing.wait(every):
                return

    def chunked(self, handler, entry: dict) -> None:
        handler.protocol_version = "HTTP/1.1"  # chunked transfer encoding is HTTP/1.1's
        handler.close_connection = True
        handler.send_response(200)
        handler.send_header("Content-Type", entry["content_type"])
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()
        for line in entry["chunked"].encode().splitlines(keepends=True) + [b""]:
            size = f"{len(line):x}\r\n".encode()
            if entry["sizes_every"] is None:
                handler.wfile.write(size)
            else:  # the same size, with a thousand zeros in front, a byte at a time
                self.dribble(handler, b"0" * 1000 + size, entry["sizes_every"])
            handler.wfile.write(line + b"\r\n" if line else b"")
            handler.wfile.flush()
        n = 0
        while entry["trailer_every"] is not None and not self.closing.wait(
                entry["trailer_every"]):
            handler.wfile.write(f"X-Trailer-{n}: still here\r\n".encode())
            handler.wfile.flush()
            n += 1
        handler.wfile.write(b"\r\n")

    def close(self) -> None:
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "StandIn":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def start_stream(handler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "text/event-stream")
    handler.end_headers()  # no length: the stream ends when the server closes the connection


def send(handler, status: int, text: str, content_type: str, headers: dict | None = None):
    """Answer with a whole body."""
    data = text.encode("utf-8", "surrogatepass")
    handler.send_response(status)
    for name, value in {"Content-Type": content_type, "Content-Length": str(len(data)),
                        **(headers or {})}.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(data)


def serve(script: list[dict], certificate: str | None = None) -> StandIn:
    """Start a stand-in server that answers each request with the next entry of `script`;
    with a `certificate` (a PEM file holding it and its key), at an https:// address."""
    return StandIn(script, certificate)
