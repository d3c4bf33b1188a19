"""MCP's client side: the tools of a server in another process, as plain Tools.

    with connect(["npx", "-y", "@modelcontextprotocol/server-everything"]) as server:
        agent = Agent(policy, [*server.tools(), final_answer])
        ctx = agent.run("What is 2 + 3?", cancel=stop)

`connect` starts the server (process.py) and opens MCP with it, either generation
(wire.py); `server.tools()` are Tools whose schema is the server's `inputSchema`
(tools.py), so the loop checks each call before it goes out. Its one rule: a
request is sent, then waited for, within its timeout and until its `cancel` is
set; one that is not answered is called off (`notifications/cancelled`), and a
late answer to it is dropped. Your `env=` values are blanked out of everything
the server says back, as it is read. README.md says why each piece is there.

What it leaves out: transports other than stdio, resources and prompts, and the
requests a server may send back (sampling, elicitation, roots: it declares none
and answers each with an error; a `ping` it answers).
"""

import collections
import itertools
import json
import math
import shlex
import threading
import time

from microagent.message import Message
from microagent.mcp.process import PASSED_ON, Process
from microagent.mcp.tools import MAX_RESULT, blanked, cut, failed, said, tool_from
from microagent.mcp.wire import (CAPABILITIES_KEY, CLIENT_KEY, LEGACY, MAX_LINE, MODERN,
                                 METHOD_NOT_FOUND, SERVER_KEY, UNSUPPORTED_VERSION,
                                 VERSION_KEY, line, message, quote, reply)
from microagent.spans import current
from microagent.tool import Tool

PROBE = 5.0     # seconds to wait for server/discover before trying the handshake
TICK = 0.05     # seconds between looks at a cancel event while a request waits
HEARD = 1000    # notifications kept in `heard`, the newest
MAX_PAGES = 100  # pages of tools/list before a server is taken to loop for ever
CLIENT = {"name": "microagent", "version": "0.1.0"}


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


def connect(command: list[str], *, name: str | None = None, timeout: float = 60.0,
            probe: float = PROBE, cancel=None, env: dict[str, str] | None = None,
            cwd: str | None = None, max_result: int = MAX_RESULT) -> "Connection":
    """Start the MCP server `command` (a program and its arguments) and open MCP.

    `timeout`: seconds for each request. `cancel`: a threading.Event (give it the
    one you give agent.steps) that calls off a request under way once set. `env`:
    variables the server needs, over the few passed on. `max_result`: characters
    of a tool's result kept. Raises McpError if the server won't speak MCP.
    """
    return Connection(command, name=name, timeout=timeout, probe=probe, cancel=cancel,
                      env=env, cwd=cwd, max_result=max_result)


class _Waiting:
    """Request `id` sent: `done` is set once its reply (or the end) has come."""

    def __init__(self, id_: int):
        self.id, self.done, self.reply = id_, threading.Event(), None


