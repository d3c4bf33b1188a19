"""The server: the loop behind HTTP, one session per notebook, approvals as signed tokens.

    python -m microagent.host                # the refund office on http://127.0.0.1:8000
    python -m microagent.host --approve-own  # one person may ask and approve (a tutorial's flow)
    python -m microagent.host --audit        # print the audit trail and exit

Read it in six parts, in this order: the loop's stream (`Stream`: each Step's
notebook committed, then its event sent), the routes (a function each, with the
rate limit and the lease in `driving`), who may do what (a user asks, approves,
or both; nobody approves their own request unless the host is started to allow
it), the HTTP plumbing (`Handler`, with a deadline for the whole request), the
request hygiene (a whole body of known size, strict JSON, known fields), and the
hosted refund office with the command line.
README.md beside this file has the protocol.

What it leaves out: real identity providers (users are bearer tokens in a JSON
file), TLS (serve it behind a proxy that does it), and HTTP keep-alive.
"""

import argparse
import contextlib
import contextvars
import hmac
import http.server
import importlib
import json
import math
import os
import re
import secrets
import select
import socket
import sys
import threading
import time
import unicodedata

from microagent import approval
from microagent.agent import DONE, OUT_OF_STEPS, PAUSED, Agent
from microagent.context import Context
from microagent.demo import dollars, refund_problem, support_agent, support_policy
from microagent.host.store import SERVERS, Session, Store, connect, shown
from microagent.host.tokens import args_hash, sign, verify
from microagent.llm import chat_policy
from microagent.message import USER, Message
from microagent.picture import draw
from microagent.retry import hiding
from microagent.saving import to_json
from microagent.schema import as_tool
from microagent.spans import tracing
from microagent.tool import Tool, error_note, read_json
from microagent.transport import hardened

CALL = contextvars.ContextVar("CALL")  # "<session>/<index of the decision>" while a tool runs
SERVING = contextvars.ContextVar("SERVING")  # the Stream of the request this thread serves
MAX_BODY, MAX_TEXT, MAX_DEPTH = 64 * 1024, 4000, 8  # bytes a body; characters a message; nesting
ASKS, APPROVES = "asks", "approves"  # the two roles a user may have, in the users file
# on every answer of the API: never read as another type, never kept by a cache or a proxy
API_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}


