"""One HTTP exchange with a remote agent, bounded: the A2A client's wire.

`replies(url, body, headers, until=..., listen=...)` sends one request (a GET when
`body` is None, else a POST of JSON) and hands back whether a stream came, and what
came as JSON values read strictly: the whole reply, or each event of a server-sent
event stream, read as it comes. Nothing a
server does can hold it or fool it:

- the exchange runs in a thread of its own, and the caller's thread waits for it a
  tick at a time, so no read can hold the caller: at `until` (a time.monotonic()
  deadline for the whole exchange, a stream included) the socket is shut down;
- `listen("")` is called at each piece that comes and each quiet tick, so a caller that
  stops (microagent.host's `thinking` raises when the client has gone) is heard while
  the server says nothing, or only keep-alives;
- at most MAX_REPLY bytes are read (transport's cap), and no redirect or proxy is used;
- JSON is read as microagent.tool.read_json reads it: a key twice, NaN or nesting past
  Python's depth are an A2AError, never a guess; lone surrogates become U+FFFD;
- the caller's token is blanked out of everything a server says (transport's Key).

It is microagent.transport's design (a thread per exchange, ticks, a cap) for a peer
that is no chat completions API: a GET as well as a POST, A2A's own words in every
error, and streams that end when the connection does, not at `data: [DONE]`.
What it leaves out: connection reuse, HTTP/2, retries (a message sent twice would
be a task asked twice), and a proxy.
"""

import json
import queue
import socket
import threading
import time
import urllib.parse
from http.client import HTTPConnection, HTTPSConnection

from microagent.tool import read_json
# the most a reply and a read may be, how often the caller's thread looks up while it
# waits, the token kept out of every word, and text with lone surrogates mended
from microagent.transport import MAX_REPLY, READ, TICK, Key, mended

SAID = 300  # characters: the most of a server's own words an error quotes


class A2AError(Exception):
    """What a remote agent (or the way to it) did wrong, in words that say what to do."""


def replies(url: str, body: bytes | None, headers: dict, *, until: float, listen,
            token: str | None = None):
    """Whether `url` answered with a stream, and the JSON values it sent: one for a
    whole reply, one per event of a stream."""
    key = Key(token)
    stream, pieces = _exchange(url, body, headers, until, listen, key)
    if stream:
        return True, (_read(event, url, key) for event in _events(pieces))
    return False, iter([_read(b"".join(pieces), url, key)])


def _exchange(url, body, headers, until, listen, key):
    """Whether the answer is a stream, and an iterator of its body's bytes."""
    parts = urllib.parse.urlsplit(url)
    https = parts.scheme == "https"
    opened = HTTPSConnection if https else HTTPConnection
    # the socket's own timeout a second past the deadline, so that the deadline, read
    # below at each tick, is what cuts a slow reply off, with the same words each time
    conn = opened(parts.hostname, parts.port or (443 if https else 80),  # ::1 is a host
                  timeout=max(until - time.monotonic(), 0.0) + 1.0)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    got, held = queue.SimpleQueue(), []  # held: the socket, once connected

    def run():
        try:
            conn.connect()
            held.append(conn.sock)
            conn.request("GET" if body is None else "POST", path, body,
                         {"User-Agent": "microagent", **headers})
            response = conn.getresponse()
            got.put(response)
            size = 0
            while size <= MAX_REPLY and (data := response.read1(READ)):
                size += len(data)
                got.put(data)
            got.put(b"")
        except Exception as e:  # for the caller to word, if it still listens
            got.put(e)
        finally:
            conn.close()
    threading.Thread(target=run, daemon=True).start()

    def take():
        while True:
            if time.monotonic() > until:
                raise A2AError(f"{url} had not answered in full within the timeout: "
                               "a reply that may never end was cut off; raise timeout=")
            try:
                item = got.get(timeout=TICK)
            except queue.Empty:
                item = None
            listen("")  # at each piece or quiet tick (a keep-alive brings no words): may raise
            if item is None:
                continue
            if isinstance(item, Exception):
                raise A2AError(_broken(url, item, bool(held)))
            return item

    def rest():
        size = 0
        try:
            while data := take():
                size += len(data)
                if size > MAX_REPLY:
                    raise A2AError(f"{url} sent more than {MAX_REPLY >> 20} MiB: the "
                                   "reply was not read (MAX_REPLY); ask for less")
                yield data
        finally:  # done, failed, or the caller stopped: hang up
            hang_up()

    def hang_up():
        for sock in held:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # closed already
                pass
    try:
        response = take()
    except BaseException:
        hang_up()
        raise
    if not 200 <= response.status < 300:
        said = b"".join(_at_most(rest(), 64 << 10)).decode("utf-8", "replace")
        raise A2AError(_refused(url, response, key.blanked(said)))
    return "text/event-stream" in (response.getheader("Content-Type") or ""), rest()


