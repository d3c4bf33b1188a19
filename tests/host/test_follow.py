"""Runs that outlive their request, and events that resume: over real sockets, in this process.

A run started with `"on_disconnect": "continue"` goes on when its client leaves;
`POST /sessions/{id}/cancel` stops it; `GET /sessions/{id}/events` sends what a
client missed (read from the store) and follows the run until it stops. The
same across processes (killed with SIGKILL, on PostgreSQL) is in
test_host_processes.py; in a browser, in test_page.py.
"""

import queue
import threading
import time

import pytest

from host_offices import Listener, gated_refund_office
from microagent import Action, Agent, Context, as_tool, final_answer, scripted
from microagent.host import Server, refund_office, thinking
from test_host import QUESTION, SECRET, USERS, Host, blocking_office


@pytest.fixture
def host(tmp_path):
    made = []

    def start(office=refund_office, **settings) -> Host:
        (tmp_path / str(len(made))).mkdir()
        made.append(Host(tmp_path / str(len(made)), office, **settings))
        return made[-1]
    yield start
    for h in made:
        h.close()


def ask(h, sid, text=QUESTION, user="alice", **more) -> Listener:
    return Listener(h.port, "POST", f"/sessions/{sid}/messages", h.users[user], {"text": text, **more})


def follow(h, sid, after=None, user="alice", how="header") -> Listener:
    headers = {} if after is None or how != "header" else {"Last-Event-ID": str(after)}
    query = "" if after is None or how == "header" else f"?after={after}"
    return Listener(h.port, "GET", f"/sessions/{sid}/events{query}", h.users[user], headers=headers)


def running(h, sid) -> bool:
    return h.call("alice", "GET", f"/sessions/{sid}")[2]["running"]


def until(check, what: str) -> None:
    deadline = time.monotonic() + 60
    while not check():
        assert time.monotonic() < deadline, f"{what} never came"
        time.sleep(0.02)


# ----------------------------------------------------------------------------
# a run that goes on without its client

def test_a_run_that_continues_goes_on_when_its_client_leaves_pauses_and_is_followed_after(host):
    entered, go = threading.Event(), threading.Event()
    h = host(gated_refund_office(entered, go))
    sid = h.new()
    first = ask(h, sid, on_disconnect="continue")
    seen = [first.next()]  # look_up_order's result, note 2
    assert [(i, n) for i, n, _ in seen] == [(2, "result")]
    assert entered.wait(60)
    first.leave()  # gone, while check_policy runs
    assert running(h, sid)  # the asker sees it running
    go.set()
    until(lambda: not running(h, sid), "the pause")
    # it paused for approval as it would have with its client: bob's queue holds it
    assert [w["session"] for w in h.queue()] == [sid]
    back = follow(h, sid, after=2)
    assert back.status == 200 and back.head["Content-Type"] == "text/event-stream"
    assert [(i, n) for i, n, _ in back.rest()] == [(4, "result"), (6, "approval_required")]
    assert h.verdict(sid, h.token(sid))[0] == 200
    rest = follow(h, sid, after=6).rest()
    assert [(i, n, d.get("tool")) for i, n, d in rest] == [
        (7, "result", "issue_refund"), (9, "result", "final_answer"), (10, "done", None)]
    assert rest[-1][2] == {"answer": h.notebook(sid)[9].content}


def test_a_run_that_cancels_on_disconnect_stops_when_its_client_leaves_as_before(host):
    started, release = threading.Event(), threading.Event()
    h = host(blocking_office(started, release))
    sid = h.new()
    client = ask(h, sid, "go")  # on_disconnect: "cancel", the default
    assert started.wait(60)
    client.leave()
    release.set()
    until(lambda: not running(h, sid), "the end of the run")
    assert [m.kind for m in h.notebook(sid)] == ["question", "decision", "result"]


