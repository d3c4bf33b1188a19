"""The loop's stream: a run on a session, each Step's notebook committed, then sent.

A route hands a `Stream` the notebook to run on (a new message, a verdict, or
what a resume finds); the Stream takes the session's lease, carries out a
verdict the notebook ends with, then drives the loop a Step at a time. Whatever
a client saw is in the notebook: a Step is committed before its event goes out.
While a step runs, CALL names the tool call (a booking is keyed by it) and
`thinking` sends the brain's words to the client being served, and a tool's
`microagent.progress.report` its progress.
"""

import contextlib
import contextvars
import functools
import json
import secrets
import threading
import time

from microagent import approval, progress
from microagent.agent import DONE, OUT_OF_STEPS, PAUSED
from microagent.context import Context
from microagent.host.request import API_HEADERS, Refused
from microagent.host.store import Session
from microagent.host.tokens import args_hash, sign
from microagent.message import Message

# while a tool runs: "<session>/<index of the decision>", the tool call's identity
CALL = contextvars.ContextVar("CALL")
SERVING = contextvars.ContextVar("SERVING")  # the Stream this thread's request runs


class ClientGone(Exception):
    """Raised inside a brain that is thinking out loud when nobody listens any more: the
    client has gone, or another run took the session. The brain stops mid-reply."""


class Unsettled(BaseException):
    """The ledger failed mid-booking, so whether the refund was booked is not known.

    subtle: not an Exception, which Tool.run would make an error note saying the refund
    failed, and the brain would tell the customer so (they ask again, and are paid twice).
    It stops the run instead: the verdict stays in the notebook, to be carried out by a
    resume, which books it once (a booking is keyed by its call)."""


def thinking(piece: str) -> None:
    """Send a piece of the brain's words to the client being served: a `thinking` event.

    The host's LLM brain is made with `on_text=thinking`; a Python brain may call it too.
    Outside a request it does nothing. When the client has gone it raises ClientGone,
    which stops the brain mid-reply; "" (a chunk with no words) only looks for that.
    Each call also renews the session's lease, so a reply that streams for longer than
    a lease keeps the session.
    """
    stream = SERVING.get(None)
    if stream is None:
        return
    if stream.h.gone() or (piece and not stream.event("thinking", {"text": piece})):
        stream.cancel.set()
        raise ClientGone("the client went away while the brain was thinking")
    stream.renew()


