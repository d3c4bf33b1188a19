"""Small MCP peers that go wrong on purpose, run as real subprocesses by tests/mcp/test_mcp.py.

    python tests/mcp/mcp_fakes.py dies       writes its last words to stderr and exits 3
    python tests/mcp/mcp_fakes.py silent     reads nothing and answers nothing
    python tests/mcp/mcp_fakes.py garbage    prints a banner on stdout, as no MCP server may
    python tests/mcp/mcp_fakes.py stubborn   answers the handshake, then ignores stdin's end and SIGTERM
    python tests/mcp/mcp_fakes.py odd        lists odd tools, asks the client a question mid-call, then writes
                                             a reply with a key given twice
    python tests/mcp/mcp_fakes.py orders     the order desk served by the official mcp SDK (MCPServer)
    python tests/mcp/mcp_fakes.py meta       a tool, served by the official SDK, that says the _meta it was
                                             called with and the span OpenTelemetry's own code read from it
    python tests/mcp/mcp_fakes.py parent     starts children that hold its stdout and stderr: `spawn` one and
                                             say its pid, or `crash` (exit 4) leaving one behind; exits when
                                             stdin ends, its children left running
    python tests/mcp/mcp_fakes.py names N    lists tools named as the JSON list N says; a call answers with its name
    python tests/mcp/mcp_fakes.py progress   a call tells progress every wrong way (another token, not numbers,
                                             a flood, a step back, a huge message), then answers, then tells more
    python tests/mcp/mcp_fakes.py leaky      says the value of $SECRET_KEY everywhere it can: its info, its
                                             tool's schema, a notification, a result that is not an object,
                                             its stderr, and a line that is not JSON

It also holds tools for `python -m microagent.mcp tests.mcp.mcp_fakes:noisy tests.mcp.mcp_fakes:slow ...`
(run from the project's folder, so that the server is this folder's microagent): one that prints on stdout while it is served, one that takes its time, one that
raises SystemExit, two that read stdin (a child process, and input()), and one that reports its progress.
"""

import json
import os
import signal
import subprocess
import sys
import time

from microagent import Tool
from microagent.demo import look_up_order as desk_lookup


def _noisy(text: str) -> str:
    print("a print in a tool, on stdout", text)  # must land on stderr, not on the MCP stream
    return f"said {text}"


def _slow(seconds: float) -> str:
    time.sleep(seconds)
    return f"slept {seconds}"


def _stdin_of_a_child() -> str:
    child = subprocess.run([sys.executable, "-c", "import sys; print(repr(sys.stdin.read()))"],
                           stdout=subprocess.PIPE, text=True, timeout=60)
    return f"the child read {child.stdout.strip()}"


def _copy_files(count: int) -> str:
    # subtle: imported here, as this file run as a script may find an older microagent first
    from microagent.progress import report
    for i in range(1, count + 1):
        report(i, count, f"copying file {i}")
    return f"copied {count} files"


