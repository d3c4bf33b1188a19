"""What a client is told: the events about a session's notes, the same live and replayed.

One function, `told`, turns a notebook's notes into server-sent events; the
live run (stream.py) sends them as it commits its Steps, and the events route
(follow.py) reads them back from the store for a client that comes back. Each
event about a note carries its SSE `id`: the note's index, so a client that
lost its connection asks for what came after the last id it saw
(`Last-Event-ID`). The event that says why a run stopped is about the place
after its last note, so its id is the notebook's length then; the note that
goes there next (a question, or a verdict) has no event of its own, so no two
events share an id. The brain's words (`thinking`), and any other event about no
note (a tool's progress), are live only: no id. Beside `told` is what routes, users
and follow share about a decision that waits: `pending`, `asked`, `token_for`.
"""

import json
import time

from microagent import approval
from microagent.agent import DONE, OUT_OF_STEPS, PAUSED
from microagent.context import Context
from microagent.host.store import Session
from microagent.host.tokens import args_hash, sign
from microagent.message import Message


def told(agent, ctx: Context, after: int, stop: str | None, token: str | None = None):
    """The events about the notes of `ctx` after index `after`, as (name, data, id).

    `stop` is why the run stopped at the notebook's end (None: it goes on, or stopped
    without a reason of the loop's); a stop earlier on is read off the notes (a decision
    that a verdict answered, an answer a question followed). `token`: the approval token
    to hand with what waits at the end, if the one told may approve it.
    """
    out = []
    # from `after` itself: the event for a stop right after that note has id after + 1
    for at in range(max(after, 0), len(ctx)):
        note = ctx[at]
        if note.kind == "result" and at > after:
            out.append(("result", result_of(ctx, at), at))
        elif note.kind == "no_move" and at > after:
            out.append(("no_move", {"note": note.content, "at": at}, at))
        if at < len(ctx) - 1:
            ended = stopped_at(agent, ctx, at)
            if ended:
                out.append(ending(ctx, at, ended, None))
    if stop and len(ctx) > after:
        out.append(ending(ctx, len(ctx) - 1, stop, token))
    return out


def stopped_at(agent, ctx: Context, at: int) -> str | None:
    """Why a run stopped after note `at`, read off the notes that follow it (or None)."""
    note, then = ctx[at], ctx[at + 1].kind
    if note.kind == "decision" and then == "verdict":
        return PAUSED
    if then == "question" and note.kind == "result" and not note.error \
            and note.name in agent.tools and agent.tools[note.name].terminal:
        return DONE
    if then == "question" and note.kind == "remark":
        return OUT_OF_STEPS
    return None


def ending(ctx: Context, at: int, stop: str, token: str | None):
    """The event that says why a run stopped after note `at`, as (name, data, id)."""
    if stop == PAUSED:
        waits = {"approval_token": token} if token else {"waits_for": "an approver"}
        data = ("approval_required", {**asked(ctx, at), **waits})
    elif stop == DONE:
        data = ("done", {"answer": ctx[at].content})
    elif stop == OUT_OF_STEPS:
        data = ("out_of_steps", {"note": ctx[at].content})
    else:
        return ("cancelled", {}, None)  # no note says so: told live only
    return (*data, at + 1)


def sse(name: str, data: dict, id: int | None = None) -> bytes:
    """One server-sent event, as it goes on the wire.

    >>> sse("done", {"answer": "ok"}, 9)
    b'id: 9\\nevent: done\\ndata: {"answer": "ok"}\\n\\n'
    """
    head = "" if id is None else f"id: {id}\n"
    return f"{head}event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def result_of(ctx: Context, at: int) -> dict:
    """The `result` event for the tool's note at index `at`."""
    result, before = ctx[at], ctx[at - 1]  # before: the decision, or the verdict on it
    decision = ctx[at - 2] if before.kind == "verdict" else before
    return {"tool": result.name, "args": before.args, "reasoning": decision.content,
            "content": result.content, "error": result.error, "at": at}


def pending(s: Session) -> Message | None:
    """The decision the session waits on for a verdict, asked with a token; else None."""
    return approval.waiting(s.context) if s.jti else None


def asked(ctx: Context, at: int | None = None) -> dict:
    """What the decision at `at` (the last note if None) asks for, as the API shows it."""
    at = len(ctx) - 1 if at is None else at
    decision = ctx[at]
    return {"tool": decision.tool, "args": json.loads(decision.args), "call": at}


def token_for(server, user: str, sid: str, ctx: Context, jti: str) -> str:
    """A signed approval token for the decision `ctx` ends with, bound to the approver
    `user`, the session, the call (the decision's index), its arguments and the
    session's `jti`; signed with the server's secret, for its token_ttl seconds."""
    now = int(time.time())
    return sign({"sub": user, "sid": sid, "call": len(ctx) - 1,
                 "args": args_hash(ctx.last().args), "jti": jti,
                 "iat": now, "exp": now + server.token_ttl}, server.secret)


def no_longer(tool: str) -> str:
    """The words for a verdict on a tool the office no longer has."""
    return f"{tool} is no longer in this office, so a verdict on it can't be carried out"
