"""MCP's client side: the tools of a server in another process, as plain Tools.

    with connect(["npx", "-y", "@modelcontextprotocol/server-everything"]) as server:
        agent = Agent(policy, [*server.tools(), final_answer])
        ctx = agent.run("What is 2 + 3?", cancel=stop)

`connect` starts the server (process.py) and opens MCP with it in either
generation (wire.py): it probes with `server/discover` and, on an error or
silence, falls back to the `initialize` handshake. `server.tools()` are Tools
whose schema is the server's `inputSchema` (tools.py), so the loop checks each
call before it goes out; each call is a request sent and waited for, within its
timeout and until `cancel` is set (exchange.py). Its one rule: whatever the server
does, a call ends in its result's text or an error note that says what went wrong.
README.md says why each piece is there.

What it leaves out: transports other than stdio, resources and prompts, and the
requests a server may send back (sampling, elicitation, roots: it declares none
and answers each with an error; a `ping` it answers).
"""

import functools
import json
import math
import shlex

from microagent.message import Message
from microagent.mcp.exchange import Exchange, McpError
from microagent.mcp.process import PASSED_ON, Process
from microagent.mcp.tools import MAX_RESULT, cut, failed, said, tool_from
from microagent.mcp.wire import (CAPABILITIES_KEY, CLIENT_KEY, LEGACY, MODERN, SERVER_KEY,
                                 UNSUPPORTED_VERSION, VERSION_KEY, line, quote)
from microagent.tool import Tool

