"""MCP's client side: the tools of a server in another process, as plain Tools.

    with connect(["npx", "-y", "@modelcontextprotocol/server-everything"]) as server:
        agent = Agent(policy, [*server.tools(), final_answer])
        ctx = agent.run("What is 2 + 3?", cancel=stop)

`connect` starts the server as a subprocess and speaks newline-delimited JSON-RPC
over its stdin and stdout. `server.tools()` lists its tools, each a `Tool` whose
schema is the server's `inputSchema`, so the loop checks a call's arguments
before it goes out, an LLM brain is shown them, and approval, retries and the
story work as for any coworker. Each piece is there for a reason (README.md):

- Both generations of the protocol: it probes with `server/discover` and, on an
  error or silence, falls back to the `initialize` handshake.
- Every request has a timeout (`timeout=`, 60 s unless you say), and a request
  that times out, or whose `cancel` event is set, is called off with
  `notifications/cancelled`; a late answer to it is dropped.
- The server's stderr is read all the time (a pipe nobody reads fills at 64 KiB,
  and the server then blocks for ever), and its tail is quoted when it dies.
- A result is text: its text blocks, the other blocks described, cut at
  `max_result` characters with a note saying so; `isError` makes an error note.
- Only a few harmless variables of your environment reach the server (PATH,
  HOME, ...); pass the rest with `env=`, and their values are blanked out of
  everything the server says back, as it is read, before anything is cut.
- A tool's name becomes one the chat APIs take (letters, digits, _ and -, at most
  64), none reading like another (`Get-Sum` beside `get_sum`) or like final_answer.
- A call made inside a span (a traced tool's: `traced(tool, record)`) carries
  its `traceparent` in `params._meta` (SEP-414), so the server's spans join
  the caller's trace.
- A server that dies, hangs at the start or writes something that is not MCP
  gives an error that names it and says what to do; `close()` closes its stdin,
  then terminates it, then kills it, with whatever it started (its process group).

What it leaves out: transports other than stdio, resources and prompts, and the
requests a server may send back (sampling, elicitation, roots: it declares none
and answers each with an error; a `ping` it answers).
"""

import collections
import itertools
import json
import math
import os
import queue
import re
import shlex
import signal
import subprocess
import threading
import time
import unicodedata

from microagent.message import TOOL, Message
from microagent.mcp.wire import (CAPABILITIES_KEY, CLIENT_KEY, LEGACY, MAX_LINE, MODERN,
                                 METHOD_NOT_FOUND, SERVER_KEY, UNSUPPORTED_VERSION, VERSION_KEY,
                                 line, message, quote, reply)
from microagent.spans import current
from microagent.tool import Tool, final_answer

MAX_RESULT = 40_000  # characters of a result the brain reads (about 10,000 tokens)
PROBE = 5.0     # seconds to wait for server/discover before trying the handshake
GRACE = 2.0     # seconds a server has to go after each of: stdin closed, SIGTERM
TICK = 0.05     # seconds between looks at a cancel event while a request waits
TAIL = 16 << 10  # bytes of the server's stderr kept, to quote when it dies
HEARD = 1000    # notifications kept in `heard`, the newest
MAX_PAGES = 100  # pages of tools/list before a server is taken to loop for ever
NAME_LIMIT = 64  # characters of a tool's name the chat APIs take
CLIENT = {"name": "microagent", "version": "0.1.0"}
# what of your environment a server sees unless you pass env=: nothing secret
PASSED_ON = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL",
             "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT")


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
            cwd: str | None = None, max_result: int = MAX_RESULT) -> "Server":
    """Start the MCP server `command` (a program and its arguments) and open MCP.

    `timeout`: seconds for each request. `cancel`: a threading.Event (give it the
    one you give agent.steps) that calls off a request under way once set. `env`:
    variables the server needs, over the few passed on. `max_result`: characters
    of a tool's result kept. Raises McpError if the server won't speak MCP.
    """
    return Server(command, name=name, timeout=timeout, probe=probe, cancel=cancel,
                  env=env, cwd=cwd, max_result=max_result)


class _Waiting:
    """A request sent: `done` is set once its reply (or the end) has come."""

    def __init__(self):
        self.done, self.reply = threading.Event(), None