# ----------------------------------------------------------------------------
# the loop's stream: commit each Step's notebook, then send its event

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
    """Send a piece of the brain's words to the client being served, as a `thinking` event.

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
    """One run on one session, sent as server-sent events. Each Step's notebook is
    committed before its event is sent, so whatever a client saw is in the notebook."""

    def __init__(self, h: "Handler", user: str, sid: str, s: Session):
        self.h, self.server, self.user, self.sid = h, h.server, user, sid
        self.owner, self.version, self.ctx = s.owner, s.version, s.context  # as last committed
        self.held = False  # this run holds the session's lease
        self.renewed = 0.0  # when it was last taken or renewed (time.monotonic())
        self.cancel = threading.Event()  # the client has gone: nothing new starts

    def run(self, ctx: Context, audit: tuple[str, str] | None = None) -> None:
        """Take the session, carry out a verdict it ends with, then drive the loop to a stop."""
        last = ctx.last()
        if last.kind == "verdict" and last.tool not in self.server.agent.tools:
            raise Refused(409, no_longer(last.tool))
        if not self.commit(ctx, lease=True):  # a verdict or a run got in since our load
            raise Refused(409, "another request changed this session first: load it again")
        try:
            if audit:
                self.server.store.audit(self.user, self.sid, *audit)
            self.h.streaming = True  # from here on, a failure can only end the stream
            try:
                self.h.send(200, {"Content-Type": "text/event-stream", **API_HEADERS})
            except OSError:  # gone already (a reset): a verdict saved is still carried out
                self.cancel.set()
            try:
                if ctx.last().kind == "verdict":
                    ctx = self.settle(ctx)
                if ctx is not None:
                    self.drive(ctx)
            except Unsettled:
                self.server.log(f"{self.sid}: the ledger failed mid-booking; resume settles it")
                self.event("error", {"error": UNSETTLED})
            except Exception as e:  # the database failed mid-run (or a bug): say so, in words
                self.event("error", {"error": f"the run stopped: the server failed "
                                              f"({type(e).__name__}); every step it had "
                                              "shown you is kept: resume the session later"})
                raise  # to the log
        finally:
            if self.held:  # a failure on the way: let the session go, every step kept
                with contextlib.suppress(Exception):  # the database may be down: the lease ends
                    self.commit(self.ctx)

    def settle(self, ctx: Context) -> Context | None:
        """Carry out the verdict the notebook ends with, under its decision's identity."""
        tool = self.server.agent.tools[ctx.last().tool]  # run() made sure the office has it
        with self.serving(len(ctx) - 2):
            ctx = approval.settle(ctx, tool)
        if not self.commit(ctx, lease=True):
            self.lost()
            return None
        self.tool_call(ctx)
        self.event("result", result_of(ctx))
        return ctx

    def drive(self, ctx: Context) -> None:
        """The loop, a Step at a time: commit its notebook, then send its event, until it stops."""
        steps = self.server.agent.steps(ctx, self.cancel)
        while True:
            if self.h.gone():
                self.cancel.set()
            try:
                with self.serving(len(ctx)):  # the index the next decision will have
                    step = next(steps)
            except ClientGone:
                if self.version is None:  # the lease ran out while the brain thought: taken
                    return self.lost()
                self.commit(ctx)  # lets go of the session; every step so far is kept
                self.server.store.audit(self.user, self.sid, "cancelled", "the client went away")
                return
            except Exception as e:  # the brain failed to think (a bug, a model server down)
                self.server.log(f"{self.sid}: the brain failed: {type(e).__name__}: {e}")
                self.server.store.audit(self.user, self.sid, "brain failed", type(e).__name__)
                self.commit(ctx)
                self.event("error", {"error": "the brain failed; the notebook keeps every step so far"})
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
        """While a step runs: the tool call's identity (CALL), and where thinking goes."""
        tokens = CALL.set(f"{self.sid}/{call}"), SERVING.set(self)
        try:
            yield
        finally:
            CALL.reset(tokens[0])
            SERVING.reset(tokens[1])

    def commit(self, ctx: Context, lease: bool = False, jti: str | None = None) -> bool:
        """Save the notebook, holding the session (lease) or letting it go; False if we lost it."""
        if self.version is None:  # lost already: nothing of ours may be written any more
            return False
        until = time.time() + self.server.lease if lease else 0.0
        self.version = self.server.store.save(self.sid, ctx, self.version, lease_until=until, jti=jti)
        self.held = lease and self.version is not None
        if self.version is not None:
            self.ctx, self.renewed = ctx, time.monotonic()
        return self.version is not None

    def renew(self) -> None:
        """Hold on to the session while the brain thinks: a third of a lease after it was taken,
        take it again. ClientGone if another run has taken it meanwhile."""
        if self.held and time.monotonic() - self.renewed > self.server.lease / 3:
            if not self.commit(self.ctx, lease=True):
                self.cancel.set()
                raise ClientGone("another run took the session while the brain was thinking")

    def lost(self) -> None:
        self.event("error", {"error": "the session was taken over by another run; stopped"})

    def tool_call(self, ctx: Context) -> None:
        result, at = ctx.last(), len(ctx) - (3 if ctx[-2].kind == "verdict" else 2)
        self.server.store.audit(self.user, self.sid, "tool call",
                                f"{result.name} (call {at})" + (" failed" if result.error else ""))

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
        self.server.store.audit(self.owner, self.sid, "approval requested",
                                f"{decision.tool} {decision.args}")
        if self.server.may_approve(self.user, self.owner):
            return {**asked(ctx), "approval_token": token_for(self.server, self.user, self.sid, ctx, jti)}
        return {**asked(ctx), "waits_for": "a reviewer"}  # who finds it in their queue

    def event(self, name: str, data: dict) -> bool:
        """Send one server-sent event; False if the client has gone."""
        try:
            self.h.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            return True
        except OSError:
            return False


UNSETTLED = ("the refund was being booked when the ledger's database failed, so whether it "
             "was booked is not known yet; nothing is lost, and it is not paid twice: resume "
             "this session once the database is back, and it is booked exactly once")


def result_of(ctx: Context) -> dict:
    """The `result` event for a notebook that ends with a tool's note."""
    result, before = ctx[-1], ctx[-2]  # before: the decision, or the verdict on it
    decision = ctx[-3] if before.kind == "verdict" else before
    return {"tool": result.name, "args": before.args, "reasoning": decision.content,
            "content": result.content, "error": result.error, "at": len(ctx) - 1}


def pending(s: Session) -> Message | None:
    """The decision the session waits on for a verdict, asked for with a token; else None."""
    return approval.waiting(s.context) if s.jti else None


def asked(ctx: Context) -> dict:
    """What the decision `ctx` ends with asks for, as the API shows it."""
    decision = ctx.last()
    return {"tool": decision.tool, "args": json.loads(decision.args), "call": len(ctx) - 1}