class Stream:
    """One run on one session, sent as server-sent events to the Handler `h` that serves
    the request. Each Step's notebook is committed before its event is sent, so whatever
    a client saw is in the notebook."""

    def __init__(self, h, user: str, sid: str, s: Session):
        self.h, self.server, self.user, self.sid = h, h.server, user, sid
        # as last committed
        self.asker, self.version, self.ctx = s.asker, s.version, s.context
        self.held = False  # this run holds the session's lease
        self.renewed = 0.0  # when it was last taken or renewed (time.monotonic())
        self.cancel = threading.Event()  # the client has gone: nothing new starts

    def run(self, ctx: Context, audit: tuple[str, str] | None = None) -> None:
        """Take the session, carry out a verdict it ends with, then drive the loop to a
        stop."""
        last = ctx.last()
        if last.kind == "verdict" and last.tool not in self.server.agent.tools:
            raise Refused(409, no_longer(last.tool))
        if not self.commit(ctx, lease=True):  # a verdict or a run got in since our load
            raise Refused(409, "another request changed this session first: load it "
                               "again")
        try:
            if audit:
                self.server.store.audit(self.user, self.sid, *audit)
            self.h.streaming = True  # from here on, a failure can only end the stream
            try:
                self.h.send(200, {"Content-Type": "text/event-stream", **API_HEADERS})
            except OSError:  # gone already (a reset): a saved verdict is carried out
                self.cancel.set()
            try:
                if ctx.last().kind == "verdict":
                    ctx = self.settle(ctx)
                if ctx is not None:
                    self.drive(ctx)
            except Unsettled:
                self.server.log(f"{self.sid}: the ledger failed mid-booking; resume "
                                "settles it")
                self.event("error", {"error": UNSETTLED})
            except Exception as e:  # the database failed mid-run (or a bug): say so
                self.event("error", {"error": "the run stopped: the server failed "
                                              f"({type(e).__name__}); every step it had "
                                              "shown you is kept: resume the session "
                                              "later"})
                raise  # to the log
        finally:
            if self.held:  # a failure on the way: let the session go, every step kept
                with contextlib.suppress(Exception):  # the database may be down: the
                    self.commit(self.ctx)  # lease runs out, and the session is free

    def settle(self, ctx: Context) -> Context | None:
        """Carry out the verdict the notebook ends with, under its decision's identity."""
        tool = self.server.agent.tools[ctx.last().tool]  # run() saw the office has it
        with self.serving(len(ctx) - 2):
            ctx = approval.settle(ctx, tool)
        if not self.commit(ctx, lease=True):
            self.lost()
            return None
        self.tool_call(ctx)
        self.event("result", result_of(ctx))
        return ctx

    def drive(self, ctx: Context) -> None:
        """The loop, a Step at a time: commit its notebook, then send its event, until it
        stops."""
        steps = self.server.agent.steps(ctx, self.cancel)
        while True:
            if self.h.gone():
                self.cancel.set()
            try:
                with self.serving(len(ctx)):  # the index the next decision will have
                    step = next(steps)
            except ClientGone:
                if self.version is None:  # the lease ran out while the brain thought
                    return self.lost()
                self.commit(ctx)  # lets go of the session; every step so far is kept
                self.server.store.audit(self.user, self.sid, "cancelled",
                                        "the client went away")
                return
            except Exception as e:  # the brain failed (a bug, a model server down)
                self.server.log(f"{self.sid}: the brain failed: {type(e).__name__}: {e}")
                self.server.store.audit(self.user, self.sid, "brain failed",
                                        type(e).__name__)
                self.commit(ctx)
                self.event("error", {"error": "the brain failed; the notebook keeps "
                                              "every step so far"})
                return
            ctx = step.context
            jti = secrets.token_urlsafe(16) if step.stop == PAUSED else None
            if not self.commit(ctx, lease=not step.stop, jti=jti):
                steps.close()
                return self.lost()
            if step.result is not None:
                self.tool_call(ctx)
            name, data = self.describe(step, jti)
            if name and not self.event(name, data):
                self.cancel.set()
            if step.stop:
                return

    @contextlib.contextmanager
    def serving(self, call: int):
        """While a step runs: the tool call's identity (CALL), where thinking goes, and
        where a tool's progress goes."""
        tokens = CALL.set(f"{self.sid}/{call}"), SERVING.set(self)
        try:
            with progress.listening(functools.partial(self.progressed, call)):
                yield
        finally:
            CALL.reset(tokens[0])
            SERVING.reset(tokens[1])

    def progressed(self, call: int, done, total, message: str) -> None:
        """Send a tool's progress to the client being served: a `progress` event. As
        thinking: no note, and it renews the lease; a client gone is heard at the next
        step."""
        if not self.event("progress", {"call": call, "done": done, "total": total,
                                       "message": message}):
            self.cancel.set()
        with contextlib.suppress(ClientGone):  # the session lost: the next commit says so
            self.renew()

    def commit(self, ctx: Context, lease: bool = False, jti: str | None = None) -> bool:
        """Save the notebook, holding the session (lease) or letting it go; False if we
        lost it."""
        if self.version is None:  # lost already: nothing of ours may be written any more
            return False
        until = time.time() + self.server.lease if lease else 0.0
        self.version = self.server.store.save(self.sid, ctx, self.version,
                                              lease_until=until, jti=jti)
        self.held = lease and self.version is not None
        if self.version is not None:
            self.ctx, self.renewed = ctx, time.monotonic()
        return self.version is not None

    def renew(self) -> None:
        """Hold on to the session while the brain thinks: a third of a lease after it
        was taken, take it again. ClientGone if another run has taken it meanwhile."""
        if self.held and time.monotonic() - self.renewed > self.server.lease / 3:
            if not self.commit(self.ctx, lease=True):
                self.cancel.set()
                raise ClientGone("another run took the session while the brain was "
                                 "thinking")

    def lost(self) -> None:
        self.event("error", {"error": "the session was taken over by another run; "
                                      "stopped"})

    def tool_call(self, ctx: Context) -> None:
        result, at = ctx.last(), len(ctx) - (3 if ctx[-2].kind == "verdict" else 2)
        self.server.store.audit(self.user, self.sid, "tool call",
                                f"{result.name} (call {at})"
                                + (" failed" if result.error else ""))

    def describe(self, step, jti: str | None) -> tuple[str | None, dict]:
        """The event for a Step: its name and its data (no name: nothing to say yet)."""
        ctx = step.context
        if step.stop == PAUSED:
            return "approval_required", self.ask(ctx, jti)
        if step.stop == DONE:
            return "done", {"answer": ctx.last().content}
        if step.stop == OUT_OF_STEPS:
            return "out_of_steps", {"note": ctx.last().content}
        if step.stop is not None:
            return "cancelled", {}
        if step.result is not None:
            return "result", result_of(ctx)
        if step.action.tool is None:
            return "no_move", {"note": ctx.last().content, "at": len(ctx) - 1}
        return None, {}  # a decision that waits for a human: the next Step says so

    def ask(self, ctx: Context, jti: str) -> dict:
        """What waits for a verdict; with a token if the one being served may give it."""
        decision = ctx.last()
        self.server.store.audit(self.asker, self.sid, "approval requested",
                                f"{decision.tool} {decision.args}")
        if self.server.users.may_approve(self.user, self.asker):
            token = token_for(self.server, self.user, self.sid, ctx, jti)
            return {**asked(ctx), "approval_token": token}
        return {**asked(ctx), "waits_for": "an approver"}  # who finds it in their queue

    def event(self, name: str, data: dict) -> bool:
        """Send one server-sent event; False if the client has gone."""
        try:
            self.h.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            return True
        except OSError:
            return False


