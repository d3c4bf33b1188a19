"""The workshop's MCP: any MCP server's tools as coworkers, and the office's tools served.

    from microagent.mcp import connect

    with connect(["python", "-m", "mcp_server_time"], timeout=30) as clock:
        agent = Agent(policy, [*clock.tools(), final_answer])

`connect(command)` starts an MCP server as a subprocess and hands back a Connection whose
`tools()` are plain Tools; `serve(tools)` (or `python -m microagent.mcp`) serves an
office's tools to any MCP client over stdio. Both speak the protocol's two
generations, 2026-07-28 and 2025-11-25 (README.md says how, and what each piece is for).

It imports only the book's public names; the book imports nothing from here.
"""

from microagent.mcp.client import Connection, McpError, Server, connect
from microagent.mcp.server import serve
from microagent.mcp.tools import MAX_RESULT, checkable

# Server: Connection's name until this release, kept for one more
__all__ = ["connect", "Connection", "Server", "McpError", "MAX_RESULT", "checkable",
           "serve"]
