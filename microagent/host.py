"""Hosting: the loop behind HTTP, one session per notebook, approvals as signed tokens.

    python -m microagent.host                  # the refund office on http://127.0.0.1:8000
    python -m microagent.host --audit          # print the audit trail and exit

A client talks to the office over plain HTTP (standard library only):

    POST /sessions                    -> 201 {"id": ...}, a session the caller owns
    POST /sessions/{id}/messages      {"text": ...}: runs the agent, streams one event per Step
    POST /sessions/{id}/approvals     {"approval_token", "approve", "reason"?, "args"?}: the verdict, then the rest
    POST /sessions/{id}/resume        {}: goes on where the notebook stopped (a crash, a cancel, an expired token)
    GET  /sessions/{id}               -> the notebook (what Context.from_json reads) and what is pending
    GET  /sessions/{id}/picture       -> the notebook drawn as a sequence diagram (SVG, microagent.picture)
    GET  /                            -> the page for the person who approves (microagent/page.html)

The stream is server-sent events, one per Step: `thinking` (a piece of the
brain's text), `result` (a tool's note, `error` true for an error note), and a
last one that says why the run stopped: `done`, `approval_required` (with a
signed token), `out_of_steps`, `cancelled` or `error`.

The notebook is the session's whole state. A row in sqlite holds it with its
owner and a version number (microagent.sessions: the store, and the tokens);
every write is one `UPDATE ... WHERE version = ?`, so a writer that read an
older version loses, in this process or another one.
Each Step's notebook is committed before its event is sent. A run holds a lease
on its session (`lease_until`), renewed at every step, so no two runs write one
notebook; a killed server's lease runs out and the session can go on.

Tools run at least once: a tool that ran in a process that died before its
result was committed runs again on resume. The hosted refund is safe anyway:
it is keyed by the tool call's identity (CALL: "<session>/<decision index>")
and a repeat hands back the first receipt.

What it leaves out: real identity providers (users are bearer tokens in a JSON
file), TLS (serve it behind a proxy that does it), HTTP keep-alive, and a rate
limit shared between processes (each process keeps its own, in memory).
"""

import argparse
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
import sqlite3
import sys
import threading
import time
from collections import Counter

from microagent.agent import DONE, OUT_OF_STEPS, PAUSED, Agent
from microagent.approval import approve, deny
from microagent.context import Context
from microagent.demo import check_policy, look_up_order, support_policy
from microagent.message import SYSTEM, USER, Message
from microagent.picture import draw
from microagent.retry import hiding
from microagent.sessions import Session, Store, digest, sign, verify
from microagent.schema import as_tool
from microagent.tool import final_answer

CALL = contextvars.ContextVar("CALL")  # "<session>/<index of the decision>" while a tool runs
MAX_BODY, MAX_TEXT, MAX_DEPTH = 64 * 1024, 4000, 8  # bytes in a request; characters in a message; JSON nesting

# ----------------------------------------------------------------------------
# requests: strict JSON, known fields only

class Refused(Exception):
    """A request the server turns down: its status, and a message that says what to do."""
    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def parse(body: bytes, required: dict, optional: dict | None = None) -> dict:
    """The request's JSON object, checked: no duplicate keys, deep nesting or lone surrogates."""
    def unique(pairs):
        data = dict(pairs)
        if len(data) != len(pairs):  # found in one pass, however many keys a hostile body holds
            twice = next(key for key, n in Counter(key for key, _ in pairs).items() if n > 1)
            raise ValueError(f"the key {twice!r} appears twice")
        return data

    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")
    try:
        data = json.loads(body.decode("utf-8") or "{}", object_pairs_hook=unique, parse_constant=refuse)
        _plain(data, 0)
    except (ValueError, RecursionError) as e:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise Refused(400, f"the body is not valid JSON (one object, in UTF-8): {e}") from None
    fields = {**required, **(optional or {})}  # name -> type
    if not isinstance(data, dict):
        raise Refused(400, f"the body must be a JSON object with {', '.join(fields) or 'no fields'}")
    for name in fields.keys() & data.keys():
        if type(data[name]) is not fields[name]:  # subtle: `is`, since True is an int in Python
            raise Refused(400, f'"{name}" must be a JSON {_JSON[fields[name]]}')
    missing, unknown = required.keys() - data.keys(), data.keys() - fields.keys()
    if missing or unknown:
        raise Refused(400, f"missing {sorted(missing)}, unknown {sorted(unknown)}: the fields are {list(fields)}")
    return data


