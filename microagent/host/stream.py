"""The loop's stream: a run on a session, each Step's notebook committed, then sent.

A route hands a `Stream` the notebook to run on (a new message, a verdict, or
what a resume finds); the Stream takes the session's lease, carries out a
verdict the notebook ends with, then drives the loop a Step at a time. Whatever
a client saw is in the notebook: a Step is committed before its events go out
(events.py says what they are). The run stops when its client leaves, or goes on
without it (`on_disconnect`); it stops when its asker cancels it, in any process
(the cancel moves the session's version, so the run's next commit misses, and
reads why). While a step runs, CALL names the tool call (a booking is keyed by
it) and `thinking` sends the brain's words to the client being served, and a
tool's `microagent.progress.report` its progress.
"""

import contextlib
import contextvars
import functools
import secrets
import threading
import time

from microagent import approval, progress
from microagent.agent import CANCELLED, PAUSED
from microagent.context import Context
from microagent.host.events import no_longer, sse, token_for, told
from microagent.host.request import API_HEADERS, Refused
from microagent.host.store import Session

# while a tool runs: "<session>/<index of the decision>", the tool call's identity
CALL = contextvars.ContextVar("CALL")
SERVING = contextvars.ContextVar("SERVING")  # the Stream this thread's request runs


class ClientGone(Exception):
    """Raised inside a brain that is thinking out loud when its run must stop: the client
    has gone (and the run goes with it), the asker cancelled it, or another run took the
    session. The brain stops mid-reply."""


class Unsettled(BaseException):
    """The ledger failed mid-booking, so whether the refund was booked is not known.

    subtle: not an Exception, which Tool.run would make an error note saying the refund
    failed, and the brain would tell the customer so (they ask again, and are paid twice).
    It stops the run instead: the verdict stays in the notebook, to be carried out by a
    resume, which books it once (a booking is keyed by its call)."""


def thinking(piece: str) -> None:
    """Send a piece of the brain's words to the client being served: a `thinking` event.

    The host's LLM brain is made with `on_text=thinking`; a Python brain may call it too.
    Outside a request it does nothing. When the run must stop (its client has gone, and
    the run goes with it; or it was cancelled) it raises ClientGone, which stops the
    brain mid-reply; "" (a chunk with no words) only looks for that. Each call also
    renews the session's lease, so a reply that streams for longer than a lease keeps
    the session (and hears a cancel asked in another process).
    """
    stream = SERVING.get(None)
    if stream is None:
        return
    if piece and not stream.event("thinking", {"text": piece}) and not stream.stays:
        stream.cancel.set()
    stream.renew()
    if stream.stopping():
        raise ClientGone("the run stopped while the brain was thinking (cancelled, or "
                         "its client went away)")