class Server:
    """An MCP server running as a subprocess of this one, and the MCP spoken with it.

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
        _seconds("timeout", timeout)
        _seconds("probe", probe)
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
        self._tail, self._tail_lock = bytearray(), threading.Lock()
        self._outbox = queue.Queue()
        self._closed = self._garbled = self._trimmed = False
        try:
            self._proc = subprocess.Popen(
                list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, env=_environment(env), cwd=cwd,
                start_new_session=os.name == "posix")  # its children are stopped with it
        except OSError as e:
            raise McpError(f"could not start the MCP server {self.name}: {e.strerror or e} "
                           f"({command[0]!r}: is it installed, and on the PATH?)",
                           "gone") from None
        self._threads = [threading.Thread(target=work, daemon=True, name=f"mcp {what}")
                         for work, what in ((self._read, "reader"), (self._drain, "stderr"),
                                            (self._write, "writer"))]
        for thread in self._threads:
            thread.start()
        threading.Thread(target=self._watch, daemon=True, name="mcp watcher").start()
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
            _seconds("timeout", timeout)
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
        made, taken, self.skipped = [], set(), []
        for spec in listed:
            tool = self._tool(spec, prefix, timeout, taken)
            if tool is not None:
                made.append(tool)
                taken.add(tool.name)
        return made

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
            _seconds("timeout", timeout)
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
        with self._tail_lock:
            text, trimmed = bytes(self._tail).decode("utf-8", "replace"), self._trimmed
        text = self._blank(text)  # first, and only then cut: a key cut in two is not blanked
        if trimmed:  # the oldest bytes were let go, maybe in the middle of a key
            text = text[max(map(len, self._secrets.values()), default=0):]
        return text[-most:]

    @property
    def pid(self) -> int:
        return self._proc.pid

    def close(self) -> None:
        """Stop the server and whatever it started: close its stdin, then SIGTERM its
        process group, then SIGKILL it, each after GRACE s unless all of it is gone."""
        if self._closed:
            return
        self._closed = True
        self._end(f"the connection to the MCP server {self.name} was closed; "
                  "connect again to use it")
        self._outbox.put(None)  # the writer closes stdin once what it holds is sent
        self._stop()
        # with the group gone its pipes are at their end, and the threads with them; a
        # process that left the group (setsid) may still hold them: GRACE s in all, then on
        deadline = time.monotonic() + GRACE
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        reader, drain, _ = self._threads
        for thread, pipe in ((reader, self._proc.stdout), (drain, self._proc.stderr)):
            if not thread.is_alive():  # (closing a pipe a thread still reads would block)
                pipe.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = self._gone or f"speaking MCP {self.protocol}"
        return f"<MCP server {self.name} (pid {self._proc.pid}): {state}>"

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
        self._outbox.put(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))

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

    # -- one request, one reply --------------------------------------------------

    def _ask(self, method, params, timeout, cancel):
        if cancel is not None and cancel.is_set():  # called off before it went out
            raise McpError(f"cancelled: {method} was not sent to {self.name}", "cancelled")
        waiting = _Waiting()
        with self._lock:
            if self._gone:
                raise McpError(self._gone, "gone")
            id_ = next(self._ids)
            self._pending[id_] = waiting
        if method == "tools/call":  # progress, if it tells any, comes under the call's id
            meta = {**params.get("_meta", {}), "progressToken": id_}
            if (caller := current()) is not None:  # the span this call is made in (SEP-414):
                meta["traceparent"] = caller      # a traced tool's, the server's parent
            params = {**params, "_meta": meta}
        try:
            self._outbox.put(line({"jsonrpc": "2.0", "id": id_, "method": method,
                                   "params": params}))  # here: a TypeError is the caller's
            deadline = time.monotonic() + timeout
            while True:
                left = deadline - time.monotonic()
                if waiting.done.wait(max(0.0, left if cancel is None else min(left, TICK))):
                    break
                if cancel is not None and cancel.is_set():
                    self._call_off(id_, "cancelled by the caller")
                    raise McpError(f"cancelled: {method} was called off before "
                                   f"{self.name} answered (notifications/cancelled sent)",
                                   "cancelled")
                if time.monotonic() >= deadline:
                    if method != "initialize":  # the handshake must not be cancelled
                        self._call_off(id_, f"no answer within {timeout:g} s")
                    raise McpError(f"{self.name} did not answer {method} within "
                                   f"{timeout:g} s; it was called off "
                                   "(notifications/cancelled sent). Try again, or give "
                                   "a longer timeout=", "timeout")
        finally:
            with self._lock:
                self._pending.pop(id_, None)
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
        self._outbox.put(line({"jsonrpc": "2.0", "method": "notifications/cancelled",
                               "params": {"requestId": id_, "reason": reason}}))

    # -- the tools --------------------------------------------------------------

    def _tool(self, spec, prefix, timeout, taken):
        """One tool the server listed, as a Tool (None, and a sentence in skipped, if it
        can't be one)."""
        name = spec.get("name") if isinstance(spec, dict) else None
        schema = spec.get("inputSchema") if isinstance(spec, dict) else None
        if not (isinstance(name, str) and name):
            self.skipped.append(f"a tool with no name: {quote(json.dumps(spec))}")
            return None
        if not (isinstance(schema, dict) and schema.get("type", "object") == "object"):
            self.skipped.append(f"{name!r}: its inputSchema is not a JSON Schema of an "
                                f"object: {quote(json.dumps(schema))}")
            return None
        if reads_as(local_name(prefix + name)) == reads_as(final_answer.name):
            self.skipped.append(f"{name!r}: its name reads like {final_answer.name}, the tool "
                                "that ends a run; give tools(prefix=...) to keep it apart")
            return None
        about = spec.get("description")
        about = about if isinstance(about, str) and about else spec.get("title") or name
        fit = checkable(schema)
        fit.setdefault("type", "object")

        def call(**arguments) -> str | Message:
            return self.call(name, arguments, timeout=timeout)
        return Tool(local_name(prefix + name, taken), str(about), call, schema=fit)

    def call(self, name: str, arguments: dict, *, timeout: float | None = None) -> str | Message:
        """Call the tool `name` (the server's own name for it), as its Tool does: the
        result's text, or an error note that says what went wrong."""
        try:
            result = self.request("tools/call", {"name": name, "arguments": arguments},
                                  timeout=timeout)
        except McpError as e:
            return _failed(str(e))
        kind = result.get("resultType", "complete")
        if kind == "input_required":
            asked = result.get("inputRequests")
            what = sorted(asked) if isinstance(asked, dict) else "more input"
            return _failed(f"{self.name} asks for input before {name} can finish "
                           f"({quote(str(what))}), and this client answers no such request")
        if kind != "complete":
            return _failed(f"{self.name} answered {name} with a result of a kind this "
                           f"client does not read (resultType {quote(str(kind))})")
        text = cut(self._blank(said(result)), self.max_result)
        if result.get("isError") is True:
            return _failed(text or f"{name} failed and said nothing more")
        return text

    # -- the threads: read replies, drain stderr, write requests ------------------

    def _read(self):
        out = self._proc.stdout
        try:
            while raw := out.readline(MAX_LINE + 1):
                if len(raw) > MAX_LINE:
                    self._garbled = True
                    return self._end(f"the MCP server {self.name} wrote a message over "
                                     f"{MAX_LINE >> 20} MiB, more than this client reads")
                if not raw.strip():
                    continue
                try:  # your secrets out of what it said, before anything is cut or kept
                    self._heard(self._blanked(message(raw, self._blank)), len(raw))
                except Exception as e:  # a shape no MCP message has (or one 900 deep)
                    self._garbled = True
                    return self._end(
                        f"the MCP server {self.name} wrote something on its stdout that is "
                        f"not an MCP message ({e}). A server over stdio writes only "
                        "JSON-RPC there, its logs to stderr: check that the command starts "
                        "an MCP server over stdio, and that nothing it runs prints")
        except (OSError, ValueError):  # the pipe closed under us, by close()
            pass
        self._end(self._death() + ". Connect again to start it anew")

    def _heard(self, msg, size):
        self._seen += 1
        method, id_ = msg.get("method"), msg.get("id")
        if isinstance(method, str) and "id" in msg:  # the server asks us something
            answer = (reply(id_, {}) if method == "ping" else
                      reply(id_, code=METHOD_NOT_FOUND,
                            said=f"this client offers no {method}"))
            self._outbox.put(line(answer))
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

    def _drain(self):
        try:
            while chunk := self._proc.stderr.read1(64 << 10):
                with self._tail_lock:
                    self._tail += chunk
                    self._trimmed |= len(self._tail) > TAIL
                    del self._tail[:-TAIL]
        except (OSError, ValueError):
            pass

    def _write(self):
        pipe = self._proc.stdin
        try:
            while (data := self._outbox.get()) is not None:
                pipe.write(data)
                pipe.flush()
        except (OSError, ValueError):  # the server is gone: the reader says why
            pass
        finally:
            try:
                pipe.close()
            except OSError:
                pass

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
        try:
            code = self._proc.wait(GRACE)
        except subprocess.TimeoutExpired:
            code = None
        _, drain, _ = self._threads
        drain.join(0.5)  # let stderr's last words in
        if code is None:
            how = "closed its stdout"
        elif code < 0:
            how = f"was killed by {_signal_name(-code)}"
        else:
            how = f"exited with code {code}"
        tail = self.stderr(600).strip()
        last = "; ".join(tail.splitlines()[-6:])
        words = f"; its stderr ends: {quote(last, 600)}" if last else ""
        return f"the MCP server {self.name} {how}{words}"

    def _watch(self):
        """The server exited: the connection is over, even if what it started still holds
        its stdout open (the reader would wait for the end of a pipe that never ends)."""
        self._proc.wait()
        reader = self._threads[0]
        reader.join(GRACE)  # the replies it wrote before it went are read first
        if reader.is_alive():
            self._end(self._death() + ". Connect again to start it anew")
            self._stop()

    def _stop(self):
        """Wait for the server and its process group to go, then SIGTERM them, then
        SIGKILL them, GRACE s each time."""
        for stop in (None, signal.SIGTERM, signal.SIGKILL):
            if stop is not None:
                self._signal(stop)
            deadline = time.monotonic() + GRACE
            while self._running():
                if time.monotonic() >= deadline:
                    break
                time.sleep(TICK)
            else:
                return

    def _running(self) -> bool:
        """Whether the server, or anything it started that is still in its group, runs."""
        if self._proc.poll() is None:
            return True
        return os.name == "posix" and _group_runs(self._proc.pid)

    def _signal(self, sig):
        try:
            if os.name == "posix":  # it and whatever it started, even once it has gone
                os.killpg(self._proc.pid, sig)
            elif self._proc.poll() is not None:
                return
            elif sig == signal.SIGKILL:
                self._proc.kill()
            else:
                self._proc.terminate()
        except (ProcessLookupError, PermissionError):
            pass

    def _blank(self, text: str) -> str:
        for key, value in self._secrets.items():
            text = text.replace(value, f"[{key}]")
        return text

    def _blanked(self, value):
        """A message (JSON) with your secrets blanked out of every string in it, keys too."""
        if not self._secrets:
            return value
        if isinstance(value, str):
            return self._blank(value)
        if isinstance(value, list):
            return [self._blanked(v) for v in value]
        if isinstance(value, dict):
            return {self._blank(k): self._blanked(v) for k, v in value.items()}
        return value


def said(result: dict) -> str:
    """What a tools/call result says, as text: its text blocks, the others described.

    >>> said({"content": [{"type": "text", "text": "5"},
    ...                   {"type": "image", "data": "AAAA", "mimeType": "image/png"}]})
    '5\\n[an image, image/png, 3 bytes, not shown]'
    """
    blocks = result.get("content")
    parts = [_block(b) for b in blocks] if isinstance(blocks, list) else []
    if not parts and "structuredContent" in result:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    return "\n".join(parts)


def _block(block) -> str:
    if not isinstance(block, dict):
        return f"[a content block that is not an object: {quote(json.dumps(block))}]"
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return block["text"]
    if kind in ("image", "audio"):
        data = block.get("data")
        size = f", {len(data) * 3 // 4:,} bytes" if isinstance(data, str) else ""
        what = "an image" if kind == "image" else "audio"
        return f"[{what}, {_short(block.get('mimeType'))}{size}, not shown]"
    if kind == "resource_link":
        return f"[a link to a resource: {_short(block.get('name'))}, {_short(block.get('uri'))}]"
    if kind == "resource" and isinstance(block.get("resource"), dict):
        found = block["resource"]
        if isinstance(found.get("text"), str):
            return f"[a resource, {_short(found.get('uri'))}:]\n{found['text']}"
        return (f"[a resource, {_short(found.get('uri'))}, {_short(found.get('mimeType'))}, "
                "not shown]")
    return f"[a content block of type {_short(kind)}, not shown]"


def _short(value) -> str:
    return value[:200] if isinstance(value, str) else "(none given)"


def cut(text: str, most: int) -> str:
    """`text`, or its first `most` characters and a note saying it was cut.

    >>> print(cut("a" * 12, 5))
    aaaaa
    [cut: the result was 12 characters; only the first 5 are above]
    """
    if len(text) <= most:
        return text
    return (f"{text[:most]}\n[cut: the result was {len(text):,} characters; only the first "
            f"{most:,} are above]")


def local_name(name: str, taken=()) -> str:
    """A name chat APIs take (^[a-zA-Z0-9_-]{1,64}$) for an MCP tool's name: accents
    dropped, each other odd character an _, cut at 64, and a number after it if it
    reads like a name `taken` (as `reads_as` compares them).

    >>> local_name("get-sum"), local_name("admin.tools.list"), local_name("2fa")
    ('get-sum', 'admin_tools_list', '_2fa')
    >>> local_name("météo"), local_name("mé téo"), local_name("fіnal_answer")  # a Cyrillic і
    ('meteo', 'me_teo', 'f_nal_answer')
    >>> local_name("a.b", taken={"a_b"}), local_name("Get_Sum", taken={"get-sum"})
    ('a_b_2', 'Get_Sum_2')
    """
    plain = "".join(c for c in unicodedata.normalize("NFKD", name)
                    if not unicodedata.combining(c))  # é: e and an accent; the accent goes
    plain = re.sub(r"[^A-Za-z0-9_-]", "_", plain)
    if not plain.replace("-", "").isidentifier():  # a digit first, or only hyphens
        plain = "_" + plain
    plain = plain[:NAME_LIMIT]
    seen = {reads_as(t) for t in taken}
    found, n = plain, 1
    while reads_as(found) in seen:
        n += 1
        found = f"{plain[:NAME_LIMIT - len(str(n)) - 1]}_{n}"
    return found


def reads_as(name: str) -> str:
    """What a name reads as, to a model: case and - against _ aside.

    >>> reads_as("Get-Sum") == reads_as("get_sum")
    True
    """
    return name.lower().replace("-", "_")


MAX_DEPTH = 32  # levels of a schema the checks go into; below, any value passes


def checkable(schema, depth: int = 0):
    """A server's JSON Schema with every part the loop's checks read in a shape they
    can read: a copy, equal to the schema wherever it was well formed (`required` is
    kept only beside `properties`, the only place the checks read it).

    Tool checks type, enum, properties, required and items. A boolean schema, a
    `type` that names no type, `properties` that is not an object: any of these
    would make the check itself fail, so each is dropped (and passes anything),
    like everything below MAX_DEPTH levels. The rest ($ref, anyOf, descriptions)
    is kept as it came, for the brain to read.

    >>> checkable({"type": "object", "properties": {"x": True, "y": {"type": 5}}})
    {'type': 'object', 'properties': {'x': {}, 'y': {}}}
    """
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return {}
    kept = {k: v for k, v in schema.items()
            if k not in ("type", "enum", "properties", "required", "items")}
    kinds = schema.get("type")
    if isinstance(kinds, str) or (isinstance(kinds, list) and kinds
                                  and all(isinstance(k, str) for k in kinds)):
        kept["type"] = kinds
    if isinstance(schema.get("enum"), list):
        kept["enum"] = schema["enum"]
    props = schema.get("properties")
    if isinstance(props, dict):
        kept["properties"] = {k: checkable(v, depth + 1) for k, v in props.items()}
        required = schema.get("required")
        if isinstance(required, list):
            kept["required"] = [n for n in required if isinstance(n, str)]
    if isinstance(schema.get("items"), dict):
        kept["items"] = checkable(schema["items"], depth + 1)
    return kept


def _failed(problem: str) -> Message:
    return Message(TOOL, "error: " + problem.removeprefix("error: "), error=True)


def _supported(e: McpError) -> list:
    versions = e.data.get("supported") if isinstance(e.data, dict) else None
    return versions if isinstance(versions, list) else []


def _meta_of(result: dict) -> dict:
    meta = result.get("_meta")
    return meta if isinstance(meta, dict) else {}


def _named(command) -> str:
    words = shlex.join(command)
    return repr(words if len(words) <= 80 else words[:77] + "...")


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _seconds(what, value):
    if not (type(value) in (int, float) and 0 < value < math.inf):
        raise ValueError(f"{what} is a number of seconds above 0, not {value!r}")


def _group_runs(group: int) -> bool:
    """Whether a process of the process group `group` is alive (a zombie, dead but not
    yet reaped, is not: an init that never reaps orphans is common in containers)."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):  # not Linux: its init reaps, so killpg told the truth
        return True
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
                state, _, in_group = f.read().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):  # gone while we looked
            continue
        if in_group == str(group) and state != "Z":
            return True
    return False


def _environment(extra):
    """The environment a server starts with: a few harmless variables, and `extra`."""
    passed = {k: v for k in PASSED_ON if (v := os.environ.get(k)) is not None
              and not v.startswith("()")}  # "()": a shell function, not a value
    return {**passed, **(extra or {})}