def test_the_asker_cancels_a_run_that_goes_on_without_them_between_two_steps(host):
    started, release = threading.Event(), threading.Event()
    h = host(blocking_office(started, release))
    sid = h.new()
    client = ask(h, sid, "go", on_disconnect="continue")
    assert started.wait(60)
    client.leave()
    assert h.call("bob", "POST", f"/sessions/{sid}/cancel", {})[0] == 404  # not bob's to see
    assert h.call("dan", "POST", f"/sessions/{sid}/cancel", {})[0] == 404
    status, _, answer = h.call("alice", "POST", f"/sessions/{sid}/cancel", {})
    assert (status, answer) == (202, {"cancelling": sid})
    release.set()
    until(lambda: not running(h, sid), "the cancel")
    # the step that was running ends and is kept; nothing new starts
    assert [m.kind for m in h.notebook(sid)] == ["question", "decision", "result"]
    status, _, answer = h.call("alice", "POST", f"/sessions/{sid}/cancel", {})
    assert (status, answer["error"]) == (409, "no run is going on in this session: nothing to cancel")
    events = follow(h, sid).rest()  # a follower hears the cancel as the run's own client does
    assert events == [(2, "result", events[0][2]), (None, "cancelled", {})]
    assert ("alice", sid, "cancel asked", "") in h.trail()
    resumed = h.call("alice", "POST", f"/sessions/{sid}/resume", {})[2]
    assert resumed[-1] == ("done", {"answer": "ok"})


@pytest.mark.timeout(120)
@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_a_follower_hears_a_cancel_as_the_runs_own_client_does(host, db, request):
    started, release = threading.Event(), threading.Event()
    url = None if db == "sqlite" else request.getfixturevalue("postgres")
    h = host(blocking_office(started, release), db=url)
    sid = h.new()
    client = ask(h, sid, "go")
    assert started.wait(60)
    watcher = follow(h, sid)  # follows the run from its start
    assert h.call("alice", "POST", f"/sessions/{sid}/cancel", {})[0] == 202
    release.set()
    own = client.rest()
    assert [(i, n) for i, n, _ in own] == [(2, "result"), (None, "cancelled")]
    assert watcher.rest() == own  # the same events: the cancel, not a stop that reads as idle


@pytest.mark.timeout(120)
def test_a_run_cancelled_as_it_pauses_asks_no_verdict_and_a_resume_asks_it_again(host):
    deciding, go = threading.Event(), threading.Event()

    def brain(ctx, tools):
        deciding.set()
        assert go.wait(60)  # the cancel comes while the brain decides on the refund
        return Action("issue_refund", {"order_id": "A1234", "amount": 79})
    h = host(lambda db: Agent(brain, list(refund_office(db).tools.values())))
    sid = h.new()
    client = ask(h, sid, "refund")
    assert deciding.wait(60)
    watcher = follow(h, sid)
    assert h.call("alice", "POST", f"/sessions/{sid}/cancel", {})[0] == 202
    go.set()
    assert client.rest() == [(None, "cancelled", {})]  # no approval asked, no token handed out
    assert watcher.rest() == [(None, "cancelled", {})]
    assert [m.kind for m in h.notebook(sid)] == ["question", "decision"]  # the decision is kept
    assert h.queue() == [] and ("alice", sid, "approval requested") not in [t[:3] for t in h.trail()]
    resumed = h.call("alice", "POST", f"/sessions/{sid}/resume", {})[2]
    assert resumed[-1][0] == "approval_required" and [w["session"] for w in h.queue()] == [sid]


def test_a_cancel_is_heard_inside_a_models_reply(host):
    thinking_now = threading.Event()

    def brain(ctx, tools):
        for _ in range(6000):  # a reply that streams for up to a minute, unless cancelled
            thinking("word ")
            thinking_now.set()
            time.sleep(0.01)
        return Action("final_answer", {"answer": "too late"})
    h = host(lambda db: Agent(brain, [final_answer]))
    sid = h.new()
    client = ask(h, sid, "think", on_disconnect="continue")
    assert thinking_now.wait(60)
    client.leave()
    assert h.call("alice", "POST", f"/sessions/{sid}/cancel", {})[0] == 202
    until(lambda: not running(h, sid), "the cancel")
    assert [m.kind for m in h.notebook(sid)] == ["question"]  # nothing half-decided is written
    assert ("alice", sid, "cancelled", "cancelled") in h.trail()


