"""The routes: a function each, named by its method and what it does.

Each takes (handler, user, body), and a session's routes the session id before
the body. The routes that start a run (a message, a verdict, a resume) take the
session through `session_to_run`: one of the user's runs from their budget, and
never two runs on one session at once; each may say what its run does when its
client leaves (`on_disconnect`). The events route is in follow.py. The table at
the end maps a method and a path to its route; README.md beside this file has
the protocol.
"""

import json
import math
import secrets
import time

from microagent import approval
from microagent.context import Context
from microagent.host.events import asked, no_longer, pending, token_for
from microagent.host.follow import events_token, get_events, is_running, session_for
from microagent.host.request import API_HEADERS, MAX_TEXT, Refused, read_fields
from microagent.host.store import Session
from microagent.host.stream import Stream
from microagent.host.tokens import args_hash, verify
from microagent.host.users import APPROVES, ASKS
from microagent.message import USER, Message
from microagent.picture import draw
from microagent.saving import to_json


def get_me(h, user: str, body: bytes) -> None:
    """Who the bearer token says you are, and what you may do."""
    h.reply(200, {"user": user, "roles": sorted(h.server.users.roles(user)),
                  "approves_own": h.server.users.approve_own})


def post_session(h, user: str, body: bytes) -> None:
    """A new session, asked in by this user: its id."""
    read_fields(body, {})
    h.server.users.needs(user, ASKS)
    take_a_run(h.server, user)
    sid = secrets.token_urlsafe(16)  # 128 random bits: unguessable
    h.server.store.create(sid, user, Context())
    h.server.store.audit(user, sid, "created")
    h.reply(201, {"id": sid})


def get_queue(h, user: str, body: bytes) -> None:
    """The approver's queue: every decision that waits for a verdict this user may give,
    in full, each with a token bound to this user."""
    server = h.server
    server.users.needs(user, APPROVES)
    waiting = []
    for sid in server.store.waiting():
        try:
            s = server.store.load(sid)
        except ValueError as e:  # a notebook broken in the database: never shown or run
            server.log(f"{sid}: left out of the queue: {e}")
            continue
        decision = s and pending(s)
        if not decision or not server.users.may_approve(user, s.asker) \
                or decision.tool not in server.agent.tools:
            continue
        question = next(m.content for m in reversed(s.context) if m.kind == "question")
        waiting.append({"session": sid, "asker": s.asker, "question": question,
                        **asked(s.context),
                        "approval_token": token_for(server, user, sid, s.context, s.jti)})
    h.reply(200, {"waiting": waiting})


def get_session(h, user: str, sid: str, body: bytes) -> None:
    """The session: who asked, its notebook, and whether it runs, stopped, or waits."""
    s = session_for(h.server, user, sid)
    h.reply(200, {"id": sid, "asker": s.asker, "notebook": json.loads(to_json(s.context)),
                  "running": is_running(s),
                  "stopped": h.server.agent.why_stop(s.context),
                  "pending": asked(s.context) if pending(s) else None,
                  "events_token": events_token(h.server, user, sid)})


def get_picture(h, user: str, sid: str, body: bytes) -> None:
    """The notebook drawn as a sequence diagram (microagent.picture): SVG, each text
    escaped."""
    svg = draw(session_for(h.server, user, sid).context).svg.encode()
    h.send(200, {"Content-Type": "image/svg+xml; charset=utf-8",
                 "Content-Length": len(svg), "Content-Security-Policy": PICTURE_CSP,
                 **API_HEADERS}, svg)


PICTURE_CSP = "default-src 'none'; style-src 'unsafe-inline'"  # the SVG runs nothing


def post_message(h, user: str, sid: str, body: bytes) -> None:
    """The asker's next message, and the run it starts."""
    data = read_fields(body, {"text": str}, LEAVING)
    text = data["text"]
    if not (text.strip() and len(text) <= MAX_TEXT):
        raise Refused(400, f'"text" must hold 1 to {MAX_TEXT} characters, not only '
                           "spaces")
    s = session_to_run(h.server, user, sid)
    if s.asker != user:
        raise Refused(403, "only the person who asked in this session may write in it")
    h.server.users.needs(user, ASKS)
    last = s.context.last()
    if last is not None and last.kind == "verdict":
        raise Refused(409, f"the verdict on {last.tool} is saved but not carried out "
                           "yet: resume the session to carry it out")
    if last is not None and last.kind == "decision":
        raise Refused(409, f"this session waits for a verdict on {last.tool}: a new "
                           "message can go in once it is decided")
    Stream(h, user, sid, s, leaving(data)).run(s.context.add(Message(USER, text)))


