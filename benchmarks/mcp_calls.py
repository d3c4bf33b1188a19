"""What does a coworker in another process cost? The same tool called in-process and over MCP.

    python benchmarks/mcp_calls.py            # 300 calls of each kind
    python benchmarks/mcp_calls.py --calls 2000

The tool is the refund office's look_up_order. In-process it is `tool.run(args)`.
Over MCP it is the same Tool served by `python -m microagent.mcp` and called
through `microagent.mcp.connect`: the arguments checked here, a line of JSON out
over a pipe, read, checked and run by the server, a line back, read and matched
by the client's reader thread. Also the same client against `mcp-server-time`
(PyPI, if installed), whose convert_time does a little work of its own, and the
time each server takes to start and open MCP. And the call traced at both ends:
the client's Tool traced into a file, its traceparent sent in params._meta, the
server started with --spans (each call a span, a line in each file). Ratios are measured in one run on
one machine; the absolute times are only a guide.
"""

import argparse
import importlib.util
import os
import sys
import tempfile
import time

from microagent.demo import look_up_order
from microagent.mcp import connect
from microagent.otel import Exporter
from microagent.spans import traced, tracing

ARGS = '{"order_id": "A1234"}'
TIME_ARGS = '{"source_timezone": "UTC", "time": "09:30", "target_timezone": "Asia/Tokyo"}'


def per_call(run, args: str, calls: int) -> float:
    """Seconds per call, the best of three rounds."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(calls):
            note = run(args)
        best = min(best, (time.perf_counter() - started) / calls)
        assert not note.error, note.content
    return best


def opened(command):
    """A connected server, and the seconds it took to start and open MCP."""
    started = time.perf_counter()
    server = connect(command)
    return server, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    calls = parser.parse_args().calls
    here = per_call(look_up_order.run, ARGS, calls)
    rows = [("look_up_order, in this process", None, here)]
    server, start = opened([sys.executable, "-m", "microagent.mcp", "microagent.demo:look_up_order"])
    with server:
        rows.append((f"look_up_order over MCP ({server.protocol})", start,
                     per_call(server.tools()[0].run, ARGS, calls)))
    with tempfile.TemporaryDirectory() as spans:
        desk = [sys.executable, "-m", "microagent.mcp", "microagent.demo:look_up_order",
                "--spans", os.path.join(spans, "desk.jsonl")]
        server, start = opened(desk)
        with server, tracing():
            lookup = traced(server.tools()[0], Exporter(os.path.join(spans, "office.jsonl")))
            rows.append(("look_up_order over MCP, traced at both ends", start,
                         per_call(lookup.run, ARGS, calls)))
    if importlib.util.find_spec("mcp_server_time"):
        server, start = opened([sys.executable, "-m", "mcp_server_time"])
        with server:
            rows.append((f"mcp-server-time convert_time ({server.protocol})", start,
                         per_call(server.tools()[1].run, TIME_ARGS, calls)))
    print(f"{calls:,} calls of each, the best of three rounds\n")
    print("| the call | start and open | per call | against in-process |")
    print("|---|---:|---:|---:|")
    for what, start, seconds in rows:
        opening = "" if start is None else f"{start * 1000:.0f} ms"
        print(f"| {what} | {opening} | {seconds * 1e6:,.1f} µs | {seconds / here:,.0f}x |")


if __name__ == "__main__":
    main()