def once_blocking_office(started: threading.Event, release: threading.Event):
    """blocking_office, whose tool waits for the test on its first call only."""
    calls = []

    @as_tool
    def wait() -> str:
        """Wait for the test, the first time."""
        calls.append(1)
        if len(calls) == 1:
            started.set()
            assert release.wait(60)
        return "waited"
    policy = scripted(Action("wait", {}), Action("final_answer", {"answer": "ok"}))
    return lambda db: Agent(policy, [wait, final_answer])


@pytest.mark.timeout(120)
@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_a_cancelled_run_whose_session_was_written_after_its_lease_ran_out_says_its_step_is_lost(
        host, db, request):
    started, release = threading.Event(), threading.Event()
    url = None if db == "sqlite" else request.getfixturevalue("postgres")
    h = host(once_blocking_office(started, release), lease=1.0, db=url)
    sid = h.new()
    first = ask(h, sid, "go")
    assert started.wait(60)  # inside its tool, which reports no progress
    assert h.call("alice", "POST", f"/sessions/{sid}/cancel", {})[0] == 202
    until(lambda: not running(h, sid), "the end of the lease")
    # the lease ran out: the session is free, and alice's resume runs it to its answer
    status, _, resumed = h.call("alice", "POST", f"/sessions/{sid}/resume", {})
    assert (status, resumed[-1]) == (200, ("done", {"answer": "ok"}))
    kept = h.notebook(sid)
    release.set()  # the first run's tool ends: its step can't go on the resumed notebook
    assert first.rest() == [(None, "error", {"error": "the session was taken over by another "
                                                      "run; stopped"})]
    assert h.notebook(sid) == kept  # whole: the resume's notes, nothing of the first run's
    assert [m.kind for m in kept] == ["question", "decision", "result", "decision", "result"]
    assert ("alice", sid, "run stopped",
            "another writer took the session; its last step not kept") in h.trail()


def test_on_disconnect_is_cancel_or_continue_and_nothing_else(host):
    h = host()
    sid = h.new()
    status, _, answer = h.call("alice", "POST", f"/sessions/{sid}/messages",
                               {"text": QUESTION, "on_disconnect": "stay"})
    assert status == 400 and answer["error"].startswith('"on_disconnect" must be "cancel"')
    status, _, answer = h.call("alice", "POST", f"/sessions/{sid}/resume", {"on_disconnect": True})
    assert (status, answer["error"]) == (400, '"on_disconnect" must be a JSON string')
    assert h.notebook(sid) == Context()


# ----------------------------------------------------------------------------
# events that resume

def whole_session(h) -> tuple[str, list]:
    """A session of two questions, its refund approved by bob: its id, and every event alice's
    and bob's streams carried, in order, as (id, name, data)."""
    sid = h.new()
    live = ask(h, sid).rest()
    token = h.token(sid)
    live += Listener(h.port, "POST", f"/sessions/{sid}/approvals", h.users["bob"],
                     {"approval_token": token, "approve": True}).rest()
    live += ask(h, sid, "And order B9999?").rest()
    return sid, live


def test_the_events_read_back_are_the_events_the_live_run_sent_from_any_point(host):
    h = host()
    sid, live = whole_session(h)
    ids = [i for i, _, _ in live]
    assert ids == sorted(ids) and len(set(ids)) == len(ids) and None not in ids
    asked_live = [e for e in live if e[1] == "approval_required"][0]
    assert asked_live[2]["waits_for"] == "an approver"  # alice's stream: no token
    assert follow(h, sid).rest() == live  # one function tells both
    for after in range(len(h.notebook(sid)) + 1):  # from every point, what came after it
        back, missed = follow(h, sid, after, how=["header", "query"][after % 2]), [e for e in live if e[0] > after]
        if missed:
            assert (after, back.status, back.rest()) == (after, 200, missed)
        else:
            assert (after, back.status, back.answer()) == (after, 204, None)