def token_for(server: "Server", user: str, sid: str, ctx: Context, jti: str) -> str:
    """A signed approval token for the decision `ctx` ends with, bound to the approver `user`,
    the session, the call (the decision's index), its arguments and the session's `jti`."""
    now = int(time.time())
    return sign({"sub": user, "sid": sid, "call": len(ctx) - 1, "args": args_hash(ctx.last().args),
                 "jti": jti, "iat": now, "exp": now + server.token_ttl}, server.secret)


def no_longer(tool: str) -> str:
    return f"{tool} is no longer in this office, so a verdict on it can't be carried out"


# ----------------------------------------------------------------------------
# the routes: (handler, user, session id, body) each; the first three have no session

def me(h: "Handler", user: str, body: bytes) -> None:
    """Who the bearer token says you are, and what you may do."""
    h.reply(200, {"user": user, "roles": sorted(h.server.roles(user)),
                  "approves_own": h.server.approve_own})


def create(h: "Handler", user: str, body: bytes) -> None:
    parse(body, {})
    h.server.needs(user, ASKS)
    limited(h.server, user)
    sid = secrets.token_urlsafe(16)  # 128 random bits: unguessable
    h.server.store.create(sid, user, Context())
    h.server.store.audit(user, sid, "created")
    h.reply(201, {"id": sid})


def queue(h: "Handler", user: str, body: bytes) -> None:
    """The approver's queue: every decision that waits for a verdict this user may give, in full,
    each with a token bound to this user."""
    server = h.server
    server.needs(user, APPROVES)
    waiting = []
    for sid in server.store.waiting():
        try:
            s = server.store.load(sid)
        except ValueError as e:  # a notebook broken in the database: never shown, never run
            server.log(f"{sid}: left out of the queue: {e}")
            continue
        decision = s and pending(s)
        if not decision or not server.may_approve(user, s.owner) \
                or decision.tool not in server.agent.tools:
            continue
        question = next(m.content for m in reversed(s.context) if m.kind == "question")
        waiting.append({"session": sid, "asker": s.owner, "question": question, **asked(s.context),
                        "approval_token": token_for(server, user, sid, s.context, s.jti)})
    h.reply(200, {"waiting": waiting})


def show(h: "Handler", user: str, sid: str, body: bytes) -> None:
    s = session(h.server, user, sid)
    h.reply(200, {"id": sid, "asker": s.owner, "notebook": json.loads(to_json(s.context)),
                  "running": running(s),
                  "stopped": h.server.agent.why_stop(s.context),
                  "pending": asked(s.context) if pending(s) else None})


def picture(h: "Handler", user: str, sid: str, body: bytes) -> None:
    """The notebook drawn as a sequence diagram (microagent.picture): SVG, every text escaped."""
    svg = draw(session(h.server, user, sid).context).svg.encode()
    h.send(200, {"Content-Type": "image/svg+xml; charset=utf-8", "Content-Length": len(svg),
                 "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
                 **API_HEADERS}, svg)


def messages(h: "Handler", user: str, sid: str, body: bytes) -> None:
    text = parse(body, {"text": str})["text"]
    if not (text.strip() and len(text) <= MAX_TEXT):
        raise Refused(400, f'"text" must hold 1 to {MAX_TEXT} characters, not only spaces')
    s = driving(h.server, user, sid)
    if s.owner != user:
        raise Refused(403, "only the person who asked in this session may write in it")
    h.server.needs(user, ASKS)
    last = s.context.last()
    if last is not None and last.kind == "verdict":
        raise Refused(409, f"the verdict on {last.tool} is saved but not carried out yet: "
                           "resume the session to carry it out")
    if last is not None and last.kind == "decision":
        raise Refused(409, f"this session waits for a verdict on {last.tool}: a new message "
                           "can go in once it is decided")
    Stream(h, user, sid, s).run(s.context.add(Message(USER, text)))


def resume(h: "Handler", user: str, sid: str, body: bytes) -> None:
    parse(body, {})
    s = driving(h.server, user, sid)
    last = s.context.last()
    theirs = last is not None and last.kind == "verdict" and last.name == user
    if s.owner != user and not theirs:  # a reviewer may carry out the verdict they gave
        raise Refused(403, "only the person who asked in this session may resume it")
    if not any(m.kind == "question" for m in s.context):
        raise Refused(409, "nothing to resume: send a message first")
    Stream(h, user, sid, s).run(s.context)


