"""MCP's requests and replies with one server: each request sent, then waited for.

A request gets an id, goes out a line, and waits for the reply with that id, within
its timeout and until its `cancel` event is set; one not answered in time, or
called off, is cancelled (`notifications/cancelled`), and a late reply to it is
dropped. Every line the server writes is read as it comes (`_received`): a reply
wakes its request, a notification is kept in `heard`, a request of the server's is
answered (a `ping`; anything else refused). A call's `notifications/progress` (its
token is the call's id) is reported (microagent.progress) by the thread that waits
for the call, the newest at each look: only progress that increases, never after
the call is over. Your secrets are blanked out of each
message as it is read, before anything is cut or kept; once the server is gone,
every request waiting, and every later one, hears how it went.

What it leaves out: the protocol's opening and its tools (client.py), and the
process itself (process.py).
"""

import collections
import itertools
import json
import threading
import time

from microagent.mcp.process import Process
from microagent.mcp.tools import blanked
from microagent.mcp.wire import MAX_LINE, METHOD_NOT_FOUND, line, message, quote, reply
from microagent.progress import report
from microagent.spans import current

TICK = 0.05     # seconds between looks at a cancel event and progress, while waiting
HEARD = 1000    # notifications kept in `heard`, the newest


class McpError(Exception):
    """An MCP request that failed: the server said no, or it never answered.

    `why` says which: "error" (the server's JSON-RPC error; `code` and `data` are
    its own), "timeout", "cancelled", or "gone" (the server died, closed, or
    wrote something that is not MCP). The words say what happened and what to do.
    """

    def __init__(self, words: str, why: str = "error", code: int | None = None,
                 data=None):
        super().__init__(words)
        self.why, self.code, self.data = why, code, data


class _Waiting:
    """Request `id` sent: `done` is set once its reply (or the end) has come."""

    def __init__(self, id_: int):
        self.id, self.done, self.reply = id_, threading.Event(), None
        self.told = None  # the newest progress the server told, not yet reported
        self.furthest = None  # the progress last taken from the server (it must increase)