def test_a_client_that_has_every_event_gets_204_so_an_eventsource_stops_asking(host):
    h = host()
    sid, live = whole_session(h)
    last = follow(h, sid, live[-1][0])
    assert (last.status, last.answer()) == (204, None)


def test_a_session_nothing_was_asked_in_yet_gets_204_too_not_a_note_saying_to_resume_it(host):
    h = host()
    sid = h.new()
    assert [(f.status, f.answer()) for f in (follow(h, sid), follow(h, sid, 0))] == [(204, None)] * 2


def test_the_approver_following_a_pause_gets_a_token_made_out_to_them(host):
    h = host()
    sid, token = h.paused()
    [(i, name, data)] = [e for e in follow(h, sid, user="bob").rest() if e[1] == "approval_required"]
    assert (i, name, data["call"]) == (6, "approval_required", 5)
    assert h.verdict(sid, data["approval_token"])[0] == 200  # bound to bob, and it works


@pytest.mark.parametrize("said, refusal", [
    ("12", "this session has no event 12: its ids go from 0 to 6; leave Last-Event-ID out to read them "
           "from the start"),
    ("-1", "this session has no event -1: its ids go from 0 to 6; leave Last-Event-ID out to read them "
           "from the start"),
    ("seven", "Last-Event-ID (or ?after=) must be an event's id, a whole number from 0 to 6, not 'seven'"),
    ("", "Last-Event-ID (or ?after=) must be an event's id, a whole number from 0 to 6, not ''")])
def test_events_after_a_point_the_session_does_not_have_are_refused_clearly(host, said, refusal):
    h = host()
    sid, _ = h.paused()
    for how in ("header", "query"):
        answer = Listener(h.port, "GET", f"/sessions/{sid}/events" + ("" if how == "header" else f"?after={said}"),
                          h.users["alice"], headers={"Last-Event-ID": said} if how == "header" else {})
        assert (answer.status, answer.answer()) == (400, {"error": refusal})


def test_another_users_session_answers_404_on_its_events_as_everywhere(host):
    h = host()
    sid, _ = h.paused()
    for user in ("dan", "carol"):  # dan asks; carol approves, but only what waits for her: it does
        status = follow(h, sid, user=user).status
        assert status == (200 if user == "carol" else 404)
    assert follow(h, "no-such-session").status == 404


def test_an_events_token_reads_one_sessions_events_without_an_authorization_header(host, capfd):
    h = host()
    h.server.quiet = False  # it logs each request, as a server does
    sid, _ = h.paused()
    other, _ = h.paused()
    token = h.call("alice", "GET", f"/sessions/{sid}")[2]["events_token"]
    read = Listener(h.port, "GET", f"/sessions/{sid}/events?token={token}", None).rest()
    assert [n for _, n, _ in read] == ["result", "result", "approval_required"]
    refused = Listener(h.port, "GET", f"/sessions/{other}/events?token={token}", None)
    assert refused.status == 403 and "not good for this session" in refused.answer()["error"]
    # an approval token is not an events token, and an events token reads nothing else
    approval = h.token(sid)
    assert Listener(h.port, "GET", f"/sessions/{sid}/events?token={approval}", None).status == 403
    assert Listener(h.port, "GET", f"/sessions/{sid}?token={token}", None).status == 401
    assert token not in capfd.readouterr().err  # kept out of the log