def approvals(h: "Handler", user: str, sid: str, body: bytes) -> None:
    data = parse(body, {"approval_token": str, "approve": bool}, {"reason": str, "args": dict})
    yes = data["approve"]
    if ("reason" if yes else "args") in data:  # a yes has no reason, a no no arguments
        raise Refused(400, 'a yes may carry "args" (edited arguments), a no a "reason"; '
                           "not the other way")
    server = h.server
    s = driving(server, user, sid)
    server.needs(user, APPROVES)
    if not server.may_approve(user, s.owner):
        raise Refused(403, "you asked for this yourself, so someone else approves it")
    try:
        claims = verify(data["approval_token"], server.secret, time.time())
    except ValueError as e:
        raise Refused(403, str(e)) from None
    decision = pending(s)
    if decision is None:
        raise Refused(409, "nothing here waits for a verdict any more: it was decided, "
                           "or the run moved on")
    if decision.tool not in server.agent.tools:
        raise Refused(409, no_longer(decision.tool))
    bound = {"sub": user, "sid": sid, "call": len(s.context) - 1,
             "args": args_hash(decision.args), "jti": s.jti}
    wrong = [claim for claim, value in bound.items() if claims.get(claim) != value]
    if wrong:
        raise Refused(403, f"the approval token is not for this {BOUND[wrong[0]]}")
    said = {"args": data.get("args")} if yes else {"reason": data.get("reason", "no reason given")}
    try:  # only the verdict is written here; the Stream carries it out once it is saved
        ctx = approval.verdict(s.context, server.agent.tools[decision.tool], yes, by=user, **said)
    except ValueError as e:  # edited arguments that don't fit the tool
        raise Refused(400, str(e)) from None
    v, asked = ctx.last(), f"asked by {s.owner}: "  # a name never holds ": " (see read_users)
    Stream(h, user, sid, s).run(ctx, audit=("approved", f"{asked}{v.tool} {v.args}") if yes
                                else ("denied", f"{asked}{v.tool}: {v.content}"))


TOP = {("GET", "me"): me, ("POST", "sessions"): create, ("GET", "approvals"): queue}
ROUTES = {("GET", ""): show, ("GET", "picture"): picture, ("POST", "messages"): messages,
          ("POST", "approvals"): approvals, ("POST", "resume"): resume}
NO_ROUTE = ("no such route; the routes are GET /me, POST /sessions, GET /approvals (your queue), "
            "GET /sessions/{id}, GET /sessions/{id}/picture, and POST /sessions/{id}/messages, "
            "/approvals or /resume")
BOUND = {"sub": "user", "sid": "session", "call": "tool call", "args": "tool call's arguments",
         "jti": "approval request (a newer token replaced it)"}


def session(server: "Server", user: str, sid: str) -> Session:
    """The session, for someone who may see it: the one who asks in it, or a reviewer it waits
    for or who ruled on it. To anyone else it answers exactly as a missing one does."""
    s = server.store.load(sid)
    if s is None or not (s.owner == user or server.reviews(user, s)):
        raise Refused(404, "no such session")
    return s


def running(s: Session) -> bool:
    return s.lease_until > time.time()


def limited(server: "Server", user: str) -> None:
    wait = server.limit(user)
    if wait:
        raise Refused(429, "too many runs: wait and try again", {"Retry-After": math.ceil(wait)})


def driving(server: "Server", user: str, sid: str) -> Session:
    """The session, for a request that drives its loop: rate-limited, never two runs at once."""
    limited(server, user)
    s = session(server, user, sid)
    if running(s):
        raise Refused(409, "a run is streaming on this session: wait for it to end")
    return s


# ----------------------------------------------------------------------------
# who may do what: the users, their roles, and who may approve whose request

NAME = re.compile(r"[A-Za-z0-9_.@-]{1,64}")  # a user's name, as the audit trail and verdicts say it


def read_users(users: dict) -> dict[str, tuple[str, frozenset]]:
    """The users file's JSON as name -> (bearer token, roles); a ValueError says what is wrong.

    Each name maps to {"token": "...", "roles": ["asks"]} (or ["approves"], or both), or
    to a bare token, which may do both.
    """
    if not isinstance(users, dict) or not users:
        raise ValueError("the users are a JSON object: name -> {\"token\": ..., \"roles\": [...]}")
    read = {}
    for name, user in users.items():
        if isinstance(user, str):  # a bare token may do both
            user = {"token": user, "roles": [ASKS, APPROVES]}
        token, roles = (user.get("token"), user.get("roles")) if isinstance(user, dict) else (None, None)
        if not NAME.fullmatch(name):
            raise ValueError(f"{name!r}: a user's name is 1 to 64 letters, digits, or _ . @ -")
        if not (isinstance(token, str) and len(token) >= 16):
            raise ValueError(f"{name}: a bearer token is a string of 16 characters or more")
        if not (isinstance(roles, list) and roles and set(roles) <= {ASKS, APPROVES}):
            raise ValueError(f'{name}: roles are a list of "{ASKS}", "{APPROVES}", or both')
        read[name] = (token, frozenset(roles))
    if len({token for token, _ in read.values()}) < len(read):
        raise ValueError("two users share a bearer token: each needs a token of their own")
    return read


