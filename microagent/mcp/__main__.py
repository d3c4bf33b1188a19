"""`python -m microagent.mcp [OFFICE ...]`: serve an office's tools to MCP clients over stdio.

An OFFICE is `module:name`, naming an Agent (its tools are served), a Tool, a list
of Tools, or a function of no arguments that makes one of these. With none, it
serves the refund office, microagent.demo:support_agent: its refund needs a human,
so an MCP call to it is refused, and the order desk answers.

For a client's settings (Claude Desktop, an IDE, the mcp SDK), the command is
`python -m microagent.mcp`, with the office after it.

With `--spans FILE` (or `--collector URL`, or both) each tool is served traced:
every call it runs is an execute_tool span, written as OTLP JSON lines by
microagent.otel, a child of the client's span if its call carried a traceparent.
"""

import argparse
import importlib
import sys

from microagent.agent import Agent
from microagent.mcp.server import offered, serve
from microagent.otel import Exporter
from microagent.spans import traced
from microagent.tool import Tool, said_by

DEFAULT = "microagent.demo:support_agent"


def tools_of(spec: str) -> list[Tool]:
    """The tools an OFFICE names ('module:name'); a ValueError that says why, if none."""
    module_name, _, attribute = spec.partition(":")
    if not (module_name and attribute):
        raise ValueError(f"an office is module:name, like {DEFAULT}, not {spec!r}")
    try:
        found = importlib.import_module(module_name)
        for part in attribute.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"can't find {spec}: {e}") from None
    if callable(found) and not isinstance(found, (Tool, Agent)):
        try:
            found = found()
        except Exception as e:
            raise ValueError(f"{spec}() failed: {type(e).__name__}: {said_by(e)}") from None
    if isinstance(found, Agent):
        return list(found.tools.values())
    if isinstance(found, Tool):
        return [found]
    if isinstance(found, (list, tuple)) and all(isinstance(t, Tool) for t in found):
        return list(found)
    raise ValueError(f"{spec} is not an Agent, a Tool or a list of Tools: {found!r}")


def spans_to(options) -> Exporter:
    """The Exporter --spans and --collector name; an OSError now if FILE can't be written."""
    if options.spans:
        with open(options.spans, "a", encoding="utf-8"):  # a typo fails here, not per call
            pass
    return Exporter(options.spans, options.collector, service=options.name)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m microagent.mcp",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("office", nargs="*", default=[DEFAULT],
                        help=f"module:name of an Agent, Tool or list of Tools (default {DEFAULT})")
    parser.add_argument("--name", default="microagent", help="the name it gives clients")
    parser.add_argument("--list", action="store_true",
                        help="print the tools it would serve, and stop")
    parser.add_argument("--spans", metavar="FILE",
                        help="write each call's span to FILE, as OTLP JSON lines")
    parser.add_argument("--collector", metavar="URL",
                        help="POST each call's span to an OpenTelemetry collector's /v1/traces")
    options = parser.parse_args(argv)
    try:
        tools = [tool for spec in options.office for tool in tools_of(spec)]
        office = offered(tools)
    except (ValueError, TypeError) as e:
        parser.exit(2, f"python -m microagent.mcp: {e}\n")
    if options.list:
        for tool in office.values():
            approval = " (needs a human: refused over MCP)" if tool.needs_approval else ""
            print(f"{tool.name}{approval}: {tool.description.splitlines()[0]}")
        return
    if options.spans or options.collector:
        try:
            exporter = spans_to(options)
        except (ValueError, OSError) as e:
            parser.exit(2, f"python -m microagent.mcp: {e}\n")
        tools = [traced(tool, exporter) for tool in tools]
    print(f"serving {', '.join(office)} over MCP on stdio", file=sys.stderr)
    serve(tools, name=options.name)


if __name__ == "__main__":
    main()