_JSON = {str: "string", bool: "true or false", dict: "object"}


def _plain(value, depth: int) -> None:
    """Refuse JSON nested deeper than MAX_DEPTH, and strings that are not valid Unicode."""
    if depth > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        value.encode("utf-8")  # a lone surrogate ("\\ud800") raises here
    if isinstance(value, dict):
        value = [*value, *value.values()]  # keys and values alike
    for item in value if isinstance(value, list) else ():
        _plain(item, depth + 1)


def rate_limit(per_second: float, burst: int):
    """A token bucket per user, in this process's memory: take(user) -> seconds to wait (0: go)."""
    buckets, lock = {}, threading.Lock()  # user -> (tokens left, when counted)

    def take(user: str) -> float:
        with lock:
            now = time.monotonic()
            left, then = buckets.get(user, (burst, now))
            left = min(burst, left + (now - then) * per_second)
            if left < 1:
                return (1 - left) / per_second
            buckets[user] = (left - 1, now)
            return 0.0
    return take


# ----------------------------------------------------------------------------
# the server: a request from the socket to the loop and back

class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True  # a stuck client never keeps the process alive
    request_queue_size = 128  # connections waiting to be accepted (socketserver's 5 resets a crowd)

    def __init__(self, office, db: str, users: dict[str, str], secret: bytes, *, port: int = 0,
                 token_ttl: int = 600, lease: float = 30.0, timeout: float = 10.0,
                 rate: tuple[float, int] = (1.0, 20), quiet: bool = False):
        """Serve `office(db) -> Agent` on 127.0.0.1:port to `users` (name -> bearer token)."""
        if not (isinstance(secret, bytes) and len(secret) >= 32):
            raise ValueError("the signing secret must be at least 32 random bytes (secrets.token_bytes(32))")
        super().__init__(("127.0.0.1", port), Handler)
        self.store, self.users, self.secret, self.quiet = Store(db), users, secret, quiet
        self.token_ttl, self.lease, self.client_timeout = token_ttl, lease, timeout  # seconds
        self.limit = rate_limit(*rate)
        agent = office(db)
        # every tool hidden: a tool's exception text goes to this server's log, never to a client
        tools = [hiding(t, self.report, "the tool failed") for t in agent.tools.values()]
        self.agent = Agent(agent.policy, tools, name=agent.name, description=agent.description,
                           system=agent.system, max_steps=agent.max_steps)

    def user(self, authorization: str) -> str:
        """Whose bearer token this is; 401 if nobody's."""
        token = authorization.removeprefix("Bearer ").encode()
        for name, known in self.users.items():  # compare_digest: the time taken says nothing of the token
            if authorization.startswith("Bearer ") and hmac.compare_digest(token, known.encode()):
                return name
        raise Refused(401, "send Authorization: Bearer <token>, with a token this server knows",
                      {"WWW-Authenticate": "Bearer"})

    def log(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)

    def report(self, error: Exception) -> None:
        self.log(f"{CALL.get('?')}: a tool failed: {type(error).__name__}: {error}")


# the page for the person who approves, beside this file: path -> (file, type); its script only from its file
PAGE = {"/": ("page.html", "text/html"), "/page.js": ("page.js", "text/javascript"),
        "/page.css": ("page.css", "text/css")}
CSP = ("default-src 'self'; script-src 'self'; img-src 'self' blob:; object-src 'none'; base-uri 'none'; "
       "frame-ancestors 'none'")  # blob: the run's picture, fetched with the token and shown as an image