# ----------------------------------------------------------------------------
# the server, and the HTTP plumbing: a request from the socket to a route and back

class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True  # a stuck client never keeps the process alive
    request_queue_size = 128  # connections waiting to be accepted (socketserver's 5 resets a crowd)

    def __init__(self, office, db: str, users: dict, secret: bytes, *, port: int = 0,
                 token_ttl: int = 600, lease: float = 30.0, timeout: float = 10.0,
                 rate: tuple[float, int] = (1.0, 20), approve_own: bool = False,
                 quiet: bool = False):
        """Serve `office(db) -> Agent` on 127.0.0.1:port to `users` (see read_users).

        approve_own: a user who asks and approves may approve their own requests too.
        """
        if not (isinstance(secret, bytes) and len(secret) >= 32):
            raise ValueError("the signing secret must be at least 32 random bytes "
                             "(secrets.token_bytes(32))")
        self.users = read_users(users)
        super().__init__(("127.0.0.1", port), Handler)
        self.store, self.secret, self.quiet = Store(db), secret, quiet
        self.token_ttl, self.lease, self.client_timeout = token_ttl, lease, timeout  # seconds
        self.rate = rate  # (per second, burst): runs a user may start
        self.approve_own = approve_own
        agent = office(db)
        # every tool hidden: a tool's exception text goes to this server's log, never to a client
        tools = [hiding(t, self.report, "the tool failed") for t in agent.tools.values()]
        self.agent = Agent(agent.policy, tools, agent.max_steps, name=agent.name)

    def limit(self, user: str) -> float:
        """Take one of the user's runs: 0.0 to go on, else seconds to wait (in the database,
        so the limit holds across processes)."""
        return self.store.take(user, *self.rate)

    def user(self, authorization: str) -> str:
        """Whose bearer token this is; 401 if nobody's."""
        if authorization.startswith("Bearer "):
            token = authorization.removeprefix("Bearer ").encode()
            for name, (known, _) in self.users.items():  # compare_digest: its time says nothing
                if hmac.compare_digest(token, known.encode()):
                    return name
        raise Refused(401, "send Authorization: Bearer <token>, with a token this server knows",
                      {"WWW-Authenticate": "Bearer"})

    def roles(self, user: str) -> frozenset:
        return self.users[user][1]

    def needs(self, user: str, role: str) -> None:
        """403 unless the user has the role."""
        if role not in self.roles(user):
            doing = "ask the agent" if role == ASKS else "approve what the agent asks to do"
            raise Refused(403, f"{user} may not {doing}: the users file does not give "
                               f"{user} the role \"{role}\"")

    def may_approve(self, user: str, asker: str) -> bool:
        """May `user` give the verdict on a request `asker` made? A reviewer, not the asker."""
        return APPROVES in self.roles(user) and (user != asker or self.approve_own)

    def reviews(self, user: str, s: Session) -> bool:
        """Is this someone else's session one the user may see as its reviewer: it waits for
        their verdict, or holds one they gave?"""
        if APPROVES not in self.roles(user):
            return False
        if pending(s) and self.may_approve(user, s.owner):
            return True
        return any(m.kind == "verdict" and m.name == user for m in s.context)

    def log(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)

    def report(self, error: Exception) -> None:
        self.log(f"{CALL.get('?')}: a tool failed: {type(error).__name__}: {error}")


# the page for the person who approves, beside this file: path -> (file, type)
PAGE = {"/": ("page.html", "text/html"), "/page.js": ("page.js", "text/javascript"),
        "/page.css": ("page.css", "text/css")}
# its script only from its file; blob: the run's picture, fetched with the token, as an image
CSP = ("default-src 'self'; script-src 'self'; img-src 'self' blob:; object-src 'none'; "
       "base-uri 'none'; frame-ancestors 'none'")


