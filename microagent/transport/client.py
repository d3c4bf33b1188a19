"""The hardened transport: a `send` for the LLM brain that no server can hold or fool.

    brain = chat_policy("gpt-4o-mini", "https://api.openai.com/v1", api_key=key,
                        send=hardened(timeout=60, deadline=300, retries=3))

It does what microagent.llm's `post` does (one POST, then the reply's JSON objects:
the whole reply, or each chunk of a stream), and stands up to the servers of the
world, each piece for a reason (README.md says more):

- The exchange runs in a thread of its own, and the brain's thread waits for it a
  tick at a time, yielding {} while nothing comes. So a server can't hold the
  brain inside a read: `deadline` bounds a whole try (connect, send, the last
  byte), `timeout` each wait, and on_text hears the ticks, so a cancel is heard.
  (http.client reads chunk sizes and trailers itself, a line at a time; a server
  that drips them, or sends trailer lines for ever, would hold a plain reader.)
- 429 and 5xx answers are tried again `retries` times, waiting as the server asks
  (Retry-After, at most MAX_WAIT), unless the answer says the request is invalid
  (or is the same 5xx twice): trying again can't help then.
- No redirect is followed and no proxy is used unless asked (`proxy=`), so the
  key and the notebook go only to base_url. Through a proxy, only https:// base
  URLs go (a tunnel: the proxy sees the host, not the key); an http:// one is
  refused, since the proxy would read the key and every notebook in clear.
  http_proxy and https_proxy are not read; an error says so when one is set.
- A reply may be at most MAX_REPLY bytes. An error's body is read for at most
  ERROR_WORDS seconds and 64 KiB: a server's words come at once, or not at all.
- The key is blanked out of every string of every chunk, and of every error text,
  however JSON spells it, before anything is cut short (microagent.transport.keys).

What it leaves out: HTTP/2, connection reuse, async, and a proxy that speaks TLS
itself (an https:// proxy URL).
"""

import json
import math
import queue
import re
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from http.client import HTTPConnection, HTTPSConnection, IncompleteRead

from microagent.llm import WHAT_TO_DO, LLMError, problem
from microagent.transport.keys import Key, Pieces

MAX_REPLY = 8 << 20  # bytes: the most one reply may be (8 MiB), so memory can't fill up
MAX_WAIT = 60.0  # seconds: the longest Retry-After honoured, so a server can't park a run
ERROR_WORDS = 5.0  # seconds: the most time an error's body may take to come
READ = 64 << 10  # bytes: the most one read takes
TICK = 0.25  # seconds: how often the brain's thread looks up while it waits
SAID = 300  # characters: the most of a server's own words an error quotes


def hardened(*, timeout: float = 60, deadline: float = 300, retries: int = 3,
             sleep=time.sleep, proxy: str | None = None):
    """A `send(url, body, headers)` for chat_policy, hardened against the world's servers.

    `timeout`: seconds for each wait for the server (a model loading can take that
    long). `deadline`: seconds for a whole try, from connecting to the last byte (a
    reply still coming then, from a model that never stops or a server that drips,
    is an LLMError). `retries`: how often a 429 or 5xx is tried again, `sleep` doing
    the waiting between. `proxy`: "http://host:port", for https:// base URLs only.
    """
    for name, value in (("timeout", timeout), ("deadline", deadline)):
        if not (type(value) in (int, float) and 0 < value < math.inf):
            raise ValueError(f"{name} must be a number of seconds above 0, not {value!r}")
    if not (type(retries) is int and retries >= 0):  # True is an int in Python
        raise ValueError(f"retries must be a whole number, 0 or more, not {retries!r}")
    if not callable(sleep):
        raise TypeError(f"sleep is a function of seconds, like time.sleep, not {sleep!r}")
    tunnel = _proxy(proxy)

    def send(url: str, body: bytes, headers: dict):
        key = Key(headers.get("Authorization", "").removeprefix("Bearer ") or None)
        headers = {"User-Agent": "microagent", **headers}
        before = None  # the last failure: the same 5xx twice is not going to change
        for attempt in range(retries + 1):
            call = _Call(url, body, headers, timeout, deadline, tunnel)
            try:
                response = yield from call.answer()
                if 200 <= response.status < 300:
                    pieces = Pieces(key)
                    if "event-stream" in (response.getheader("Content-Type") or ""):
                        yield from _stream(call, pieces)
                    else:
                        yield from _whole(call, pieces)
                    return
                said = yield from _said(call, response, key)
            finally:  # done, failed, or the brain stopped reading: hang up
                call.close()
            status = response.status
            settled = status >= 500 and ("validation error" in said.lower()
                                         or (status, said) == before)
            if (status != 429 and status < 500) or attempt == retries or settled:
                raise LLMError(_problem(url, status, said, attempt + 1, settled))
            before = status, said
            yield from _nap(_retry_after(response.getheader("Retry-After"), attempt), sleep)
    return send