UNSETTLED = ("the refund was being booked when the ledger's database failed, so whether "
             "it was booked is not known yet; nothing is lost, and it is not paid twice: "
             "resume this session once the database is back, and it is booked exactly "
             "once")


def result_of(ctx: Context) -> dict:
    """The `result` event for a notebook that ends with a tool's note."""
    result, before = ctx[-1], ctx[-2]  # before: the decision, or the verdict on it
    decision = ctx[-3] if before.kind == "verdict" else before
    return {"tool": result.name, "args": before.args, "reasoning": decision.content,
            "content": result.content, "error": result.error, "at": len(ctx) - 1}


def pending(s: Session) -> Message | None:
    """The decision the session waits on for a verdict, asked with a token; else None."""
    return approval.waiting(s.context) if s.jti else None


def asked(ctx: Context) -> dict:
    """What the decision `ctx` ends with asks for, as the API shows it."""
    decision = ctx.last()
    return {"tool": decision.tool, "args": json.loads(decision.args),
            "call": len(ctx) - 1}


def token_for(server, user: str, sid: str, ctx: Context, jti: str) -> str:
    """A signed approval token for the decision `ctx` ends with, bound to the approver
    `user`, the session, the call (the decision's index), its arguments and the
    session's `jti`; signed with the server's secret, for its token_ttl seconds."""
    now = int(time.time())
    return sign({"sub": user, "sid": sid, "call": len(ctx) - 1,
                 "args": args_hash(ctx.last().args), "jti": jti,
                 "iat": now, "exp": now + server.token_ttl}, server.secret)


def no_longer(tool: str) -> str:
    return f"{tool} is no longer in this office, so a verdict on it can't be carried out"