class Handler(http.server.BaseHTTPRequestHandler):
    server: Server
    disable_nagle_algorithm = True  # each event goes out as it is written, not 40 ms later

    def setup(self):
        self.timeout = self.server.client_timeout  # a client that stalls mid-request is dropped
        super().setup()
        # subtle: that timeout restarts with every byte, so a client that trickles its request
        # in a byte at a time would hold this thread for ever; the whole request has a deadline
        self.read, self.cut, self.cutting = False, False, threading.Lock()
        self.deadline = threading.Timer(self.server.client_timeout, self.hang_up)
        self.deadline.start()

    def hang_up(self) -> None:
        """The request is not whole in time: close the connection under the thread reading it."""
        with self.cutting:
            if self.read:  # just made it
                return
            self.cut = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def read_whole(self) -> None:
        """The request has been read: from now on the deadline can't cut it. TimeoutError if it
        did already: a shut socket reads as the end of the headers, and must not pass for it."""
        self.deadline.cancel()
        with self.cutting:
            if self.cut:
                raise TimeoutError
            self.read = True

    def finish(self):
        self.deadline.cancel()
        super().finish()

    def log_message(self, format, *args):
        self.server.log(f"{self.address_string()} {format % args}")

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def route(self, method: str) -> None:
        user = sid = None
        self.streaming = False  # once a stream has begun, a failure can only end it
        try:
            body = read_body(self) if method == "POST" else b""
            self.read_whole()  # the request is whole: what follows may take as long as the run
            where = self.path.split("?")[0]
            if method == "GET" and where in PAGE:  # no token: the page asks the person for one
                return self.page(*PAGE[where])
            user = self.server.user(self.headers.get("Authorization", ""))
            path = where.split("/")[1:]  # "/sessions/{id}/x" -> [sessions, id, x]
            if len(path) == 1 and (method, path[0]) in TOP:
                return TOP[method, path[0]](self, user, body)
            route = ROUTES.get((method, path[2] if len(path) == 3 else ""))
            if not (path[:1] == ["sessions"] and len(path) in (2, 3) and route):
                raise Refused(404, NO_ROUTE)
            sid = path[1]
            told = self.headers.get_all("traceparent") or []  # W3C: one header, or none is trusted
            with tracing(told[0] if len(told) == 1 else None):  # a traced run: a child of the caller's span
                route(self, user, sid, body)
        except Refused as r:
            if user is not None:  # a stranger's requests fill the log, never the audit trail
                self.server.store.audit(user, sid, f"refused {r.status}", r.message)
            self.reply(r.status, {"error": r.message}, r.headers)
        except TimeoutError:  # the request never came whole: drop this client; others are served
            self.server.log(f"{self.address_string()}: no whole request in "
                            f"{self.server.client_timeout}s; dropped")
            self.close_connection = True
        except Exception as e:  # a bug, or a notebook in the database that breaks the invariants
            self.server.log(f"{sid}: {type(e).__name__}: {e}")
            self.close_connection = True
            if not self.streaming:
                with contextlib.suppress(OSError):  # the client may be gone too
                    self.reply(500, {"error": "the server failed; the details went to its log"})

    def send(self, status: int, headers: dict, payload: bytes = b"") -> None:
        """The one place an answer is written: status, headers, then the payload."""
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(payload)

    def reply(self, status: int, data: dict, headers: dict | None = None) -> None:
        payload = json.dumps(data).encode()
        self.send(status, {"Content-Type": "application/json", "Content-Length": len(payload),
                           **API_HEADERS, **(headers or {})}, payload)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None):
        """What http.server refuses itself (a broken request line, an unknown method) is JSON too."""
        self.close_connection = True
        self.reply(code, {"error": message or self.responses.get(code, ("refused",))[0]})

    def page(self, name: str, kind: str) -> None:
        """A file of the page, with headers that let the browser run no script but its own file."""
        with open(os.path.join(os.path.dirname(__file__), name), "rb") as f:
            payload = f.read()
        self.send(200, {"Content-Type": f"{kind}; charset=utf-8", "Content-Length": len(payload),
                        "Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff"}, payload)

    def gone(self) -> bool:
        """Has the client closed its side? Its request was read whole, so a socket with
        something to read is at its end."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:  # reset by the client
            return True


# ----------------------------------------------------------------------------
# request hygiene: a whole body of known size, strict JSON, known fields

class Refused(Exception):
    """A request the server turns down: its status, and a message that says what to do."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def read_body(h: Handler) -> bytes:
    if "Transfer-Encoding" in h.headers:
        raise Refused(411, "send the body with a Content-Length, not chunked")
    sizes = h.headers.get_all("Content-Length", ["0"])
    if len(sizes) != 1 or not re.fullmatch("[0-9]{1,12}", sizes[0]):  # "²".isdigit() is True
        raise Refused(400, "send one Content-Length: a whole number of bytes")
    size = int(sizes[0])
    if size > MAX_BODY:
        h.rfile.read(min(size, 1 << 20))  # read some, so the client hears the answer
        raise Refused(413, f"the body is over {MAX_BODY} bytes")
    body = h.rfile.read(size)
    if len(body) < size:  # the connection closed (or was closed: too slow) before it was whole
        raise TimeoutError
    return body