class _Call:
    """One HTTP exchange, run in a thread of its own and watched from the caller's.

    The thread connects, sends, reads the answer, then reads the body a piece at a
    time, handing each over through a queue. The caller takes them a tick at a time
    (`next`), so it is never stuck in a read, and can stop: `close` shuts the socket
    down, which ends whatever read the thread is in.
    """

    def __init__(self, url, body, headers, timeout, deadline, tunnel):
        self.url, self.timeout, self.deadline = url, timeout, deadline
        self.until = time.monotonic() + deadline
        self.conn, self.path, self.proxied = _connection(url, timeout, tunnel)
        self.stage, self.sock, self.stopped = "connect", None, False
        self.queue = queue.SimpleQueue()
        threading.Thread(target=self._run, args=(body, headers), daemon=True).start()

    def _run(self, body: bytes, headers: dict) -> None:
        response = None
        try:
            self.conn.connect()
            self.sock = self.conn.sock
            if self.stopped:  # closed while it connected
                return
            self.stage = "send"
            self.conn.request("POST", self.path, body, headers)
            self.stage = "answer"
            response = self.conn.getresponse()
            self.stage = "read"
            self.queue.put(response)
            size = 0
            while size <= MAX_REPLY and (data := response.read1(READ)):
                size += len(data)
                self.queue.put(data)
            if size <= MAX_REPLY and response.length:  # less than its Content-Length: cut
                raise IncompleteRead(b"", response.length)
            self.queue.put(b"")
        except Exception as e:  # for the caller to word, if it still listens
            self.queue.put(e)
        finally:
            if response is not None:
                response.close()
            self.conn.close()

    def next(self):
        """The response, then the body's bytes, b"" at its end; None after a quiet tick."""
        try:
            item = self.queue.get(timeout=TICK)
        except queue.Empty:
            item = None
        if isinstance(item, Exception):
            raise LLMError(self._failed(item))
        if time.monotonic() > self.until:
            raise LLMError(_overdue(self.url, self.deadline, self.stage))
        return item

    def answer(self):
        """Wait for the status line and the headers, yielding {} each tick: the response."""
        while (item := self.next()) is None:
            yield {}
        return item

    def pieces(self):
        """The body's bytes as they come, and None for a tick that brought none."""
        size = 0
        while (data := self.next()) != b"":
            size += len(data or b"")
            if size > MAX_REPLY:
                raise LLMError(f"{self.url} sent a reply of more than {MAX_REPLY >> 20} "
                               "MiB (MAX_REPLY): it was not read; set max_tokens")
            yield data

    def close(self) -> None:
        self.stopped = True
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # closed already
                pass

    def _failed(self, e: Exception) -> str:
        """What went wrong in the thread, in words, by how far it had got."""
        url, waited = self.url, f"timeout={self.timeout:g}s"
        if isinstance(e, TimeoutError):
            return {"connect": f"{url} did not accept the connection within {waited}: "
                               "check the base URL, and that this machine can reach it",
                    "send": f"{url} took longer than {waited} to take the request",
                    "answer": f"{url} took longer than {waited} to start answering: is "
                              "the model still loading? raise the timeout, or try a "
                              "smaller model",
                    }.get(self.stage, f"{url} took longer than {waited} to send the next "
                                      "piece of the reply")
        if self.stage == "connect" and isinstance(e, ConnectionRefusedError):
            return (f"could not connect to {url}: connection refused. Is the model "
                    f"server running, at that address?{_unused_proxy(url, self.proxied)}")
        if self.stage == "connect":  # no such host, TLS to a plain server, ...
            return (f"could not reach {url} ({type(e).__name__}: {e}): check the base "
                    f"URL{_unused_proxy(url, self.proxied)}")
        return (f"the connection to {url} broke before the reply was whole "
                f"({type(e).__name__}): try again")


