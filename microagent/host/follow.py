"""The events route: what a client missed, from the store, then the run until it stops.

    GET /sessions/{id}/events          Last-Event-ID: 7   (or ?after=7)

The notebook in the store is the event log, so what a client missed is a read
(events.told, as the live run sends it), on any host process; then the client follows
the run as it commits, until the run stops (one whose host died ends the follow with
words saying so). Each follow holds a thread, so one user holds at most the Server's
`follows` (20) at once. A browser's EventSource can't send a header: it signs in with
the session's `events_token`, as `?token=` (kept out of the server's log).

What it leaves out: the brain's words and a tool's progress, which are live only, to
the client of the request that runs the loop.
"""

import contextlib
import re
import threading
import time
import urllib.parse

from microagent.agent import CANCELLED, PAUSED
from microagent.host.events import pending, sse, token_for, told
from microagent.host.request import API_HEADERS, Refused
from microagent.host.store import Session
from microagent.host.tokens import sign, verify

POLL = 0.5  # seconds between two looks at a run in another process
# seconds a follower woken by a commit waits for more before it reads: a hundred followers
# reading at every one of a quick run's commits would take the run's time from it
GATHER = 0.1
EVENTS_TTL = 3600  # seconds an events token works
DIED = ("the host that ran this session stopped in the middle of the run (its lease ran "
        "out); every step it had shown is kept: resume the session to go on")
FAILED = ("the server failed while following the run; every step is kept: ask for the "
          "events again later")
IDLE = ("no run is going on in this session, and its notebook does not end where a run "
        "stops (it was cancelled, or it failed): resume the session to go on")


def get_events(h, user: str, sid: str, body: bytes) -> None:
    """The events after the client's point, from the store, then the run's as it commits;
    204 (no more to come: an EventSource stops asking) if it has them all, or nothing was
    asked in the session yet. A follow holds a thread: a user may hold at most the
    server's `follows` at once (429 beyond)."""
    with place(h.server, user):
        follow(h, user, sid)


@contextlib.contextmanager
def place(server, user: str):
    """One of the user's places to follow from, while the block runs; given back when the
    follow ends, however it ends (a client that drops is heard within POLL + GATHER)."""
    places = server.following.setdefault(user, threading.Semaphore(server.follows))
    if not places.acquire(blocking=False):
        raise Refused(429, f"{user} follows {server.follows} event streams at once "
                           "already, the most one user may: close one you no longer read "
                           "(a page, an EventSource) and ask again")
    try:
        yield
    finally:
        places.release()


def follow(h, user: str, sid: str) -> None:
    """What get_events sends: the events after the client's point, then the run's."""
    server = h.server
    news = server.news  # a commit after this sets it: looked at before each read
    s = session_for(server, user, sid)
    after, started = resume_point(h, len(s.context)), False
    looks = changes(h, sid, news)
    while True:
        running, died = is_running(s), 0 < s.lease_until <= time.time()
        stop = None
        if not (running or died):  # why it stands still, as the run's own client heard it
            stop = standing(server.agent, s) or (CANCELLED if s.cancelled else None)
        token = None
        if stop == PAUSED and server.users.may_approve(user, s.asker):
            token = token_for(server, user, sid, s.context, s.jti)
        batch = told(server.agent, s.context, after, stop, token)
        if not started:
            # nothing to come: every event read, or nothing asked yet
            if not (running or batch or died) and (stop or not s.context):
                return h.send(204, API_HEADERS)
            h.streaming = True  # from here on, a failure can only end the stream
            h.send(200, {"Content-Type": "text/event-stream", **API_HEADERS})
            started = True
        try:
            h.wfile.write(b"".join(sse(*event) for event in batch))  # one write for all
            # an event's id is at most the notebook's length then (a stop's)
            after = max([after, len(s.context) - 1,
                         *(e[2] for e in batch if e[2] is not None)])
            if not running:  # the run let go, or its host died: why, unless told
                if died:
                    h.wfile.write(sse("error", {"error": DIED}))
                elif stop is None:
                    h.wfile.write(sse("stopped", {"note": IDLE}))
                return
        except OSError:  # the client left
            return
        try:
            s = next(looks, None)
        except Exception:  # the database failed: say so, in words, and log it
            with contextlib.suppress(OSError):
                h.wfile.write(sse("error", {"error": FAILED}))
            raise
        if s is None:
            return


def changes(h, sid: str, news):
    """The session each time a run may have moved it, until the client leaves: woken by a
    commit in this process (`news`: the server's, taken before the caller read it), else
    looked at every POLL seconds."""
    while True:
        news.wait(POLL)
        time.sleep(GATHER)
        if h.gone():
            return
        news = h.server.news
        yield latest(h.server, sid)


def latest(server, sid: str) -> Session:
    """The session as the store holds it: as the run in this process last committed it (no
    statement, however many follow it), or else read."""
    run = server.runs.get(sid)
    # the run's own copy only while it holds the lease; one it let go of is read again,
    # for the store alone says whether a cancel let it go
    return run.saved if run is not None and run.saved.lease_until \
        else server.store.load(sid)


def standing(agent, s: Session) -> str | None:
    """Why the session's notebook stands still, as its last event tells it (None: it
    stopped where a run does not: cancelled, failed, a verdict not carried out yet)."""
    stop = agent.why_stop(s.context)
    if stop == PAUSED and not pending(s):
        return None
    return stop


def resume_point(h, length: int) -> int:
    """The id the client's events resume after: its Last-Event-ID, else ?after=; -1 (from
    the start) if neither. A 400 for anything but an id this session has."""
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(h.path).query,
                                  keep_blank_values=True)  # ?after= is no id: a 400
    said = h.headers.get("Last-Event-ID", (query.get("after") or [None])[0])
    if said is None:
        return -1
    if not re.fullmatch("-?[0-9]{1,12}", said.strip()):
        raise Refused(400, f"Last-Event-ID (or ?after=) must be an event's id, a whole "
                           f"number from 0 to {length}, not {said[:40]!r}")
    after = int(said)
    if not 0 <= after <= length:
        raise Refused(400, f"this session has no event {after}: its ids go from 0 to "
                           f"{length}; leave Last-Event-ID out to read them from the "
                           "start")
    return after


def events_token(server, user: str, sid: str) -> str:
    """A token for reading this session's events as `user`, and nothing else."""
    now = int(time.time())
    return sign({"sub": user, "sid": sid, "use": "events", "iat": now,
                 "exp": now + EVENTS_TTL}, server.secret)


def events_reader(server, sid: str, token: str) -> str:
    """Who an events token was made for, if it is good for this session's events."""
    try:
        claims = verify(token, server.secret, time.time())
    except ValueError:
        claims = {}
    if claims.get("use") != "events" or claims.get("sid") != sid \
            or claims.get("sub") not in server.users.known:
        raise Refused(403, "this events token is not good for this session (altered, "
                           "expired, or for another): GET the session for a fresh one")
    return claims["sub"]


def session_for(server, user: str, sid: str) -> Session:
    """The session, for someone who may see it (users.may_see). To anyone else it answers
    exactly as a missing one does."""
    s = server.store.load(sid)
    if s is None or not server.users.may_see(user, s):
        raise Refused(404, "no such session")
    return s


def is_running(s: Session) -> bool:
    return s.lease_until > time.time()