def _at_most(pieces, most: int):
    """The first `most` bytes or so of `pieces`, whatever went wrong after them."""
    size = 0
    try:
        for data in pieces:
            yield data
            size += len(data)
            if size >= most:
                return
    except A2AError:  # slow or broken: what came is what it said
        return


def _events(pieces):
    """A server-sent event stream's events, each its data lines joined (bytes)."""
    start, data = b"", []
    for piece in pieces:
        *lines, start = (start + piece).split(b"\n")
        for line in lines:
            line = line.rstrip(b"\r")
            if line == b"" and data:  # a blank line ends an event
                yield b"\n".join(data)
                data = []
            elif line.startswith(b"data:"):
                data.append(line[5:].removeprefix(b" "))
            # anything else (": keep-alive", event:, id:, retry:) carries no data
    if start.startswith(b"data:"):  # the last line, with no line break after it
        data.append(start[5:].removeprefix(b" "))
    if data:
        yield b"\n".join(data)


def _read(data: bytes, url: str, key: Key):
    """A JSON value from a server, read strictly, its texts mended and blanked."""
    try:
        return _mended(read_json(data.decode("utf-8")), key)
    except UnicodeDecodeError:
        raise A2AError(f"{url} sent a reply that is not UTF-8: it is no A2A reply") from None
    except ValueError as e:  # read_json's words: a key twice, too deep, not JSON
        raise A2AError(f"{url} sent a reply that could not be read: {e}") from None
    except RecursionError:  # read, but too deep for anything after to walk
        raise A2AError(f"{url} sent a reply nested too deeply to read") from None


def _mended(value, key: Key):
    """`value` with every string in it (keys too) free of lone surrogates and the token.

    >>> _mended({"text": "a\\ud800b"}, Key(None))
    {'text': 'a\\ufffdb'}
    """
    if isinstance(value, str):
        return key.blanked(mended(value))
    if isinstance(value, list):
        return [_mended(v, key) for v in value]
    if isinstance(value, dict):
        return {_mended(k, key): _mended(v, key) for k, v in value.items()}
    return value


def _refused(url: str, response, said: str) -> str:
    """An HTTP answer that is no reply (a redirect, 4xx, 5xx), in words."""
    status = response.status
    if 300 <= status < 400:
        where = (response.getheader("Location") or "?")[:SAID]
        return (f"{url} answered {status}, a redirect to {json.dumps(where)}: it was not "
                "followed, so the token goes only where you said; use that address")
    if status in (401, 403):  # quote nothing: some servers echo what they were sent
        return (f"{url} refused the request ({status}): check the token (token=), and "
                "that it may use this agent")
    return f"{url} answered {status}: {json.dumps(said[:SAID])}"


def _broken(url: str, e: Exception, connected: bool) -> str:
    if not connected and isinstance(e, ConnectionRefusedError):
        return f"could not connect to {url}: connection refused. Is the agent running there?"
    if not connected:
        return f"could not reach {url} ({type(e).__name__}): check the address"
    if isinstance(e, TimeoutError):
        return f"{url} did not answer within the timeout; raise timeout="
    return (f"the connection to {url} broke before the reply was whole "
            f"({type(e).__name__}): try again")
