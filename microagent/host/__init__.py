"""The host: the loop behind HTTP, for many users at once (the workshop; README.md beside this).

    python -m microagent.host            # the refund office on http://127.0.0.1:8000

server.py serves an office over HTTP and streams each Step as a server-sent
event; store.py keeps each session's notes in sqlite, a row a note, with an
audit trail (postgres.py: the same on PostgreSQL, for several processes);
tokens.py signs the approval tokens; page.html, page.js and page.css are the
page for the people who ask and who approve. It is built on the book's public names only.
"""

from microagent.host.server import (CALL, MAX_BODY, MAX_DEPTH, MAX_TEXT, ClientGone, Handler,
                                    Refused, Server, Stream, ledger_refund, llm_office, main,
                                    refund_office, thinking)
from microagent.host.store import Session, Store
from microagent.host.tokens import args_hash, sign, verify

__all__ = [
    "Server", "Handler", "Stream", "Refused", "ClientGone", "thinking", "CALL",
    "MAX_BODY", "MAX_TEXT", "MAX_DEPTH",
    "refund_office", "ledger_refund", "llm_office", "main",
    "Store", "Session", "sign", "verify", "args_hash",
]