def parse(body: bytes, required: dict, optional: dict | None = None) -> dict:
    """The request's JSON object, read strictly (microagent.tool.read_json: a key given
    twice, NaN, 1e999), no deeper than MAX_DEPTH, no lone surrogates, known fields only."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Refused(400, f"the body is not UTF-8 (byte {e.start + 1} is "
                           f"{body[e.start]:#04x}): send JSON text in UTF-8") from None
    try:
        data = read_json(text or "{}")
    except ValueError as e:
        raise Refused(400, f"the body is not valid JSON (one object, in UTF-8): {e}") from None
    _plain(data, 0)
    fields = {**required, **(optional or {})}  # name -> type
    if not isinstance(data, dict):
        raise Refused(400, f"the body must be a JSON object with {', '.join(fields) or 'no fields'}")
    for name in fields.keys() & data.keys():
        if type(data[name]) is not fields[name]:  # `is`, since True is an int in Python
            raise Refused(400, f'"{name}" must be a JSON {JSON_TYPES[fields[name]]}')
    missing, unknown = required.keys() - data.keys(), data.keys() - fields.keys()
    if missing or unknown:
        raise Refused(400, f"missing {sorted(missing)}, unknown {sorted(unknown)}: "
                           f"the fields are {list(fields)}")
    return data


JSON_TYPES = {str: "string", bool: "true or false", dict: "object"}


def _plain(value, depth: int) -> None:
    """Refuse JSON nested deeper than MAX_DEPTH, and strings that are not valid Unicode."""
    if depth > MAX_DEPTH:
        raise Refused(400, f"the JSON is nested deeper than {MAX_DEPTH} levels (objects and "
                           "lists inside one another): send it flatter")
    half = re.search(r"[\ud800-\udfff]", value) if isinstance(value, str) else None
    if half:  # JSON may write one ("\\ud800"); no UTF-8 can hold it, and nothing prints it
        raise Refused(400, f"the text holds a lone surrogate ({ascii(half.group())[1:-1]}), "
                           "which is not valid Unicode: send whole characters")
    if isinstance(value, dict):
        value = [*value, *value.values()]  # keys and values alike
    for item in value if isinstance(value, list) else ():
        _plain(item, depth + 1)


# ----------------------------------------------------------------------------
# the hosted refund office, and the command line

def refund_office(db: str, policy=support_policy) -> Agent:
    """microagent.demo's office, with a refund that waits for a human and pays once per call."""
    return support_agent(policy, refund=ledger_refund(db))


def ledger_refund(db: str) -> Tool:
    """The refund, written into a ledger in the database, keyed by the tool call's identity."""
    ledger = connect(db)  # the store's database: a sqlite file, or PostgreSQL
    ledger.schema(f"CREATE TABLE IF NOT EXISTS refunds (n {ledger.serial}, call TEXT NOT NULL UNIQUE, "
                  "order_id TEXT, amount DOUBLE PRECISION)")

    @as_tool(needs_approval=True)
    def issue_refund(order_id: str, amount: float) -> str | Message:
        """Refund an amount in dollars to the card the order was paid with."""
        call = CALL.get(None)
        if call is None:
            raise RuntimeError("the hosted refund runs where microagent.host.CALL is set "
                               "to the tool call's identity (the host sets it around each step)")
        if problem := refund_problem(amount):  # -500, or $0.001: nothing is booked
            return error_note("issue_refund", problem)
        if float(amount) != amount:  # 10**30 would be booked as 1000000000000000019884624838656
            return error_note("issue_refund", f"{amount} is more than the ledger can book "
                                              "exactly: refund it in parts")
        try:  # keyed by the tool call, so a call run again hands back its first receipt
            with ledger.transaction() as run:  # the booking and its receipt, as one
                run("INSERT INTO refunds (call, order_id, amount) VALUES (?, ?, ?) "
                    "ON CONFLICT (call) DO NOTHING", (call, order_id, float(amount)))
                [(n, paid)] = run("SELECT n, amount FROM refunds WHERE call = ?", (call,))[0]
        except Exception as e:  # the connection dropped, or the commit went unanswered
            raise Unsettled(f"{type(e).__name__}") from e
        return f"{dollars(paid)} refunded to the original card (receipt R{n})"
    return issue_refund


def llm_office(model: str, base_url: str, api_key: str | None = None):
    """The refund office with microagent.llm's brain, its words streamed as `thinking` events."""
    def office(db: str) -> Agent:
        brain = chat_policy(model, base_url, api_key=api_key, on_text=thinking, send=hardened(),
                            system="You answer customers' questions about orders and refunds.")
        return refund_office(db, policy=brain)
    return office