class Handler(http.server.BaseHTTPRequestHandler):
    server: Server
    disable_nagle_algorithm = True  # each event goes out as it is written, not 40 ms later

    def setup(self):
        self.timeout = self.server.client_timeout  # a client that stalls mid-request is dropped
        super().setup()
        # subtle: the timeout above restarts with every byte, so a client that trickles its request
        # in, a byte at a time, would hold this thread for ever; the whole request has a deadline too
        self.deadline = threading.Timer(self.server.client_timeout, self.hang_up)
        self.deadline.start()

    def hang_up(self) -> None:
        """The request is not whole in time: close the connection under the thread reading it."""
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

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
            body = self.body() if method == "POST" else b""
            self.deadline.cancel()  # the request is whole: what follows may take as long as the run
            if method == "GET" and self.path in PAGE:  # the page needs no token: it asks the person for one
                return self.page(*PAGE[self.path])
            user = self.server.user(self.headers.get("Authorization", ""))
            path = self.path.split("?")[0].split("/")[1:]  # "/sessions/{id}/messages" -> [sessions, id, messages]
            if (method, path) == ("POST", ["sessions"]):
                return self.create(user, body)
            routes = {("GET", ""): self.show, ("GET", "picture"): self.picture, ("POST", "messages"): self.messages,
                      ("POST", "approvals"): self.approvals, ("POST", "resume"): self.resume}
            handler = routes.get((method, path[2] if len(path) == 3 else ""))
            if not (path[:1] == ["sessions"] and len(path) in (2, 3) and handler):
                raise Refused(404, "no such route: the routes are in the docstring of microagent/host.py")
            sid = path[1]
            handler(user, sid, body)
        except Refused as r:
            self.server.store.audit(user, sid, f"refused {r.status}", r.message)
            self.reply(r.status, {"error": r.message}, r.headers)
        except TimeoutError:  # the body never came: drop this client, the others are served meanwhile
            self.server.store.audit(user, sid, "timed out", f"no whole request in {self.server.client_timeout}s")
            self.close_connection = True
        except Exception as e:  # a bug, or a notebook in the database that breaks the invariants
            self.server.log(f"{sid}: {type(e).__name__}: {e}")
            self.close_connection = True
            if not self.streaming:
                self.reply(500, {"error": "the server failed; the details went to its log"})

    def body(self) -> bytes:
        if "Transfer-Encoding" in self.headers:
            raise Refused(411, "send the body with a Content-Length, not chunked")
        sizes = self.headers.get_all("Content-Length", ["0"])
        if len(sizes) != 1 or not re.fullmatch("[0-9]{1,12}", sizes[0]):  # "²".isdigit() is True
            raise Refused(400, "send one Content-Length: a whole number of bytes")
        size = int(sizes[0])
        if size > MAX_BODY:
            self.rfile.read(min(size, 1 << 20))  # read some, so the client hears the answer
            raise Refused(413, f"the body is over {MAX_BODY} bytes")
        body = self.rfile.read(size)
        if len(body) < size:  # the connection closed (or was closed: too slow) before the body was whole
            raise TimeoutError
        return body

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """What http.server refuses itself (a broken request line, an unknown method) is JSON too."""
        self.close_connection = True
        self.reply(code, {"error": message or self.responses.get(code, ("refused",))[0]})

    def page(self, name: str, kind: str) -> None:
        """A file of the page, with headers that let the browser run no script but its own file."""
        with open(os.path.join(os.path.dirname(__file__), name), "rb") as f:
            payload = f.read()
        self.send_response(200)
        for header, value in {"Content-Type": f"{kind}; charset=utf-8", "Content-Length": len(payload),
                              "Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff"}.items():
            self.send_header(header, str(value))
        self.end_headers()
        self.wfile.write(payload)

    def reply(self, status: int, data: dict, headers: dict | None = None) -> None:
        payload = json.dumps(data).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", "Content-Length": len(payload),
                            **(headers or {})}.items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(payload)

    # -- the routes

    def create(self, user: str, body: bytes) -> None:
        parse(body, {})
        sid, system = secrets.token_urlsafe(16), self.server.agent.system  # unguessable
        self.server.store.create(sid, user, Context(() if system is None else (Message(SYSTEM, system),)))
        self.server.store.audit(user, sid, "created")
        self.reply(201, {"id": sid})

    def show(self, user: str, sid: str, body: bytes) -> None:
        s = self.session(user, sid)
        pending = s.context.pending if s.jti else None
        self.reply(200, {"id": sid, "notebook": json.loads(s.context.to_json()), "running": self.running(s),
                         "pending": pending and {"tool": pending.tool, "args": json.loads(pending.args),
                                                 "call": len(s.context) - 1}})

    def picture(self, user: str, sid: str, body: bytes) -> None:
        """The notebook drawn as a sequence diagram (microagent.picture): SVG, its every text escaped."""
        payload = draw(self.session(user, sid).context).svg.encode()
        self.send_response(200)
        for header, value in {"Content-Type": "image/svg+xml; charset=utf-8", "Content-Length": len(payload),
                              "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'",
                              "X-Content-Type-Options": "nosniff"}.items():
            self.send_header(header, str(value))
        self.end_headers()
        self.wfile.write(payload)

    def messages(self, user: str, sid: str, body: bytes) -> None:
        text = parse(body, {"text": str})["text"]
        if not (text.strip() and len(text) <= MAX_TEXT):
            raise Refused(400, f'"text" must hold 1 to {MAX_TEXT} characters, not only spaces')
        s = self.driving(user, sid)
        if s.context.pending is not None:
            raise Refused(409, "this session waits for a verdict: POST /approvals (or /resume for a new token)")
        self.stream(user, sid, s.context.add(Message(USER, text)), s.version)

    def resume(self, user: str, sid: str, body: bytes) -> None:
        parse(body, {})
        s = self.driving(user, sid)
        if not any(m.is_question for m in s.context):
            raise Refused(409, "nothing to resume: send a message first")
        self.stream(user, sid, s.context, s.version)

    def approvals(self, user: str, sid: str, body: bytes) -> None:
        data = parse(body, {"approval_token": str, "approve": bool}, {"reason": str, "args": dict})
        if ("reason" if data["approve"] else "args") in data:  # a yes has no reason, a no no arguments
            raise Refused(400, 'a yes may carry "args" (edited arguments), a no a "reason"; not the other way')
        s = self.driving(user, sid)
        try:
            claims = verify(data["approval_token"], self.server.secret, time.time())
        except ValueError as e:
            raise Refused(403, str(e)) from None
        pending = s.context.pending
        if s.jti is None or pending is not s.context.last():
            raise Refused(409, "nothing waits for approval on this session: the token was used, or the run moved on")
        bound = {"sub": user, "sid": sid, "call": len(s.context) - 1, "args": digest(pending.args), "jti": s.jti}
        wrong = [claim for claim, value in bound.items() if claims.get(claim) != value]
        if wrong:
            raise Refused(403, f"the approval token is not for this {_BOUND[wrong[0]]}")
        tool = self.server.agent.tools[pending.tool]
        try:
            ctx = approve(s.context, by=user, args=data.get("args"), tool=tool) if data["approve"] \
                else deny(s.context, data.get("reason", "no reason given"), by=user, tool=tool)
        except ValueError as e:  # edited arguments that don't fit the tool
            raise Refused(400, str(e)) from None
        verdict = ctx.last()
        self.stream(user, sid, ctx, s.version, audit=("approved", f"{verdict.tool} {verdict.args}") if
                    data["approve"] else ("denied", f"{verdict.tool}: {verdict.content}"))

    # -- driving the loop

    def session(self, user: str, sid: str):
        s = self.server.store.load(sid)
        if s is None or s.owner != user:  # another user's session looks exactly like a missing one
            raise Refused(404, "no such session")
        return s

    def running(self, s: Session) -> bool:
        return s.lease_until > time.time()

    def driving(self, user: str, sid: str) -> Session:
        """The session, for a request that drives its loop: rate-limited, and never two runs at once."""
        wait = self.server.limit(user)
        if wait:
            raise Refused(429, "too many runs: wait and try again", {"Retry-After": math.ceil(wait)})
        s = self.session(user, sid)
        if self.running(s):
            raise Refused(409, "a run is streaming on this session: wait for it to end")
        return s

    def stream(self, user: str, sid: str, ctx: Context, version: int, audit=None) -> None:
        """Take the session, then drive the loop: commit each Step's notebook, then send its event."""
        store, cancel = self.server.store, threading.Event()
        version = store.save(sid, ctx, version, lease_until=time.time() + self.server.lease)
        if version is None:  # a verdict or a run got in between our load and this save
            raise Refused(409, "another request changed this session first: load it again")
        if audit:
            store.audit(user, sid, *audit)
        self.send_response(200)
        self.streaming = True
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        steps = self.server.agent.steps(context=ctx, cancel=cancel)
        while True:
            if self.gone():
                cancel.set()  # the client is gone: nothing new starts, what is done is kept
            # the tool call's identity: the index of the decision that the next step settles or makes
            call = len(ctx) - 2 if ctx.pending is not None else len(ctx)
            here = CALL.set(f"{sid}/{call}")
            try:
                step = next(steps)
            except Exception as e:  # the brain failed to think (a bug, a model server that is down)
                self.server.log(f"{sid}: the brain failed: {type(e).__name__}: {e}")
                store.audit(user, sid, "brain failed", type(e).__name__)
                store.save(sid, ctx, version)  # lets go of the session; every step so far is kept
                self.event("error", {"error": "the brain failed; the notebook keeps every step so far"})
                return
            finally:
                CALL.reset(here)
            jti = secrets.token_urlsafe(16) if step.stop == PAUSED else None
            if step.context is not ctx or step.stop:
                ctx, until = step.context, 0.0 if step.stop else time.time() + self.server.lease
                version = store.save(sid, ctx, version, lease_until=until, jti=jti)
                if version is None:  # our lease ran out and another run took the session over
                    steps.close()
                    self.event("error", {"error": "the session was taken over by another run; stopped"})
                    return
            if step.result is not None:
                store.audit(user, sid, "tool call", f"{step.result.name} (call {call})"
                            + (" failed" if step.result.error else ""))
            name, data = self.describe(user, sid, step, jti)
            if name and not self.event(name, data):
                cancel.set()  # the client is gone: nothing new starts, what is done is kept
            if step.stop:
                return

    def describe(self, user: str, sid: str, step, jti: str | None) -> tuple[str | None, dict]:
        """The event for a Step: its name and its data."""
        ctx = step.context
        if step.stop == PAUSED:
            decision, now = ctx.last(), int(time.time())
            claims = {"sub": user, "sid": sid, "call": len(ctx) - 1, "args": digest(decision.args), "jti": jti,
                      "iat": now, "exp": now + self.server.token_ttl}
            self.server.store.audit(user, sid, "approval requested", f"{decision.tool} {decision.args}")
            return "approval_required", {"tool": decision.tool, "args": json.loads(decision.args),
                                         "call": len(ctx) - 1, "approval_token": sign(claims, self.server.secret)}
        if step.stop == DONE:
            return "done", {"answer": ctx.last().content}
        if step.stop == OUT_OF_STEPS:
            return "out_of_steps", {"note": ctx.last().content}
        if step.stop is not None:
            return "cancelled", {}
        if step.result is not None:
            ran = ctx[-2].args if ctx[-2].is_verdict else step.action.args  # what a human approved, if one did
            return "result", {"tool": step.result.name, "args": ran, "reasoning": step.action.reasoning,
                              "content": step.result.content, "error": step.result.error, "at": len(ctx) - 1}
        return ("thinking", {"text": step.event}) if isinstance(step.event, str) else (None, {})

    def gone(self) -> bool:
        """Has the client closed its side? Its request is whole, so a socket with something to read is at its end."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:  # reset by the client
            return True

    def event(self, name: str, data: dict) -> bool:
        """Send one server-sent event; False if the client has gone."""
        try:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            return True
        except OSError:
            return False


_BOUND = {"sub": "user", "sid": "session", "call": "tool call", "args": "tool call's arguments",
          "jti": "approval request (a newer token replaced it)"}


# ----------------------------------------------------------------------------
# the hosted refund office, and the command line

def refund_office(db: str, policy=support_policy) -> Agent:
    """The refund office of microagent.demo: the refund waits for a human, and pays once per tool call."""
    ledger = sqlite3.connect(db, timeout=30, isolation_level=None, check_same_thread=False)
    ledger.execute("CREATE TABLE IF NOT EXISTS refunds (call TEXT PRIMARY KEY, order_id TEXT, amount REAL)")
    lock = threading.Lock()  # the server's threads share the connection, one statement pair at a time

    @as_tool(needs_approval=True)
    def issue_refund(order_id: str, amount: float) -> str:
        """Refund an amount in dollars to the card the order was paid with."""
        # subtle: keyed by the tool call, so a call run again after a crash hands back its first receipt
        with lock:
            ledger.execute("INSERT OR IGNORE INTO refunds VALUES (?, ?, ?)", (CALL.get(), order_id, amount))
            [(n, paid)] = ledger.execute("SELECT rowid, amount FROM refunds WHERE call = ?", (CALL.get(),)).fetchall()
        return f"${paid:g} refunded to the original card (receipt R{n})"
    return Agent(policy, [look_up_order, check_policy, issue_refund, final_answer], name="support",
                 description="answers customers' questions about orders and refunds")


def secret_from(path: str) -> bytes:
    """The signing secret: $MICROAGENT_HOST_SECRET, else the file at `path` (made 0600 if missing)."""
    if os.environ.get("MICROAGENT_HOST_SECRET"):
        return os.environ["MICROAGENT_HOST_SECRET"].encode()
    try:
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(secrets.token_bytes(32))
    except FileExistsError:
        pass
    with open(path, "rb") as f:
        return f.read()


def users_from(path: str) -> dict[str, str]:
    """The users (name -> bearer token) in a JSON file; a new file with alice and bob if missing."""
    try:
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
            json.dump({name: secrets.token_urlsafe(24) for name in ("alice", "bob")}, f, indent=1)
    except FileExistsError:
        pass
    with open(path) as f:
        users = json.load(f)
    if not (isinstance(users, dict) and all(isinstance(v, str) and len(v) >= 16 for v in users.values())):
        raise SystemExit(f"{path} must be a JSON object: user name -> bearer token (16 characters or more)")
    return users


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m microagent.host", description=__doc__.splitlines()[0])
    p.add_argument("--db", default="microagent-host.db", help="the sqlite file: sessions, audit trail, refunds")
    p.add_argument("--users", default="microagent-users.json", help="JSON: user name -> bearer token")
    p.add_argument("--secret-file", help="the signing secret (default: the db's name + .secret); "
                   "$MICROAGENT_HOST_SECRET wins over it")
    p.add_argument("--port", type=int, default=8000, help="0: any free port")
    p.add_argument("--office", help="module:function, a function (db path) -> Agent to host instead")
    p.add_argument("--model", help="the refund office with microagent.llm's brain: the model's name")
    p.add_argument("--base-url", default="http://localhost:11434/v1", help="with --model: the chat server")
    p.add_argument("--api-key-env", help="with --model: the environment variable that holds the API key")
    p.add_argument("--lease", type=float, default=30.0, help="seconds a killed server keeps a session")
    p.add_argument("--token-ttl", type=int, default=600, help="seconds an approval token lives")
    p.add_argument("--rate", type=float, nargs=2, default=(1.0, 20), metavar=("PER_SECOND", "BURST"),
                   help="runs a user may start: a burst, then so many a second")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds a client may take to send a request")
    p.add_argument("--audit", action="store_true", help="print the audit trail and exit")
    o = p.parse_args(argv)
    if o.audit:
        for row in Store(o.db).trail():
            print(" | ".join("-" if v is None else str(v) for v in row))
        return
    office = refund_office
    if o.office:
        module, _, function = o.office.partition(":")
        office = getattr(importlib.import_module(module), function)
    elif o.model:
        from microagent.llm import chat_policy  # only here: urllib is loaded only when a model is asked for

        def office(db):
            return refund_office(db, policy=chat_policy(o.model, o.base_url, api_key_env=o.api_key_env))
    server = Server(office, o.db, users_from(o.users), secret_from(o.secret_file or o.db + ".secret"),
                    port=o.port, token_ttl=o.token_ttl, lease=o.lease, timeout=o.timeout,
                    rate=(o.rate[0], int(o.rate[1])))
    print(f"serving on http://127.0.0.1:{server.server_address[1]} (database {o.db}); "
          f"the users' bearer tokens are in {o.users}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    # subtle: `python -m microagent.host` runs this file as __main__, a second copy of the module.
    # An office that imports microagent.host must see the CALL the server sets, so run that copy.
    importlib.import_module("microagent.host").main()