class Connection:
    """MCP spoken with a server running as a subprocess of this one.

    `protocol` is the version the two agreed on, `info` what the server says it is
    (its serverInfo), `instructions` what it says about using it, `heard` the
    newest notifications it sent (progress, logs, list_changed), in order.
    """

    def __init__(self, command: list[str], *, name=None, timeout=60.0, probe=PROBE,
                 cancel=None, env=None, cwd=None, max_result=MAX_RESULT):
        if not (isinstance(command, (list, tuple)) and command
                and all(isinstance(part, str) for part in command)):
            raise TypeError(f"the command is a list of strings, the program first: "
                            f"['npx', '-y', 'some-mcp-server'], not {command!r}")
        _check_seconds("timeout", timeout)
        _check_seconds("probe", probe)
        if not (type(max_result) is int and max_result > 0):
            raise ValueError(f"max_result is a number of characters, not {max_result!r}")
        if cancel is not None and not callable(getattr(cancel, "is_set", None)):
            raise TypeError(f"cancel is a threading.Event, not {cancel!r}")
        if env is not None and not (isinstance(env, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
            raise TypeError("env is a dict of strings: {'API_KEY': key}")
        self.name = name or _named(command)
        self.timeout, self.probe, self.cancel = timeout, probe, cancel
        self.max_result = max_result
        self.protocol, self.info, self.instructions = None, {}, ""
        self.heard = collections.deque(maxlen=HEARD)
        self.skipped = []  # sentences: tools the server listed that could not be made
        # the values you passed: never quoted back (a server may print its key)
        passed = sorted((env or {}).items(), key=lambda kv: -len(kv[1]))  # a value inside
        self._secrets = {k: v for k, v in passed if len(v) >= 6}  # another: the longer first
        self._pending, self._lock = {}, threading.Lock()
        self._ids = itertools.count(1)
        self._gone = None  # why the connection is over, once it is (a sentence)
        self._seen = self._listed = self._changed = 0  # counts of messages read
        self._closed = self._garbled = False
        try:
            self._process = Process(command, env=env, cwd=cwd)
        except OSError as e:
            raise McpError(f"could not start the MCP server {self.name}: {e.strerror or e} "
                           f"({command[0]!r}: is it installed, and on the PATH?)",
                           "gone") from None
        self._process.start(heard=self._line, ended=self._stdout_ended)
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    # -- what a user calls ---------------------------------------------------------

    def tools(self, *, prefix: str = "", timeout: float | None = None) -> list[Tool]:
        """The server's tools, each a Tool: its name (`prefix` before it), its
        description, and its inputSchema as the schema each call is checked against.

        A name a chat API won't take ('admin.tools.list', 'météo') is given one it
        takes ('admin_tools_list', 'meteo': `local_name`); the call still goes out
        under the server's own name. A tool whose name reads like final_answer is
        left out (`skipped` says so). `timeout`: seconds for each call (None: the
        server's timeout).
        """
        if timeout is not None:
            _check_seconds("timeout", timeout)
        listed, cursor = [], None
        for _ in range(MAX_PAGES):
            result = self.request("tools/list", {} if cursor is None else {"cursor": cursor})
            page = result.get("tools")
            if not isinstance(page, list):
                raise McpError(f"{self.name} answered tools/list without a list of tools: "
                               f"{quote(json.dumps(result))}")
            listed += page
            cursor = result.get("nextCursor")
            if not (isinstance(cursor, str) and cursor):
                break
        else:
            raise McpError(f"{self.name} sent more than {MAX_PAGES} pages of tools/list: "
                           "a server that pages for ever")

        def call(name, arguments):
            return self.call(name, arguments, timeout=timeout)
        made, taken, self.skipped = [], set(), []
        for spec in listed:
            try:
                tool = tool_from(spec, call, prefix, taken)
            except ValueError as e:  # no name, no object schema, or reads like final_answer
                self.skipped.append(str(e))
                continue
            made.append(tool)
            taken.add(tool.name)
        return made

    def call(self, name: str, arguments: dict, *, timeout: float | None = None) -> str | Message:
        """Call the tool `name` (the server's own name for it), as its Tool does: the
        result's text, or an error note that says what went wrong."""
        try:
            result = self.request("tools/call", {"name": name, "arguments": arguments},
                                  timeout=timeout)
        except McpError as e:
            return failed(str(e))
        kind = result.get("resultType", "complete")
        if kind == "input_required":
            asked = result.get("inputRequests")
            what = sorted(asked) if isinstance(asked, dict) else "more input"
            return failed(f"{self.name} asks for input before {name} can finish "
                          f"({quote(str(what))}), and this client answers no such request")
        if kind != "complete":
            return failed(f"{self.name} answered {name} with a result of a kind this "
                          f"client does not read (resultType {quote(str(kind))})")
        text = cut(self._blank(said(result)), self.max_result)
        if result.get("isError") is True:
            return failed(text or f"{name} failed and said nothing more")
        return text

    @property
    def changed(self) -> bool:
        """Whether the server said its tools changed since tools() last listed them."""
        return self._changed > self._listed

    def request(self, method: str, params: dict | None = None, *,
                timeout: float | None = None, cancel=None) -> dict:
        """Send one request and wait for its result; McpError if it fails.

        In the 2026-07-28 protocol the params carry the version and the client's
        capabilities in _meta; in the handshake's they go as they are.
        """
        if timeout is not None:
            _check_seconds("timeout", timeout)
        return self._ask(method, self._params(method, params),
                         self.timeout if timeout is None else timeout,
                         self.cancel if cancel is None else cancel)

    def _params(self, method, params):
        """The params as the protocol spoken wants them: in 2026-07-28, with the _meta."""
        params = dict(params or {})
        if self.protocol in MODERN or method == "server/discover":
            params["_meta"] = {**params.get("_meta", {}), VERSION_KEY: MODERN[-1],
                               CAPABILITIES_KEY: {}, CLIENT_KEY: CLIENT}
        return params

    def stderr(self, most: int = 2000) -> str:
        """The last `most` characters the server wrote to its stderr (your secrets blanked)."""
        text, trimmed = self._process.tail()
        text = self._blank(text)  # first, and only then cut: a key cut in two is not blanked
        if trimmed:  # the oldest bytes were let go, maybe in the middle of a key
            text = text[max(map(len, self._secrets.values()), default=0):]
        return text[-most:]

    @property
    def pid(self) -> int:
        return self._process.proc.pid

    def close(self) -> None:
        """Stop the server and whatever it started: close its stdin, then SIGTERM its
        process group, then SIGKILL it, each after 2 s unless all of it is gone."""
        if self._closed:
            return
        self._closed = True
        self._end(f"the connection to the MCP server {self.name} was closed; "
                  "connect again to use it")
        self._process.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = self._gone or f"speaking MCP {self.protocol}"
        return f"<MCP server {self.name} (pid {self.pid}): {state}>"
    # -- opening: which generation does it speak? -----------------------------------

    def _open(self):
        """Probe with server/discover; on an error or silence, the initialize handshake."""
        try:
            # opening is not called off by the cancel event: it is setup, and it has timeouts
            found = self._ask("server/discover", self._params("server/discover", {}),
                              min(self.probe, self.timeout), None)
        except McpError as e:
            if e.why == "gone":
                raise self._at_start(e, "server/discover") from None
            supported = _supported(e)
            if e.code == UNSUPPORTED_VERSION and supported \
                    and not set(supported) & set(LEGACY):
                raise McpError(f"the MCP server {self.name} speaks only {supported}; this "
                               f"client speaks {MODERN[-1]} and {LEGACY[-1]}: upgrade one "
                               "of the two", code=e.code, data=e.data) from None
            return self._handshake()
        versions = found.get("supportedVersions")
        if not (isinstance(versions, list) and MODERN[-1] in versions):
            return self._handshake()  # it answers discover, yet speaks the handshake's MCP
        self._adopt(MODERN[-1], found, _meta_of(found).get(SERVER_KEY))

    def _handshake(self):
        params = {"protocolVersion": LEGACY[-1], "capabilities": {}, "clientInfo": CLIENT}
        try:
            found = self._ask("initialize", params, self.timeout, None)
        except McpError as e:
            if e.code == UNSUPPORTED_VERSION and MODERN[-1] in _supported(e):
                # a modern server slow to start: our probe timed out, then it answered
                # it, and it now refuses the handshake; ask it again, with time
                found = self._ask("server/discover", self._params("server/discover", {}),
                                  self.timeout, None)
                return self._adopt(MODERN[-1], found, _meta_of(found).get(SERVER_KEY))
            raise self._at_start(e, "initialize") from None
        version = found.get("protocolVersion")
        if version not in LEGACY:
            raise McpError(f"the MCP server {self.name} answered initialize with protocol "
                           f"version {quote(str(version))}, which this client does not "
                           f"speak ({', '.join(LEGACY + MODERN)})")
        self._adopt(version, found, found.get("serverInfo"))
        self._process.put(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def _adopt(self, version, found, info):
        self.protocol = version
        self.info = info if isinstance(info, dict) else {}
        said = found.get("instructions")
        self.instructions = said if isinstance(said, str) else ""

    def _at_start(self, e: McpError, method: str) -> McpError:
        """The error for a server that would not start speaking MCP: what, and what to do."""
        if e.why == "timeout":
            what = (f"did not answer {method} within {self.timeout:g} s (nor server/discover "
                    f"within {min(self.probe, self.timeout):g} s)")
        elif e.why == "gone" and self._garbled:
            return e  # it wrote what no MCP server writes: the words say so, and what to do
        elif e.why == "gone":
            gone = str(e).removesuffix(". Connect again to start it anew")
            return McpError(f"{gone}. It never answered {method}: check the command by running "
                            "it in a terminal (an MCP server over stdio waits, silent, for "
                            "input) and what it needs in its environment: only "
                            f"{', '.join(PASSED_ON[:6])} and a few more are passed on "
                            "unless you give env=.", "gone")
        else:
            what = f"refused {method}: {e}"
        tail = self.stderr(600).strip()
        heard = f"; its stderr ends: {quote(tail, 600)}" if tail else "; it wrote nothing to stderr"
        return McpError(f"the MCP server {self.name} {what}{heard}. Is it an MCP server "
                        "over stdio? (some need an argument, such as 'stdio', to speak it)",
                        e.why, e.code, e.data)

    # -- one request: sent, then waited for ----------------------------------------

    def _ask(self, method, params, timeout, cancel) -> dict:
        """Send a request, then wait for its result; McpError if it is not answered."""
        if cancel is not None and cancel.is_set():  # called off before it went out
            raise McpError(f"cancelled: {method} was not sent to {self.name}", "cancelled")
        with self._lock:
            if self._gone:
                raise McpError(self._gone, "gone")
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
            if (caller := current()) is not None:  # the span this call is made in (SEP-414):
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
            if waiting.done.wait(max(0.0, left if cancel is None else min(left, TICK))):
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
            raise McpError(self._gone, "gone")
        if "error" in got:
            error = got["error"] if isinstance(got["error"], dict) else {}
            said = error.get("message")
            code = error.get("code") if type(error.get("code")) is int else None
            words = self._blank(said if isinstance(said, str) else json.dumps(got["error"]))
            raise McpError(f"{self.name} refused {method}: {quote(words, 500)} "
                           f"(JSON-RPC error {code})", "error", code, error.get("data"))
        if not isinstance(got.get("result"), dict):
            raise McpError(f"{self.name} answered {method} with a result that is not a "
                           f"JSON object: {quote(json.dumps(got.get('result')))}")
        return got["result"]

    def _call_off(self, id_, reason):
        self._process.put(line({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                "params": {"requestId": id_, "reason": reason}}))

    # -- what the server says: each line of its stdout, and its end ------------------

    def _line(self, raw: bytes) -> bool:
        """One line of the server's stdout, read and handled; False once it can't be."""
        if len(raw) > MAX_LINE:
            self._garbled = True
            self._end(f"the MCP server {self.name} wrote a message over "
                      f"{MAX_LINE >> 20} MiB, more than this client reads")
            return False
        if not raw.strip():
            return True
        try:  # your secrets out of what it said, before anything is cut or kept
            self._received(self._blank(message(raw, self._blank)), len(raw))
        except Exception as e:  # a shape no MCP message has (or one 900 deep)
            self._garbled = True
            self._end(f"the MCP server {self.name} wrote something on its stdout that is "
                      f"not an MCP message ({e}). A server over stdio writes only "
                      "JSON-RPC there, its logs to stderr: check that the command starts "
                      "an MCP server over stdio, and that nothing it runs prints")
            return False
        return True

    def _received(self, msg, size):
        """Handle one message from the server: a request, a notification, or a reply."""
        self._seen += 1
        method, id_ = msg.get("method"), msg.get("id")
        if isinstance(method, str) and "id" in msg:  # the server asks us something
            answer = (reply(id_, {}) if method == "ping" else
                      reply(id_, code=METHOD_NOT_FOUND,
                            said=f"this client offers no {method}"))
            self._process.put(line(answer))
        elif isinstance(method, str):  # a notification
            if method == "notifications/tools/list_changed":
                self._changed = self._seen
            self.heard.append(msg if size <= 4096 else {"method": method})
        elif type(id_) in (int, str) and ("result" in msg or "error" in msg):
            self.heard.append({"id": id_})  # a reply: kept short, in its place in order
            with self._lock:
                waiting = self._pending.get(id_)
            if waiting is not None:  # else it answers a request called off: dropped
                if waiting.reply is None:  # the first answer counts
                    waiting.reply = msg
                if self._listed_reply(msg):
                    self._listed = self._seen
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
        self._end(self._death() + ". Connect again to start it anew")

    def _end(self, why):
        """The connection is over: every request waiting hears `why`."""
        with self._lock:
            if self._gone is None:
                self._gone = self._blank(why)
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

    def _blank(self, value):
        """`value` (text or JSON) with your secrets blanked out (tools.blanked)."""
        return blanked(value, self._secrets)


def _supported(e: McpError) -> list:
    versions = e.data.get("supported") if isinstance(e.data, dict) else None
    return versions if isinstance(versions, list) else []


def _meta_of(result: dict) -> dict:
    meta = result.get("_meta")
    return meta if isinstance(meta, dict) else {}


def _named(command) -> str:
    words = shlex.join(command)
    return repr(words if len(words) <= 80 else words[:77] + "...")


def _check_seconds(what, value):
    """A ValueError unless `value` is a number of seconds above 0 (and not infinite)."""
    if not (type(value) in (int, float) and 0 < value < math.inf):
        raise ValueError(f"{what} is a number of seconds above 0, not {value!r}")


Server = Connection  # its old name (microagent.mcp.Server), kept for one release