def test_a_follow_cut_by_a_database_failure_ends_with_an_event_that_says_so(host):
    started, release = threading.Event(), threading.Event()
    h = host(blocking_office(started, release))
    sid = h.new()
    client = ask(h, sid, "go")
    assert started.wait(60)
    follower = follow(h, sid)
    assert follower.status == 200

    def down(sid):
        raise ConnectionError("the database went away")
    h.server.store.load = down  # the run's own saves go on (they need no load); a follower's read fails
    release.set()
    live, got = client.rest(), follower.rest()
    assert got[-1] == (None, "error", {"error": "the server failed while following the run; every step is "
                                                "kept: ask for the events again later"})
    assert got[:-1] == live[:len(got) - 1]  # what came before it is what the run sent, in order


# ----------------------------------------------------------------------------
# a hundred idle followers

def test_a_hundred_followers_of_one_run_each_get_every_event_and_the_run_finishes(host):
    started, release = threading.Event(), threading.Event()
    h = host(blocking_office(started, release), follows=100)  # one user's hundred: more than the default
    sid = h.new()
    client = ask(h, sid, "go")
    assert started.wait(60)
    followers = [follow(h, sid) for _ in range(100)]
    assert [f.status for f in followers] == [200] * 100
    got = [[] for _ in followers]
    threads = [threading.Thread(target=lambda i=i: got[i].extend(followers[i].rest())) for i in range(100)]
    for thread in threads:
        thread.start()
    release.set()
    live = client.rest()
    for thread in threads:
        thread.join(120)
    assert live[-1] == (23, "done", {"answer": "ok"}) and len(live) == 12
    assert all(each == live for each in got)


# ----------------------------------------------------------------------------
# how many one user may follow at once

def waiting_office(entered: queue.Queue):
    """An office whose first tool waits, in each run, until the test sets the gate it puts in `entered`."""
    @as_tool
    def wait() -> str:
        """Wait for the test."""
        gate = threading.Event()
        entered.put(gate)
        assert gate.wait(60)
        return "waited"
    return lambda db: Agent(scripted(Action("wait", {}), Action("final_answer", {"answer": "ok"})),
                            [wait, final_answer])


def test_a_user_follows_at_most_twenty_streams_at_once_and_a_follow_that_ends_or_drops_gives_its_place_back(host):
    entered = queue.Queue()
    h = host(waiting_office(entered))
    sid = h.new()
    client = ask(h, sid, "go")
    gate = entered.get(timeout=60)  # alice's run waits in its tool
    followers = [follow(h, sid) for _ in range(20)]
    assert [f.status for f in followers] == [200] * 20  # each holds a thread of the host
    refused, says = follow(h, sid), ("alice follows 20 event streams at once already, the most one user may: "
                                     "close one you no longer read (a page, an EventSource) and ask again")
    assert (refused.status, refused.answer()) == (429, {"error": says})
    assert h.trail()[-1] == ("alice", sid, "refused 429", says)
    # the cap is each user's: dan follows his own run
    theirs = h.new("dan")
    dans = ask(h, theirs, "go", user="dan")
    dans_gate = entered.get(timeout=60)
    dan = follow(h, theirs, user="dan")
    assert dan.status == 200
    # a follower whose connection drops gives its place back, once the host hears it has gone
    followers.pop().leave()

    def another() -> bool:
        again = follow(h, sid)
        if again.status == 200:
            followers.append(again)
            return True
        assert again.status == 429
        again.leave()
        return False
    until(another, "the place of the follower who left")
    # the run ends: every follow ends with it, and each gives its place back before its connection closes
    gate.set()
    live = client.rest()
    assert all(f.rest() == live for f in followers)
    for _ in range(21):  # had a place not come back, one of these would be refused
        again = follow(h, sid)
        assert again.status == 200 and again.rest() == live  # the whole run, read from the store
    dans_gate.set()
    assert dans.rest()[-1] == dan.rest()[-1] == (5, "done", {"answer": "ok"})


def test_the_cap_on_follows_is_a_whole_number_from_one(tmp_path):
    for wrong in (0, -1, 2.5, "20", True):
        with pytest.raises(ValueError, match=f"follows is a whole number from 1 up, not {wrong!r}"):
            Server(refund_office, str(tmp_path / "host.db"), USERS, SECRET, follows=wrong)
