"""MCP's server side: an office's tools, served to any MCP client over stdio.

    python -m microagent.mcp                      # the refund office's tools
    python -m microagent.mcp mypackage.office:tools

`serve(tools)` reads JSON-RPC requests on stdin, one a line, and writes the answers
on stdout. It speaks both generations of the protocol: a request whose params._meta
names the version 2026-07-28 is answered as it stands (server/discover, tools/list,
tools/call); `initialize` opens the handshake's MCP (2025-11-25 and earlier) for the
rest of the connection.

The one rule: an MCP call never runs a tool that needs a human's approval. Such a
tool is listed (so a client can see it is there) but a call to it is answered with
a tool error that says so: the office's own people sign off on it, in the office
(microagent.approval). A tool that ends a run (the final answer) is not served: it
means nothing to another program.

Calls run in worker threads (WORKERS at once), so the server goes on reading
while a tool works; a call cancelled by the client (notifications/cancelled) gets
no answer, though a Python function already running can't be stopped and runs
to its end. When stdin closes, a call under way has LINGER seconds to finish and
be answered; then serve returns, and the server exits without waiting for it.
While it serves, anything written to stdout by the tools (a print, a child
process) goes to stderr instead, so it can't break the stream, and stdin is
/dev/null, so nothing they run can read it. A tool that raises, even SystemExit,
is a tool error, and its worker goes on.

Each call runs inside `tracing(traceparent)` of the header its params._meta
carries (SEP-414), so a tool served traced (`traced(tool, record)`, or
`python -m microagent.mcp --spans FILE`) writes its span as a child of the
client's, and a tool that calls out finds the caller's header in `current()`.
A call whose _meta carries a progressToken runs listening (microagent.progress):
each report of its tool is sent to the client as `notifications/progress`.

What it leaves out: resources, prompts, sampling, elicitation (the protocol's way
of asking the client's user; the office's approval stays with its own people),
notifications of a changed list (the tools are fixed while it serves), and
transports other than stdio.
"""

import contextlib
import functools
import json
import os
import queue
import sys
import threading

from microagent.mcp.wire import (CAPABILITIES_KEY, INTERNAL_ERROR, INVALID_PARAMS,
                                 INVALID_REQUEST, LEGACY, MAX_LINE, METHOD_NOT_FOUND, MODERN,
                                 PARSE_ERROR, SERVER_KEY, UNSUPPORTED_VERSION, VERSION_KEY,
                                 line, message, reply)
from microagent.progress import listening
from microagent.spans import tracing
from microagent.tool import Tool, said_by

WORKERS = 4  # tool calls running at once; more wait their turn
LINGER = 1.0  # seconds a call under way may take to be answered once stdin has closed
INFO = {"name": "microagent", "version": "0.1.0"}
CAPABILITIES = {"tools": {"listChanged": False}}
NEEDS_A_HUMAN = ("{name} needs a human's approval in the office that serves it, and an "
                 "MCP call can't give one, so it did not run. Ask someone in that office "
                 "to run it, or use a tool that needs no sign-off.")


def serve(tools: list[Tool], reader=None, writer=None, *, name: str = "microagent",
          instructions: str = "") -> None:
    """Serve `tools` over MCP until the reader ends: stdin and stdout unless given
    (binary streams). With stdout, the MCP stream moves to a copy of file 1, and
    file 1 (and sys.stdout) is stderr from then on; with stdin, the stream moves
    to a copy of file 0, and file 0 is /dev/null, so a tool's child process or its
    input() reads nothing of it. Returns once the calls under way have been
    answered, or after LINGER seconds."""
    office = offered(tools)
    if writer is None:  # fd 1 is the MCP stream now; whatever else writes there goes to 2
        writer = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
        sys.stdout.flush()
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        sys.stdout = sys.stderr
    if reader is None:  # as the official SDK does: fd 0 is /dev/null, the stream a copy
        reader = os.fdopen(os.dup(sys.stdin.fileno()), "rb")
        nothing = os.open(os.devnull, os.O_RDONLY)
        os.dup2(nothing, sys.stdin.fileno())
        os.close(nothing)
    session = _Session(office, writer, {**INFO, "name": name}, instructions)
    for _ in range(WORKERS):  # daemons: a call still running can't keep the process
        threading.Thread(target=session.work, daemon=True, name="mcp call").start()
    for raw in _lines(reader):
        if raw is None:
            session.send(reply(None, code=PARSE_ERROR,
                               said=f"a line over {MAX_LINE >> 20} MiB: not read"))
            continue
        try:
            msg = message(raw)
        except ValueError as e:  # not JSON
            session.send(reply(None, code=PARSE_ERROR, said=str(e)))
            continue
        except TypeError as e:  # JSON, but no request: [1, 2], 5, null, a batch
            session.send(reply(None, code=INVALID_REQUEST, said=f"{e}; a batch (an array) "
                               "is not taken: send each request on a line of its own"))
            continue
        session.take(msg)
    with session.lock:  # the calls under way get a moment to be answered
        session.lock.wait_for(lambda: not session.running, timeout=LINGER)
    for _ in range(WORKERS):
        session.calls.put(None)


