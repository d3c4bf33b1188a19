"""The MCP peers the tests talk to, written by others, and where each one lives.

- mcp-server-time and the official `mcp` SDK come from PyPI, in the dev extra.
- @modelcontextprotocol/server-everything comes from npm and runs on Node: `.ci/run`
  installs it into .mcp-peers/ (git ignores it) with `python tests/mcp/mcp_peers.py`,
  and `everything()` installs it there too, on first use, where npm is on the machine.
"""

import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PEERS = ROOT / ".mcp-peers"
EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"  # the version measured
ENTRY = PEERS / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"


def install() -> None:
    """Install server-everything into .mcp-peers/ (a no-op once it is there)."""
    if ENTRY.exists():
        return
    PEERS.mkdir(exist_ok=True)
    subprocess.run([shutil.which("npm"), "install", "--prefix", str(PEERS), "--no-audit", "--no-fund",
                    "--silent", EVERYTHING], check=True, timeout=300)


def everything() -> list[str] | str:
    """The command that starts server-everything over stdio, or why it can't be run here."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "npm and node are not on this machine: @modelcontextprotocol/server-everything needs them"
    install()
    return [shutil.which("node"), str(ENTRY), "stdio"]


def time_server() -> list[str]:
    """The command that starts mcp-server-time (PyPI) with this Python."""
    return [sys.executable, "-m", "mcp_server_time"]


if __name__ == "__main__":
    if shutil.which("npm") is None:
        print("npm is not on this machine: the tests against server-everything will be skipped")
    else:
        install()
        print(f"server-everything is at {ENTRY.relative_to(ROOT)}")