PROBE = 5.0     # seconds to wait for server/discover before trying the handshake
MAX_PAGES = 100  # pages of tools/list before a server is taken to loop for ever
CLIENT = {"name": "microagent", "version": "0.1.0"}


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
        self.skipped = []  # sentences: tools the server listed that could not be made
        self._closed = False
        try:
            self._process = Process(command, env=env, cwd=cwd)
        except OSError as e:
            raise McpError(f"could not start the MCP server {self.name}: "
                           f"{e.strerror or e} ({command[0]!r}: is it installed, and on "
                           "the PATH?)", "gone") from None
        self._exchange = Exchange(self._process, self.name, env)  # it starts the process
        self.heard = self._exchange.heard
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
            result = self.request("tools/list",
                                  {} if cursor is None else {"cursor": cursor})
            page = result.get("tools")
            if not isinstance(page, list):
                raise McpError(f"{self.name} answered tools/list without a list of "
                               f"tools: {quote(json.dumps(result))}")
            listed += page
            cursor = result.get("nextCursor")
            if not (isinstance(cursor, str) and cursor):
                break
        else:
            raise McpError(f"{self.name} sent more than {MAX_PAGES} pages of tools/list: "
                           "a server that pages for ever")
        each_call = functools.partial(self.call, timeout=timeout)  # (name, arguments)
        made, taken, self.skipped = [], set(), []
        for spec in listed:
            try:
                tool = tool_from(spec, each_call, prefix, taken)
            except ValueError as e:  # no name, no object schema, reads like final_answer
                self.skipped.append(str(e))
                continue
            made.append(tool)
            taken.add(tool.name)
        return made

    def call(self, name: str, arguments: dict, *,
             timeout: float | None = None) -> str | Message:
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
                          f"({quote(str(what))}), and this client answers no such "
                          "request")
        if kind != "complete":
            return failed(f"{self.name} answered {name} with a result of a kind this "
                          f"client does not read (resultType {quote(str(kind))})")
        text = cut(self._exchange.blank(said(result)), self.max_result)
        if result.get("isError") is True:
            return failed(text or f"{name} failed and said nothing more")
        return text

    @property
    def changed(self) -> bool:
        """Whether the server said its tools changed since tools() last listed them."""
        return self._exchange.changed_at > self._exchange.listed_at

    def request(self, method: str, params: dict | None = None, *,
                timeout: float | None = None, cancel=None) -> dict:
        """Send one request and wait for its result; McpError if it fails.

        In the 2026-07-28 protocol the params carry the version and the client's
        capabilities in _meta; in the handshake's they go as they are.
        """
        if timeout is not None:
            _check_seconds("timeout", timeout)
        return self._exchange.ask(method, self._params(method, params),
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
        """The last `most` characters of the server's stderr (your secrets blanked)."""
        return self._exchange.stderr(most)

    @property
    def pid(self) -> int:
        return self._process.proc.pid

    def close(self) -> None:
        """Stop the server and whatever it started: close its stdin, then SIGTERM its
        process group, then SIGKILL it, each after 2 s unless all of it is gone."""
        if self._closed:
            return
        self._closed = True
        self._exchange.end(f"the connection to the MCP server {self.name} was closed; "
                           "connect again to use it")
        self._process.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = self._exchange.gone or f"speaking MCP {self.protocol}"
        return f"<MCP server {self.name} (pid {self.pid}): {state}>"

    # -- opening: which generation does it speak? -----------------------------------

    def _open(self):
        """Probe with server/discover; on an error or silence, the handshake."""
        try:
            # opening is not called off by the cancel event: it is setup, with timeouts
            found = self._exchange.ask("server/discover",
                                       self._params("server/discover", {}),
                                       min(self.probe, self.timeout), None)
        except McpError as e:
            if e.why == "gone":
                raise self._at_start(e, "server/discover") from None
            supported = _supported(e)
            if e.code == UNSUPPORTED_VERSION and supported \
                    and not set(supported) & set(LEGACY):
                raise McpError(f"the MCP server {self.name} speaks only {supported}; "
                               f"this client speaks {MODERN[-1]} and {LEGACY[-1]}: "
                               "upgrade one of the two", code=e.code,
                               data=e.data) from None
            return self._handshake()
        versions = found.get("supportedVersions")
        if not (isinstance(versions, list) and MODERN[-1] in versions):
            return self._handshake()  # it answers discover, yet speaks the handshake's
        self._adopt(MODERN[-1], found, _meta_of(found).get(SERVER_KEY))

    def _handshake(self):
        params = {"protocolVersion": LEGACY[-1], "capabilities": {}, "clientInfo": CLIENT}
        try:
            found = self._exchange.ask("initialize", params, self.timeout, None)
        except McpError as e:
            if e.code == UNSUPPORTED_VERSION and MODERN[-1] in _supported(e):
                # a modern server slow to start: our probe timed out, then it answered
                # it, and it now refuses the handshake; ask it again, with time
                found = self._exchange.ask("server/discover",
                                           self._params("server/discover", {}),
                                           self.timeout, None)
                return self._adopt(MODERN[-1], found, _meta_of(found).get(SERVER_KEY))
            raise self._at_start(e, "initialize") from None
        version = found.get("protocolVersion")
        if version not in LEGACY:
            raise McpError(f"the MCP server {self.name} answered initialize with "
                           f"protocol version {quote(str(version))}, which this client "
                           f"does not speak ({', '.join(LEGACY + MODERN)})")
        self._adopt(version, found, found.get("serverInfo"))
        self._process.put(line({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def _adopt(self, version, found, info):
        self.protocol = version
        self.info = info if isinstance(info, dict) else {}
        said = found.get("instructions")
        self.instructions = said if isinstance(said, str) else ""

    def _at_start(self, e: McpError, method: str) -> McpError:
        """The error for a server that would not start speaking MCP: what, and the fix."""
        if e.why == "timeout":
            what = (f"did not answer {method} within {self.timeout:g} s (nor "
                    f"server/discover within {min(self.probe, self.timeout):g} s)")
        elif e.why == "gone" and self._exchange.garbled:
            return e  # it wrote what no MCP server writes: the words say so, and the fix
        elif e.why == "gone":
            gone = str(e).removesuffix(". Connect again to start it anew")
            return McpError(f"{gone}. It never answered {method}: check the command by "
                            "running it in a terminal (an MCP server over stdio waits, "
                            "silent, for input) and what it needs in its environment: "
                            f"only {', '.join(PASSED_ON[:6])} and a few more are passed "
                            "on unless you give env=.", "gone")
        else:
            what = f"refused {method}: {e}"
        tail = self.stderr(600).strip()
        heard = (f"; its stderr ends: {quote(tail, 600)}" if tail
                 else "; it wrote nothing to stderr")
        return McpError(f"the MCP server {self.name} {what}{heard}. Is it an MCP server "
                        "over stdio? (some need an argument, such as 'stdio', to speak "
                        "it)", e.why, e.code, e.data)


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