noisy = Tool("noisy", "Print something on stdout, then answer.", _noisy)
quits = Tool("quits", "Raise SystemExit.", lambda: sys.exit(3))
child_reads = Tool("child_reads", "Run a child process that reads its stdin.", _stdin_of_a_child)
asks = Tool("asks", "Ask with input().", lambda: f"input() gave {input()!r}")
copy_files = Tool("copy_files", "Copy some files, telling how far it has got.", _copy_files,
                  schema={"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]})
slow = Tool("slow", "Sleep a while, then answer.", _slow,
            schema={"type": "object", "properties": {"seconds": {"type": "number"}}, "required": ["seconds"]})


def stubborn():
    """A handshake-era server with one tool that never answers; deaf to stdin's end and SIGTERM."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for raw in sys.stdin:
        msg = json.loads(raw)
        if msg.get("method") == "initialize":
            result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "stubborn", "version": "1"}}
        elif msg.get("method") == "tools/list":
            result = {"tools": [{"name": "wait", "inputSchema": {"type": "object"}}]}
        elif "id" in msg and msg.get("method") == "server/discover":
            print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}}),
                  flush=True)
            continue
        else:
            continue
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
    while True:  # stdin closed: a well-behaved server would exit here
        time.sleep(1)


def send(message) -> None:
    """Write one JSON-RPC message on stdout, a line of its own."""
    print(json.dumps(message), flush=True)


def handshake(msg, name, tools, version="2025-11-25") -> dict | None:
    """What a handshake-era server answers to server/discover (an error), initialize and tools/list;
    None to anything else."""
    method, id_ = msg.get("method"), msg.get("id")
    if method == "server/discover":
        return {"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "Method not found"}}
    if method == "initialize":
        return {"jsonrpc": "2.0", "id": id_, "result": {"protocolVersion": version, "capabilities": {},
                                                         "serverInfo": {"name": name, "version": "1"}}}
    if method == "tools/list":
        tools = [{"name": tool, "inputSchema": {"type": "object"}} for tool in tools]
        return {"jsonrpc": "2.0", "id": id_, "result": {"tools": tools}}
    return None


def parent():
    """A handshake-era server whose children outlive it, holding its stdout and stderr open."""
    def child():
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"],
                                stdin=subprocess.DEVNULL).pid  # its stdout and stderr: ours
    for raw in sys.stdin:
        msg = json.loads(raw)
        answer = handshake(msg, "parent", ["spawn", "crash"])
        if msg.get("method") == "tools/call" and msg["params"]["name"] == "spawn":
            answer = {"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text",
                                                                                 "text": str(child())}]}}
        elif msg.get("method") == "tools/call":
            sys.stderr.write(f"crashing, child {child()} left behind\n")
            sys.stderr.flush()
            os._exit(4)
        if answer is not None:
            send(answer)


def names(listed):
    """A handshake-era server with a tool of each name; a call says the name it was called by."""
    for raw in sys.stdin:
        msg = json.loads(raw)
        answer = handshake(msg, "names", listed)
        if msg.get("method") == "tools/call":
            text = f"called {msg['params']['name']}"
            answer = {"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text", "text": text}]}}
        if answer is not None:
            send(answer)


def leaky():
    """A handshake-era server that says the value of $SECRET_KEY in every place it can."""
    key = os.environ["SECRET_KEY"]
    sys.stderr.write(f"starting with {key}\n{'.' * 100} ready\n")
    sys.stderr.flush()
    for raw in sys.stdin:
        msg = json.loads(raw)
        method, id_ = msg.get("method"), msg.get("id")
        if method == "server/discover":
            send(handshake(msg, "leaky", []))
        elif method == "initialize":
            send({"jsonrpc": "2.0", "id": id_, "result": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "instructions": f"use {key}",
                "serverInfo": {"name": "leaky", "version": key, "title": "x" * 180 + key}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"data": f"listing for {key}"}})
            schema = {"type": "object", "properties": {"token": {"type": "string", "enum": [key],
                                                                 "description": f"say {key}"}}}
            send({"jsonrpc": "2.0", "id": id_, "result": {"tools": [
                {"name": "not_an_object", "description": "x" * 180 + key, "inputSchema": schema},
                {"name": "garbage", "inputSchema": {"type": "object"}}]}})
        elif method == "tools/call" and msg["params"]["name"] == "not_an_object":
            send({"jsonrpc": "2.0", "id": id_, "result": "x" * 170 + key})
        elif method == "tools/call":
            print("x" * 176 + key + " and more", flush=True)  # the key across the 200th character


ODD_TOOLS = [
    {"name": "admin.tools.list", "description": "A dotted name.",
     "inputSchema": {"type": "object", "properties": {"x": True, "y": {"type": 7}}, "required": ["x", 5]}},
    {"name": "2fa", "inputSchema": {}},
    {"name": "text-only", "inputSchema": {"type": "string"}},
    {"description": "no name", "inputSchema": {"type": "object"}},
]


def odd():
    """A handshake-era server (of protocol version 2025-06-18) whose tools and answers are odd,
    one way each."""
    for raw in sys.stdin:
        msg = json.loads(raw)
        method, id_ = msg.get("method"), msg.get("id")
        if method == "tools/list":
            send({"jsonrpc": "2.0", "id": id_, "result": {"tools": ODD_TOOLS}})
        elif method == "tools/call" and msg["params"]["name"] == "admin.tools.list":
            # the server numbers its own requests: this one has the very id of the call it serves
            send({"jsonrpc": "2.0", "id": id_, "method": "ping"})
            answer = sys.stdin.readline()
            send({"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": answer.strip()}]}})
        elif method == "tools/call":
            sys.stdout.write('{"jsonrpc": "2.0", "id": %d, "result": {"content": []}, "result": {}}\n' % id_)
            sys.stdout.flush()
        elif answer := handshake(msg, "odd", [], version="2025-06-18"):
            send(answer)


FLOOD = 20_000  # progress notifications the `progress` fake sends in one call


def progress():
    """A handshake-era server whose one tool tells its progress every wrong way, then answers."""
    def told(**params):
        send({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
    for raw in sys.stdin:
        msg = json.loads(raw)
        answer = handshake(msg, "progress", ["work"])
        if msg.get("method") == "tools/call":
            token = msg["params"]["_meta"]["progressToken"]
            told(progressToken=token + 1000, progress=1)  # another call's token
            told(progressToken=str(token), progress=1)  # our token, but as text
            told(progress=1)  # no token
            told(progressToken=token, progress="3")
            told(progressToken=token, progress=True)
            told(progressToken=token, progress=2, total="ten")
            told(progressToken=token, progress=2, total=FLOOD + 3, message=5)  # taken, with no words
            told(progressToken=token, progress=1, message="a step back")
            for i in range(3, FLOOD + 3):
                told(progressToken=token, progress=i, total=FLOOD + 3, message="flooding")
            told(progressToken=token, progress=FLOOD + 3, total=FLOOD + 3, message="x" * 100_000)
            told(progressToken=token, progress=FLOOD + 2, message="a step back")
            answer = {"jsonrpc": "2.0", "id": msg["id"], "result": {"content": [{"type": "text", "text": "done"}]}}
            send(answer)
            told(progressToken=token, progress=10**9, message="after the answer")
            answer = None
        if answer is not None:
            send(answer)
        sys.stdout.flush()


def orders():
    """The order desk, written with the official SDK, not with microagent.mcp."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("orders")

    @server.tool()
    def look_up_order(order_id: str) -> str:
        """Look up an order by its id: what it is, what it cost, and its state."""
        return desk_lookup(order_id=order_id)

    server.run("stdio")


def meta():
    """A server written with the official SDK whose one tool says what its call carried: the
    traceparent in _meta, its other keys, and the span the SDK's OpenTelemetry middleware made
    of it (with opentelemetry-api alone, the caller's span context itself, or none)."""
    from mcp.server.mcpserver import Context, MCPServer
    from opentelemetry import trace

    server = MCPServer("meta")

    @server.tool()
    def heard(ctx: Context) -> str:
        """Say the trace context this call came with."""
        carried = ctx.request_context.meta or {}
        seen = trace.get_current_span().get_span_context()
        return json.dumps({"traceparent": carried.get("traceparent"), "keys": sorted(carried),
                           "otel": [f"{seen.trace_id:032x}", f"{seen.span_id:016x}", seen.is_remote]
                           if seen.is_valid else None})

    server.run("stdio")


def dies():
    sys.stderr.write("loading config...\nboom: no API key in MY_SERVICE_KEY\n")
    sys.exit(3)


def silent():
    time.sleep(60)


def garbage():
    print("Welcome to my server! Listening on stdio.", flush=True)
    time.sleep(60)


MODES = {"dies": dies, "silent": silent, "garbage": garbage, "stubborn": stubborn, "odd": odd,
         "orders": orders, "meta": meta, "parent": parent, "leaky": leaky, "progress": progress,
         "names": lambda: names(json.loads(sys.argv[2]))}

if __name__ == "__main__":
    MODES[sys.argv[1]]()
