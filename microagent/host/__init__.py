"""The host: the loop behind HTTP, for many users at once (the workshop; see README.md).

    python -m microagent.host            # the refund office on http://127.0.0.1:8000
                                         # (and over A2A: __main__.py gives its routes)

Read it in this order, a file a sitting:

- stream.py: one run on one session (`Stream`): each Step's notebook committed,
  then its events sent; `thinking` streams the brain's words. A run stops when
  its client leaves, or goes on without it; its asker may cancel it.
- events.py: `told`, the events about a notebook's notes, each with its SSE id,
  the same live and read back; follow.py: `GET .../events`, what a client
  missed, from the store, then the run until it stops.
- routes.py: a function a route, named by what it does (`post_message`,
  `post_verdict`, ...), with the rate limit and the lease in `session_to_run`.
- users.py: who may do what: a user asks, approves, or both; nobody approves
  their own request unless the host is started to allow it.
- http.py: `Server` and `Handler`, with a deadline for the whole request;
  `Server(..., routes=)` adds its maker's routes (A2A's, microagent.a2a.server).
- request.py: request hygiene: a whole body of known size, strict JSON, known fields.
- office.py: the hosted refund office; cli.py: the command line.
- store.py: each session's notes, a row a note, and an audit trail, in a sqlite
  file (sqlite.py) or on PostgreSQL for several processes (postgres.py).
- tokens.py signs the approval tokens; page.html, page.js and page.css are the
  page for the people who ask and who approve.

It is built on the book's public names only. What it leaves out: real identity
providers (users are bearer tokens in a JSON file), TLS (serve it behind a proxy
that does it), and HTTP keep-alive.
"""

from microagent.host.cli import main
from microagent.host.http import Handler, Server
from microagent.host.office import ledger_refund, llm_office, refund_office
from microagent.host.request import MAX_BODY, MAX_DEPTH, MAX_TEXT, Refused
from microagent.host.store import Session, Store
from microagent.host.stream import CALL, ClientGone, Stream, thinking
from microagent.host.tokens import args_hash, sign, verify

__all__ = [
    "Server", "Handler", "Stream", "Refused", "ClientGone", "thinking", "CALL",
    "MAX_BODY", "MAX_TEXT", "MAX_DEPTH",
    "refund_office", "ledger_refund", "llm_office", "main",
    "Store", "Session", "sign", "verify", "args_hash",
]