def write_new(path: str, data: bytes) -> None:
    """Write a new file that only its owner may read (0600); one that is there is left as it is."""
    with contextlib.suppress(FileExistsError):
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(data)


def secret_from(path: str) -> bytes:
    """The signing secret: $MICROAGENT_HOST_SECRET, else the file at `path` (made 0600 if missing)."""
    if os.environ.get("MICROAGENT_HOST_SECRET"):
        return os.environ["MICROAGENT_HOST_SECRET"].encode()
    write_new(path, secrets.token_bytes(32))
    with open(path, "rb") as f:
        return f.read()


FIRST_USERS = {"alice": [ASKS], "bob": [APPROVES]}  # the users file a first start writes


def users_from(path: str) -> dict:
    """The users in a JSON file (see read_users); a new file with alice, who asks, and bob,
    who approves, if it is missing."""
    made = [f'"{name}": ' + json.dumps({"token": secrets.token_urlsafe(24), "roles": roles})
            for name, roles in FIRST_USERS.items()]  # a user a line
    write_new(path, ("{\n " + ",\n ".join(made) + "\n}\n").encode())
    try:
        with open(path) as f:
            users = json.load(f)
        read_users(users)
    except ValueError as e:  # json's errors are ValueErrors too
        raise SystemExit(f"{path}: {e}") from None
    return users


def printable(value) -> str:
    """A value of the audit trail as one line: line breaks, controls and bidi marks escaped.

    >>> print(printable("no\\n2026 | bob | approved \\u202e97"))
    no\\n2026 | bob | approved \\u202e97
    """
    text = "-" if value is None else str(value)
    return "".join(ascii(c)[1:-1] if c == "\\" or unicodedata.category(c)[0] == "C"
                   or unicodedata.category(c) in ("Zl", "Zp") else c for c in text)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m microagent.host",
                                description=__doc__.splitlines()[0])
    p.add_argument("--db", default="microagent-host.db",
                   help="sessions, audit trail, refunds: a sqlite file, or a postgresql:// URL "
                        "(pip install '.[postgres]'; the password best in $PGPASSWORD)")
    p.add_argument("--users", default="microagent-users.json",
                   help='JSON: user name -> {"token": ..., "roles": ["asks", "approves"]}')
    p.add_argument("--approve-own", action="store_true",
                   help="a user who asks and approves may approve their own requests")
    p.add_argument("--secret-file", help="the signing secret (default: the db file's name + .secret, "
                   "or microagent-host.secret for PostgreSQL); "
                   "$MICROAGENT_HOST_SECRET wins over it")
    p.add_argument("--port", type=int, default=8000, help="0: any free port")
    p.add_argument("--office", help="module:function, a function (db) -> Agent to host instead")
    p.add_argument("--model", help="the refund office with microagent.llm's brain: the model's name")
    p.add_argument("--base-url", default="http://localhost:11434/v1", help="with --model: the server")
    p.add_argument("--api-key-env", help="with --model: the environment variable with the API key")
    p.add_argument("--lease", type=float, default=30.0, help="seconds a killed server keeps a session")
    p.add_argument("--token-ttl", type=int, default=600, help="seconds an approval token lives")
    p.add_argument("--rate", type=float, nargs=2, default=(1.0, 20), metavar=("PER_SECOND", "BURST"),
                   help="runs a user may start: a burst, then so many a second")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds a client may take to send a request")
    p.add_argument("--audit", action="store_true", help="print the audit trail and exit")
    o = p.parse_args(argv)
    if o.audit:
        for row in Store(o.db).trail():
            print(" | ".join(printable(v) for v in row))
        return
    office = refund_office
    if o.office:
        module, _, function = o.office.partition(":")
        office = getattr(importlib.import_module(module), function)
    elif o.model:
        key = os.environ.get(o.api_key_env) if o.api_key_env else None
        if o.api_key_env and not key:
            raise SystemExit(f"--api-key-env {o.api_key_env}: that environment variable is not set")
        office = llm_office(o.model, o.base_url, api_key=key)
    secret_file = o.secret_file or ("microagent-host.secret" if o.db.startswith(SERVERS) else o.db + ".secret")
    try:
        server = Server(office, o.db, users_from(o.users), secret_from(secret_file),
                        port=o.port, token_ttl=o.token_ttl, lease=o.lease, timeout=o.timeout,
                        rate=(o.rate[0], int(o.rate[1])), approve_own=o.approve_own)
    except (ConnectionError, PermissionError, ImportError, ValueError) as e:  # the database
        raise SystemExit(f"python -m microagent.host: {e}") from None
    print(f"serving on http://127.0.0.1:{server.server_address[1]} (database {shown(o.db)}); "
          f"the users' bearer tokens are in {o.users}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