def post_resume(h, user: str, sid: str, body: bytes) -> None:
    """The run again from where it stopped: a verdict carried out, or the loop on."""
    data = read_fields(body, {}, LEAVING)
    s = session_to_run(h.server, user, sid)
    last = s.context.last()
    theirs = last is not None and last.kind == "verdict" and last.name == user
    if s.asker != user and not theirs:  # an approver may carry out the verdict they gave
        raise Refused(403, "only the person who asked in this session may resume it")
    if not any(m.kind == "question" for m in s.context):
        raise Refused(409, "nothing to resume: send a message first")
    Stream(h, user, sid, s, leaving(data)).run(s.context)


def post_verdict(h, user: str, sid: str, body: bytes) -> None:
    """An approver's yes or no, with the token made out to them; the run carries
    it out."""
    data = read_fields(body, {"approval_token": str, "approve": bool},
                       {"reason": str, "args": dict, **LEAVING})
    yes = data["approve"]
    if ("reason" if yes else "args") in data:  # a yes has no reason, a no no arguments
        raise Refused(400, 'a yes may carry "args" (edited arguments), a no a "reason"; '
                           "not the other way")
    server = h.server
    s = session_to_run(server, user, sid)
    server.users.needs(user, APPROVES)
    if not server.users.may_approve(user, s.asker):
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
    said = {"args": data.get("args")} if yes \
        else {"reason": data.get("reason", "no reason given")}
    tool = server.agent.tools[decision.tool]
    try:  # only the verdict is written here; the Stream carries it out once it is saved
        ctx = approval.verdict(s.context, tool, yes, by=user, **said)
    except ValueError as e:  # edited arguments that don't fit the tool
        raise Refused(400, str(e)) from None
    v, whose = ctx.last(), f"asked by {s.asker}: "  # no name holds ": " (see read_users)
    audit = ("approved", f"{whose}{v.tool} {v.args}") if yes \
        else ("denied", f"{whose}{v.tool}: {v.content}")
    Stream(h, user, sid, s, leaving(data)).run(ctx, audit=audit)


def post_cancel(h, user: str, sid: str, body: bytes) -> None:
    """The asker stops the run on their session, in whichever process it runs: heard
    between steps, and inside a model's reply."""
    read_fields(body, {})
    if not stop_run(h.server, user, sid, session_for(h.server, user, sid)):
        raise Refused(409, "no run is going on in this session: nothing to cancel")
    h.reply(202, {"cancelling": sid})


def stop_run(server, user: str, sid: str, s: Session) -> bool:
    """Ask the run on the asker's session to stop, wherever it runs (False: none runs)."""
    if s.asker != user:
        raise Refused(403, "only the person who asked in this session may cancel its run")
    if not server.store.cancel(sid):
        return False
    run = server.runs.get(sid)
    if run is not None:  # in this process: heard at once, not only at its next commit
        run.cancel.set()
    server.store.audit(user, sid, "cancel asked")
    return True


LEAVING = {"on_disconnect": str}  # "cancel" (the default) or "continue"


def leaving(data: dict) -> str:
    """What the run does when its client leaves: stops ("cancel") or goes on."""
    said = data.get("on_disconnect", "cancel")
    if said not in ("cancel", "continue"):
        raise Refused(400, '"on_disconnect" must be "cancel" (the run stops when you '
                           'leave, the default) or "continue" (it goes on without you)')
    return said


# what each claim of an approval token binds it to, as a refusal names it
BOUND = {"sub": "user", "sid": "session", "call": "tool call",
         "args": "tool call's arguments",
         "jti": "approval request (a newer token replaced it)"}


def take_a_run(server, user: str) -> None:
    """Take one of the user's runs from their budget; 429, saying when to retry, if
    none is left."""
    wait = server.limit(user)
    if wait:
        raise Refused(429, "too many runs: wait and try again",
                      {"Retry-After": math.ceil(wait)})


def session_to_run(server, user: str, sid: str) -> Session:
    """The session, for a request that drives its loop: rate-limited, never two runs at
    once."""
    take_a_run(server, user)
    s = session_for(server, user, sid)
    if is_running(s):
        raise Refused(409, "a run is streaming on this session: wait for it to end")
    return s


# (method, path) -> route: the first three have no session; the others are under
# /sessions/{id}
TOP = {("GET", "me"): get_me, ("POST", "sessions"): post_session,
       ("GET", "approvals"): get_queue}
ROUTES = {("GET", ""): get_session, ("GET", "picture"): get_picture,
          ("GET", "events"): get_events,
          ("POST", "messages"): post_message, ("POST", "approvals"): post_verdict,
          ("POST", "resume"): post_resume, ("POST", "cancel"): post_cancel}
NO_ROUTE = ("no such route; the routes are GET /me, POST /sessions, GET /approvals "
            "(your queue), GET /sessions/{id}, GET /sessions/{id}/picture or /events, "
            "and POST /sessions/{id}/messages, /approvals, /resume or /cancel")