def offered(tools) -> dict[str, Tool]:
    """The tools an MCP client is offered, by name: all but those that end a run."""
    if not (isinstance(tools, (list, tuple)) and all(isinstance(t, Tool) for t in tools)):
        raise TypeError("serve takes a list of Tools (an agent's: list(agent.tools.values()))")
    served = [t for t in tools if not t.terminal]
    office = {t.name: t for t in served}
    if len(office) != len(served):
        raise ValueError(f"two tools share a name: {[t.name for t in tools]}")
    for tool in office.values():
        try:
            line(listing(tool))
        except (TypeError, ValueError):
            raise ValueError(f"the schema of {tool.name} is not JSON: {tool.schema!r}") from None
    return office


def listing(tool: Tool) -> dict:
    """A Tool as tools/list describes it to a client."""
    schema = dict(tool.schema)
    schema.setdefault("type", "object")  # MCP asks for an object at the root
    about = tool.description
    if tool.needs_approval:
        about += " (It needs a human's approval in the office: an MCP call does not run it.)"
    return {"name": tool.name, "description": about, "inputSchema": schema}


class _Session:
    """One client's connection: the tools, the stream out, and what the client opened."""

    def __init__(self, office, writer, info, instructions):
        self.office, self.writer, self.info = office, writer, info
        self.instructions = instructions
        self.legacy = None  # the version initialize agreed on, once it has
        self.lock = threading.Condition()  # one message at a time on the stream
        self.called_off = set()  # ids of calls the client cancelled while they ran
        self.running = set()  # ids of calls waiting for a worker, or running
        self.calls = queue.Queue()

    def send(self, msg):
        with self.lock:
            self.write(msg)

    def write(self, msg):
        """Write one message (the lock held); a client gone leaves nobody to tell."""
        try:
            self.writer.write(line(msg))
            self.writer.flush()
        except (OSError, ValueError):  # a closed pipe: its stdin ends too, and so do we
            pass

    def take(self, msg):
        """Act on one message: answer a request (a call through a worker), heed a notification."""
        method, id_ = msg.get("method"), msg.get("id")
        if not isinstance(method, str):
            if "result" in msg or "error" in msg:
                return  # an answer to a question this server never asks
            return self.send(reply(_id(id_), code=INVALID_REQUEST,
                                   said="a request needs a method"))
        if msg.get("jsonrpc") != "2.0":
            return self.send(reply(_id(id_), code=INVALID_REQUEST, said=(
                'this server speaks JSON-RPC 2.0: each request says "jsonrpc": "2.0"')))
        if "id" not in msg:
            if method == "notifications/cancelled" and isinstance(msg.get("params"), dict):
                with self.lock:
                    called_off = msg["params"].get("requestId")
                    if _id(called_off) is not None and called_off in self.running:
                        self.called_off.add(called_off)
            return  # notifications/initialized and the rest need nothing
        if _id(id_) is None:
            return self.send(reply(None, code=INVALID_REQUEST,
                                   said="a request's id is a string or a whole number"))
        params = msg.get("params", {})
        if not isinstance(params, dict):
            return self.send(reply(id_, code=INVALID_PARAMS, said="params is an object"))
        try:
            modern = self.era(method, params)
        except _Refusal as no:
            return self.send(reply(id_, code=no.code, said=str(no), data=no.data))
        if method == "tools/call":
            with self.lock:
                self.running.add(id_)
            self.calls.put((id_, params, modern))
            return
        try:
            result = self.answer(method, params, modern)
        except _Refusal as no:
            return self.send(reply(id_, code=no.code, said=str(no), data=no.data))
        except Exception as e:  # a bug here must not take the server down
            return self.send(reply(id_, code=INTERNAL_ERROR,
                                   said=f"{type(e).__name__}: {said_by(e)}"))
        self.send(reply(id_, result))

    def era(self, method, params) -> bool:
        """Whether a request is of the 2026-07-28 protocol (True) or the handshake's;
        a _Refusal if it is of neither."""
        meta = params.get("_meta")
        version = meta.get(VERSION_KEY) if isinstance(meta, dict) else None
        if version is not None:
            if version not in MODERN:
                raise _Refusal(UNSUPPORTED_VERSION, f"protocol version {version!r} is not "
                               f"spoken here; this server speaks {', '.join(MODERN)}, and "
                               f"{', '.join(LEGACY)} after initialize",
                               {"supported": list(MODERN), "requested": version})
            if not isinstance(meta.get(CAPABILITIES_KEY), dict):
                raise _Refusal(INVALID_PARAMS, f"params._meta needs {CAPABILITIES_KEY}")
            return True
        if method in ("initialize", "ping") or (self.legacy and method != "server/discover"):
            return False
        raise _Refusal(INVALID_PARAMS, f"params._meta must carry {VERSION_KEY} and "
                       f"{CAPABILITIES_KEY} (protocol {MODERN[-1]}), or the connection "
                       f"must begin with initialize ({LEGACY[-1]} and earlier)")

    def answer(self, method, params, modern) -> dict:
        """The result of a request that is not a tool call."""
        if method == "initialize" and not modern:
            asked = params.get("protocolVersion")
            self.legacy = asked if asked in LEGACY else LEGACY[-1]
            found = {"protocolVersion": self.legacy, "capabilities": CAPABILITIES,
                     "serverInfo": self.info}
            return {**found, "instructions": self.instructions} if self.instructions else found
        if method == "ping":
            return self.stamped({}, modern)
        if method == "server/discover":
            found = {"supportedVersions": list(MODERN), "capabilities": CAPABILITIES,
                     "ttlMs": 0, "cacheScope": "public"}
            if self.instructions:
                found["instructions"] = self.instructions
            return self.stamped(found, modern)
        if method == "tools/list":
            found = {"tools": [listing(t) for t in self.office.values()]}
            if modern:
                found.update(ttlMs=0, cacheScope="public")
            return self.stamped(found, modern)
        raise _Refusal(METHOD_NOT_FOUND, f"this server offers no {method!r}: it serves "
                       "tools (tools/list, tools/call)")

    def stamped(self, result, modern):
        """A result as the 2026-07-28 protocol writes it: its kind, and who answers."""
        if modern:
            result.update(resultType="complete", _meta={SERVER_KEY: self.info})
        return result

    def work(self):
        """A worker: take calls off the queue until told to stop (None)."""
        while (call := self.calls.get()) is not None:
            self.call(*call)

    def call(self, id_, params, modern):
        """Run one tools/call and send its answer (unless the client called it off)."""
        if id_ in self.called_off:  # called off before its turn came
            return self.settle(id_, None)
        try:
            answer = reply(id_, self.stamped(self.run(params, id_), modern))
        except _Refusal as no:
            answer = reply(id_, code=no.code, said=str(no), data=no.data)
        except Exception as e:  # a bug here must not leave the client waiting for ever
            answer = reply(id_, code=INTERNAL_ERROR, said=f"{type(e).__name__}: {said_by(e)}")
        self.settle(id_, answer)

    def settle(self, id_, answer):
        """Send a call's answer, unless the client no longer wants it; it runs no more."""
        with self.lock:
            if id_ not in self.called_off and answer is not None:
                self.write(answer)
            self.called_off.discard(id_)
            self.running.discard(id_)
            self.lock.notify_all()

    def progressed(self, id_, token, done, total, message):
        """Tell the client how far a call has got, unless it called the call off."""
        told = {"progressToken": token, "progress": done}
        if total is not None:
            told["total"] = total
        if message:
            told["message"] = message
        with self.lock:
            if id_ not in self.called_off:
                self.write({"jsonrpc": "2.0", "method": "notifications/progress",
                            "params": told})

    def run(self, params, id_) -> dict:
        name, arguments = params.get("name"), params.get("arguments", {})
        if not isinstance(name, str):
            raise _Refusal(INVALID_PARAMS, "tools/call needs the tool's name")
        tool = self.office.get(name)
        if tool is None:
            raise _Refusal(INVALID_PARAMS, f"Unknown tool: {name!r}; the tools are: "
                           f"{', '.join(self.office) or 'none'}")
        if not isinstance(arguments, dict):
            raise _Refusal(INVALID_PARAMS, "a tool's arguments are a JSON object")
        if tool.needs_approval:
            return _result(NEEDS_A_HUMAN.format(name=name), True)
        meta = params.get("_meta")  # a client's span rides in it (SEP-414), or nothing does
        meta = meta if isinstance(meta, dict) else {}
        caller, token = meta.get("traceparent"), _id(meta.get("progressToken"))
        told = (contextlib.nullcontext() if token is None else  # the tool's reports, sent
                listening(functools.partial(self.progressed, id_, token)))
        try:
            # in the thread that runs the tool (a context stays in its thread): a traced
            # tool's span is the caller's child; a header not well formed is ignored
            with tracing(caller if isinstance(caller, str) else None), told:
                note = tool.run(json.dumps(arguments))
        except BaseException as e:  # SystemExit too: Tool.run lets it out, and a worker
            failed = f"{name} failed: {type(e).__name__}"  # it ended would serve no more
            words = said_by(e)
            return _result(f"{failed}: {words}" if words else failed, True)
        return _result(note.content.removeprefix("error: ") if note.error else note.content,
                       note.error)


class _Refusal(Exception):
    """A request answered with a JSON-RPC error: its code, words and data."""

    def __init__(self, code, words, data=None):
        super().__init__(words)
        self.code, self.data = code, data


def _result(text: str, failed: bool) -> dict:
    return {"content": [{"type": "text", "text": text}], "isError": failed}


def _id(id_):
    """The id, if JSON-RPC allows it (a string or a whole number), else None."""
    return id_ if type(id_) in (int, str) else None


def _lines(reader):
    """The lines of a binary stream, each at most MAX_LINE bytes (None for a longer one)."""
    while raw := reader.readline(MAX_LINE + 1):
        if len(raw) > MAX_LINE and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # skip the rest of it
                raw = reader.readline(MAX_LINE + 1)
            yield None
        elif raw.strip():
            yield raw