def _stream(call: _Call, pieces: Pieces):
    """A stream's chunks, blanked, as they come; {} for each line or wait without one."""
    events, done, alien = 0, False, False  # alien: a line no stream of chunks has
    for line in _lines(call.pieces()):
        if line is None:
            yield {}
            continue
        line = line.strip()
        if not line.startswith(b"data:"):  # a comment (a keep-alive), event:, id:, ...
            alien = alien or not (line == b"" or line.startswith(
                (b":", b"event:", b"id:", b"retry:")))
            yield {}
            continue
        if line[5:].strip() == b"[DONE]":
            done = True
            break
        events += 1
        yield pieces.chunk(_loads(line[5:], call.url))
    if not done:
        if alien or events == 0:
            raise LLMError(_not_chat(call.url) if alien else (
                f"{call.url} ended the stream without a reply: the server may not stream "
                "this request; try stream=False"))
        raise LLMError(f"{call.url} stopped mid-reply: the stream ended before data: "
                       "[DONE], so the reply may not be whole; try again, or stream=False")
    yield from pieces.rest()


def _whole(call: _Call, pieces: Pieces):
    """A whole reply, blanked, once it is all in; {} for each piece or wait before."""
    body = []
    for data in call.pieces():
        if data:
            body.append(data)
        yield {}
    yield pieces.whole(_loads(b"".join(body), call.url))


def _lines(pieces):
    """The lines of a stream as they come (bytes), and None after a read that ended none."""
    start = []  # the start of a line whose end has not come yet
    for data in pieces:
        if data is None:
            yield None
            continue
        *ended, rest = data.split(b"\n")
        if ended:
            ended[0], start = b"".join(start) + ended[0], []
        start.append(rest)
        yield from ended or [None]
    if any(start):  # the last line, with no line break after it
        yield b"".join(start)


def _said(call: _Call, response, key: Key):
    """The server's own words about an error, blanked: its JSON error message, or its
    body, read for at most ERROR_WORDS seconds; a redirect's words are where it points."""
    if 300 <= response.status < 400:
        return "go to " + key.quoted(response.getheader("Location") or "?", SAID)
    call.until = min(call.until, time.monotonic() + ERROR_WORDS)
    body, size = [], 0
    try:
        for data in call.pieces():
            body.append(data or b"")
            size += len(data or b"")
            if size >= 64 << 10:  # a page of words is plenty
                break
            yield {}
    except LLMError:  # slow, or broken: what came is what it said
        size = 64 << 10
    text = b"".join(body).decode("utf-8", "replace")
    try:
        said = json.loads(text)
        said = said["error"] if isinstance(said, dict) and "error" in said else said["detail"]
        said = said.get("message", said) if isinstance(said, dict) else said
        text = said if isinstance(said, str) else json.dumps(said, ensure_ascii=False)
    except (ValueError, KeyError, TypeError, IndexError, RecursionError):
        pass  # not an OpenAI-style {"error": ...} (nor FastAPI's "detail"): as it is
    return key.quoted(text, SAID, cut=size >= 64 << 10)