class Exchange:
    """The requests and replies with the MCP server `name` running as `process`,
    which it starts; `heard` is the newest notifications it sent, in order."""

    def __init__(self, process: Process, name: str, env: dict[str, str] | None):
        self.name, self._process = name, process
        self.heard = collections.deque(maxlen=HEARD)
        # the values you passed, never quoted back (a server may print its key); the
        # longer first, since a value may hold another
        passed = sorted((env or {}).items(), key=lambda kv: -len(kv[1]))
        self._secrets = {k: v for k, v in passed if len(v) >= 6}
        self._pending, self._lock = {}, threading.Lock()
        self._ids = itertools.count(1)
        self.gone = None  # why the connection is over, once it is (a sentence)
        # messages read: all of them, when the tools were last listed, when the server
        # last said they changed
        self.seen = self.listed_at = self.changed_at = 0
        self.garbled = False  # whether it wrote what no MCP server writes
        process.start(heard=self._line, ended=self._stdout_ended)

    def stderr(self, most: int = 2000) -> str:
        """The last `most` characters of the server's stderr (your secrets blanked)."""
        text, trimmed = self._process.tail()
        text = self.blank(text)  # first, then cut: a key cut in two is not blanked
        if trimmed:  # the oldest bytes were let go, maybe in the middle of a key
            text = text[max(map(len, self._secrets.values()), default=0):]
        return text[-most:]

    # -- one request: sent, then waited for ----------------------------------------

    def ask(self, method, params, timeout, cancel) -> dict:
        """Send a request, then wait for its result; McpError if it is not answered."""
        if cancel is not None and cancel.is_set():  # called off before it went out
            raise McpError(f"cancelled: {method} was not sent to {self.name}",
                           "cancelled")
        with self._lock:
            if self.gone:
                raise McpError(self.gone, "gone")
            waiting = _Waiting(next(self._ids))
            self._pending[waiting.id] = waiting  # from here on, its reply is caught
        try:
            self._send(waiting.id, method, params)
            self._wait(waiting, method, timeout, cancel)
        finally:
            with self._lock:
                self._pending.pop(waiting.id, None)
        return self._result(waiting, method)

    def _send(self, id_, method, params) -> None:
        """Write request `id_` to the server (a tools/call with its _meta)."""
        if method == "tools/call":  # progress, if it tells any, comes under the call's id
            meta = {**params.get("_meta", {}), "progressToken": id_}
            if (caller := current()) is not None:  # the span it is made in (SEP-414):
                meta["traceparent"] = caller      # a traced tool's, the server's parent
            params = {**params, "_meta": meta}
        self._process.put(line({"jsonrpc": "2.0", "id": id_, "method": method,
                                "params": params}))  # here: a TypeError is the caller's

    def _wait(self, waiting, method, timeout, cancel) -> None:
        """Wait for the reply (or the end), looking at `cancel` every TICK s; a request
        cancelled or timed out is called off."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            answered = waiting.done.wait(max(0.0, min(left, TICK)))
            self._tell(waiting)  # in this thread, where the caller's listener is
            if answered:
                return
            if cancel is not None and cancel.is_set():
                self._call_off(waiting.id, "cancelled by the caller")
                raise McpError(f"cancelled: {method} was called off before "
                               f"{self.name} answered (notifications/cancelled sent)",
                               "cancelled")
            if time.monotonic() >= deadline:
                if method != "initialize":  # the handshake must not be cancelled
                    self._call_off(waiting.id, f"no answer within {timeout:g} s")
                raise McpError(f"{self.name} did not answer {method} within "
                               f"{timeout:g} s; it was called off "
                               "(notifications/cancelled sent). Try again, or give "
                               "a longer timeout=", "timeout")

    def _result(self, waiting, method) -> dict:
        """The result the reply carries; McpError for an error, or for no reply."""
        got = waiting.reply
        if got is None:  # the end came first
            raise McpError(self.gone, "gone")
        if "error" in got:
            error = got["error"] if isinstance(got["error"], dict) else {}
            said = error.get("message")
            code = error.get("code") if type(error.get("code")) is int else None
            words = self.blank(said if isinstance(said, str)
                               else json.dumps(got["error"]))
            raise McpError(f"{self.name} refused {method}: {quote(words, 500)} "
                           f"(JSON-RPC error {code})", "error", code, error.get("data"))
        if not isinstance(got.get("result"), dict):
            raise McpError(f"{self.name} answered {method} with a result that is not a "
                           f"JSON object: {quote(json.dumps(got.get('result')))}")
        return got["result"]

    def _tell(self, waiting) -> None:
        """Report the newest progress the server told for a call, if any."""
        with self._lock:
            told, waiting.told = waiting.told, None
        if told is not None:
            try:
                report(*told)
            except ValueError:  # a listener other calls report to as well: not ours
                pass

    def _progressed(self, params) -> None:
        """Keep a call's progress for its waiting thread; drop what isn't progress."""
        if not isinstance(params, dict):
            return
        token, done, total = (params.get(key) for key in ("progressToken", "progress",
                                                          "total"))
        # (wire.message read the line strictly: NaN and Infinity never get this far)
        if not (type(token) is int and type(done) in (int, float)
                and type(total) in (int, float, type(None))):
            return  # not our token (we send the call's id), or not numbers
        with self._lock:
            waiting = self._pending.get(token)
            if waiting is None or waiting.reply is not None:
                return  # no call waits for it, or the call is answered
            if waiting.furthest is not None and done <= waiting.furthest:
                return  # progress increases (the protocol's rule): a step back is dropped
            waiting.furthest = done
            said = params.get("message")
            waiting.told = (done, total, said if isinstance(said, str) else "")

    def _call_off(self, id_, reason):
        self._process.put(line({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": id_, "reason": reason}}))

    # -- what the server says: each line of its stdout, and its end ------------------

    def _line(self, raw: bytes) -> bool:
        """One line of the server's stdout, read and handled; False once it can't be."""
        if len(raw) > MAX_LINE:
            self.garbled = True
            self.end(f"the MCP server {self.name} wrote a message over "
                     f"{MAX_LINE >> 20} MiB, more than this client reads")
            return False
        if not raw.strip():
            return True
        try:  # your secrets out of what it said, before anything is cut or kept
            self._received(self.blank(message(raw, self.blank)), len(raw))
        except Exception as e:  # a shape no MCP message has (or one 900 deep)
            self.garbled = True
            self.end(f"the MCP server {self.name} wrote something on its stdout that is "
                     f"not an MCP message ({e}). A server over stdio writes only "
                     "JSON-RPC there, its logs to stderr: check that the command starts "
                     "an MCP server over stdio, and that nothing it runs prints")
            return False
        return True

    def _received(self, msg, size):
        """Handle one message from the server: a request, a notification, or a reply."""
        self.seen += 1
        method, id_ = msg.get("method"), msg.get("id")
        if isinstance(method, str) and "id" in msg:  # the server asks us something
            answer = (reply(id_, {}) if method == "ping" else
                      reply(id_, code=METHOD_NOT_FOUND,
                            said=f"this client offers no {method}"))
            self._process.put(line(answer))
        elif isinstance(method, str):  # a notification
            if method == "notifications/tools/list_changed":
                self.changed_at = self.seen
            elif method == "notifications/progress":
                self._progressed(msg.get("params"))
            self.heard.append(msg if size <= 4096 else {"method": method})
        elif type(id_) in (int, str) and ("result" in msg or "error" in msg):
            self.heard.append({"id": id_})  # a reply: kept short, in its place in order
            with self._lock:
                waiting = self._pending.get(id_)
            if waiting is not None:  # else it answers a request called off: dropped
                if waiting.reply is None:  # the first answer counts
                    waiting.reply = msg
                if self._listed_reply(msg):
                    self.listed_at = self.seen
                waiting.done.set()
        elif "error" in msg:  # an error about a message it could not read
            self.heard.append(msg if size <= 4096 else {"error": "(long)"})
        else:
            raise ValueError(f"a message that is no request, reply or notification: "
                             f"{quote(json.dumps(msg))}")

    @staticmethod
    def _listed_reply(msg):
        return isinstance(msg.get("result"), dict) and "tools" in msg["result"]

    def _stdout_ended(self):
        self.end(self._death() + ". Connect again to start it anew")

    def end(self, why):
        """The connection is over: every request waiting hears `why`."""
        with self._lock:
            if self.gone is None:
                self.gone = self.blank(why)
            waiting = list(self._pending.values())
        for each in waiting:
            each.done.set()

    def _death(self):
        """Why stdout ended, in words: how the server went, and its last words."""
        how = self._process.how()
        tail = self.stderr(600).strip()
        last = "; ".join(tail.splitlines()[-6:])
        words = f"; its stderr ends: {quote(last, 600)}" if last else ""
        return f"the MCP server {self.name} {how}{words}"

    def blank(self, value):
        """`value` (text or JSON) with your secrets blanked out (tools.blanked)."""
        return blanked(value, self._secrets)