class Stream:
    """One run on one session, sent as server-sent events to the Handler `h` that serves
    the request. Each Step's notebook is committed before its event is sent, so whatever
    a client saw is in the notebook."""

    def __init__(self, h, user: str, sid: str, s: Session, on_disconnect: str = "cancel"):
        self.h, self.server, self.user, self.sid = h, h.server, user, sid
        # as last committed
        self.asker, self.version, self.ctx = s.asker, s.version, s.context
        self.held = False  # this run holds the session's lease
        self.renewed = 0.0  # when it was last taken or renewed (time.monotonic())
        self.cancel = threading.Event()  # stop: nothing new starts
        self.stays = on_disconnect == "continue"  # the run goes on when its client leaves
        self.said = -1  # the index of the last note told about (run() starts it)
        self.took = -1  # the version the run took the session at
        self.saved = s  # the session as its last commit left it in the store
        self.released = False  # it let go of the session, cancelled (commit)

    def run(self, ctx: Context, audit: tuple[str, str] | None = None) -> None:
        """Take the session, carry out a verdict it ends with, then drive the loop to a
        stop."""
        last = ctx.last()
        if last.kind == "verdict" and last.tool not in self.server.agent.tools:
            raise Refused(409, no_longer(last.tool))
        if not self.commit(ctx, lease=True):  # a verdict or a run got in since our load
            raise Refused(409, "another request changed this session first: load it "
                               "again")
        self.took, self.server.runs[self.sid] = self.version, self  # the cancel route's
        self.said = len(ctx) - 1  # its last note: told before, or one with no event
        try:
            if audit:
                self.server.store.audit(self.user, self.sid, *audit)
            self.h.streaming = True  # from here on, a failure can only end the stream
            try:
                self.h.send(200, {"Content-Type": "text/event-stream", **API_HEADERS})
            except OSError:  # gone already (a reset): a saved verdict is carried out
                if not self.stays:
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
            if self.server.runs.get(self.sid) is self:  # (a later run's stays)
                del self.server.runs[self.sid]
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
        self.tell(ctx)
        return ctx

    def drive(self, ctx: Context) -> None:
        """The loop, a Step at a time: commit its notebook, then send its event, until it
        stops."""
        steps = self.server.agent.steps(ctx, self.cancel)
        while True:
            self.stopping()
            try:
                with self.serving(len(ctx)):  # the index the next decision will have
                    step = next(steps)
            except ClientGone:
                if self.version is None:  # the lease ran out while the brain thought
                    return self.lost()
                self.commit(ctx)  # lets go of the session; every step so far is kept
                self.server.store.audit(self.user, self.sid, "cancelled", self.why())
                self.event("cancelled", {})
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
            stop = CANCELLED if self.released and step.stop == PAUSED else step.stop
            if step.result is not None:
                self.tool_call(ctx)
            if not self.tell(ctx, stop, jti) and not self.stays:
                self.cancel.set()
            if stop:
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
                                       "message": message}) and not self.stays:
            self.cancel.set()
        with contextlib.suppress(ClientGone):  # the session lost: the next commit says so
            self.renew()

    def commit(self, ctx: Context, lease: bool = False, jti: str | None = None) -> bool:
        """Save the notebook, holding the session (lease) or letting it go; False if we
        lost it."""
        if self.version is None:  # lost already: nothing of ours may be written any more
            return False
        if self.released:  # let go when cancelled: writes no more (store's `cancelled`)
            return len(ctx) == len(self.ctx)  # nothing new starts; a note would be lost
        store, sid = self.server.store, self.sid
        until = time.time() + self.server.lease if lease else 0.0
        self.version = store.save(sid, ctx, self.version, lease_until=until, jti=jti)
        if self.version is None and self.took >= 0 and store.cancelled(sid, self.took):
            # the asker's cancel moved the version, in whichever process, so this save
            # missed (no statement more a step to hear it): save again, let go, and stop
            self.cancel.set()
            until, lease, now = 0.0, False, store.load(sid)
            # subtle: only if nothing but a cancel wrote since our last commit. A cancel
            # keeps our lease; any other save sets its own (a later run's ends after ours
            # ran out, CancelTask's remark's is 0). Else the step is lost (a long tool)
            if now.lease_until == self.saved.lease_until:
                self.version = store.save(sid, ctx, now.version)  # no verdict asked
                self.released = self.version is not None
        self.held = lease and self.version is not None
        if self.version is None:
            return False
        self.ctx, self.renewed = ctx, time.monotonic()
        # the session as the store now holds it, for the followers in this process (one
        # assignment, so a follower never reads half of it)
        self.saved = Session(self.asker, ctx, self.version, until, jti)
        # the followers in this process look again; a new Event for the next commit, so
        # this one never waits for a hundred followers waking on the old one
        news, self.server.news = self.server.news, threading.Event()
        news.set()
        return True

    def stopping(self) -> bool:
        """Must the run stop? It was cancelled, or its client left and it goes with it."""
        if not self.stays and self.h.gone():
            self.cancel.set()
        return self.cancel.is_set()

    def why(self) -> str:
        return "the client went away" if not self.stays and self.h.gone() else "cancelled"

    def renew(self) -> None:
        """Hold on to the session while the brain thinks: a third of a lease after it
        was taken, take it again. ClientGone if another run has taken it meanwhile."""
        if self.held and time.monotonic() - self.renewed > self.server.lease / 3:
            if not self.commit(self.ctx, lease=True):
                self.cancel.set()
                raise ClientGone("another run took the session while the brain was "
                                 "thinking")

    def lost(self) -> None:
        """Another writer took the session: a step not committed is lost, and said so."""
        self.server.log(f"{self.sid}: another writer took the session; a step was lost")
        self.server.store.audit(self.user, self.sid, "run stopped",
                                "another writer took the session; its last step not kept")
        self.event("error", {"error": "the session was taken over by another run; "
                                      "stopped"})

    def tool_call(self, ctx: Context) -> None:
        result, at = ctx.last(), len(ctx) - (3 if ctx[-2].kind == "verdict" else 2)
        self.server.store.audit(self.user, self.sid, "tool call",
                                f"{result.name} (call {at})"
                                + (" failed" if result.error else ""))

    def tell(self, ctx: Context, stop: str | None = None, jti: str | None = None) -> bool:
        """Send the events about the notes since the last told, and why the run stopped
        (events.told, as a client that comes back reads them); False if the client has
        gone."""
        token = self.ask(ctx, jti) if stop == PAUSED else None
        sent = [self.event(*one) for one in told(self.server.agent, ctx, self.said, stop,
                                                 token)]
        self.said = len(ctx) - 1
        return all(sent)

    def ask(self, ctx: Context, jti: str) -> str | None:
        """Audit what waits for a verdict; a token for it if the one served may give it
        (else the event says it waits for an approver, who finds it in their queue)."""
        decision = ctx.last()
        self.server.store.audit(self.asker, self.sid, "approval requested",
                                f"{decision.tool} {decision.args}")
        if self.server.users.may_approve(self.user, self.asker):
            return token_for(self.server, self.user, self.sid, ctx, jti)
        return None

    def event(self, name: str, data: dict, id: int | None = None) -> bool:
        """Send one server-sent event (with its `id`, if it is about a note); False if the
        client has gone."""
        try:
            self.h.wfile.write(sse(name, data, id))
            return True
        except OSError:
            return False


UNSETTLED = ("the refund was being booked when the ledger's database failed, so whether "
             "it was booked is not known yet; nothing is lost, and it is not paid twice: "
             "resume this session once the database is back, and it is booked exactly "
             "once")