def _problem(url: str, status: int, said: str, tries: int, settled: bool) -> str:
    """The book's words for a status (microagent.llm.problem), with what this one knows."""
    todo = None
    if settled:
        todo = ("the server rejects this request as it is, so it was not tried again: a "
                "setting may not suit this server")
    elif re.search(r"context.length|context window|maximum context|too many tokens|"
                   r"exceeds? the context", said, re.IGNORECASE):
        todo = ("the notebook is longer than the model's context: compact it "
                "(microagent.memory), or use a model with a longer context")
    elif 400 <= status < 500 and status not in (401, 403, 404, 429) and re.search(
            r"tool|function", said, re.IGNORECASE):
        todo = (f"{WHAT_TO_DO[400]}. If the model cannot call tools, try "
                "chat_policy(..., native=False)")
    after = f", still after {tries} tries" if tries > 1 else ""
    return problem(url, status, said, todo) + after


def _retry_after(header: str | None, attempt: int) -> float:
    """Seconds to wait before trying again: what the server asked, or else 1, 2, 4, ..."""
    try:
        seconds = float(header)
    except (TypeError, ValueError):  # absent, or a date: back off on our own
        seconds = math.nan
    if math.isnan(seconds):  # float("nan") reads, and time.sleep refuses it
        seconds = 2.0 ** attempt
    return min(max(seconds, 0.0), MAX_WAIT)


def _nap(wait: float, sleep):
    """Wait in naps of a second at most, yielding {} before each, so a cancel is heard."""
    while wait > 0:
        yield {}
        nap = min(wait, 1.0)
        sleep(nap)
        wait -= nap


def _connection(url: str, timeout: float, tunnel):
    """An HTTP(S) connection to url's host (or through `tunnel`), and the path to POST to."""
    parts = urllib.parse.urlsplit(url)
    https = parts.scheme == "https"
    port = parts.port or (443 if https else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if tunnel is None:
        if https:
            return HTTPSConnection(parts.hostname, port, timeout=timeout,
                                   context=ssl.create_default_context()), path, False
        return HTTPConnection(parts.hostname, port, timeout=timeout), path, False
    if not https:
        raise LLMError(f"{url} is http://: the proxy {tunnel[0]}:{tunnel[1]} would read "
                       "the key and every notebook in clear, so it is not sent; use an "
                       "https:// base URL, or no proxy")
    conn = HTTPSConnection(*tunnel, timeout=timeout, context=ssl.create_default_context())
    conn.set_tunnel(parts.hostname, port)  # CONNECT: TLS goes through, end to end
    return conn, path, True


def _proxy(proxy: str | None):
    """The (host, port) of a proxy given as "http://host:port", or None."""
    if proxy is None:
        return None
    try:
        parts = urllib.parse.urlsplit(proxy)
        if parts.scheme == "http" and parts.hostname and parts.port:
            return parts.hostname, parts.port
    except (TypeError, ValueError, AttributeError):
        pass
    raise ValueError(f'proxy is "http://host:port" (a proxy that tunnels https), '
                     f"not {proxy!r}")


def _unused_proxy(url: str, proxied: bool) -> str:
    """A note for an error, when the environment names a proxy this transport ignores."""
    parts = urllib.parse.urlsplit(url)
    named = urllib.request.getproxies().get(parts.scheme)
    if proxied or not named or urllib.request.proxy_bypass(parts.hostname or ""):
        return ""
    return (f" (${parts.scheme}_proxy is set, and not used: the key goes only to "
            "base_url; hardened(proxy=...) goes through a proxy)")


def _overdue(url: str, deadline: float, stage: str) -> str:
    if stage == "read":
        return (f"{url} was still sending its reply at the deadline (deadline="
                f"{deadline:g}s): a reply that may never end was cut off; set max_tokens, "
                "or raise the deadline")
    return (f"{url} had not answered by the deadline (deadline={deadline:g}s): is the "
            "model still loading? raise the deadline")


def _loads(data: bytes, url: str):
    try:
        return json.loads(data)
    except RecursionError:
        raise LLMError(f"{url} sent a reply nested too deeply to read: it is not a chat "
                       "completion") from None
    except ValueError:  # not JSON, or not UTF-8
        raise LLMError(_not_chat(url)) from None


def _not_chat(url: str) -> str:
    return (f"{url} did not answer like a chat completions API: check the base URL (it "
            "usually ends in /v1)")
