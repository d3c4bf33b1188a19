"""The hosted loop, talked to over real sockets: the protocol, and every guard proven by a real attempt.

Each test starts a real server on 127.0.0.1 (a free port) in this process and
talks HTTP to it; the tests that kill or race server processes are in
test_host_processes.py. The LLM office's tests talk to the stand-in model server
(microagent.transport.stand_in), also on 127.0.0.1.
"""

import ast
import base64
import http.client
import itertools
import json
import pathlib
import xml.etree.ElementTree as ET
import socket
import sqlite3
import struct
import threading
import time
import unicodedata

import pytest
from hypothesis import given, settings, strategies as st

from host_offices import ANSWER, QUESTION, SECRET, USERS, Hosted, request
from microagent.transport.stand_in import reply, serve
from microagent import Action, Agent, Context, Tool, approval, final_answer, from_json, scripted
from microagent.host import (MAX_BODY, MAX_DEPTH, MAX_TEXT, args_hash, llm_office, refund_office, sign,
                             thinking, verify)
from microagent.host import Handler, main
from microagent.host.cli import printable, secret_from, users_from
from microagent.host.users import read_users
from microagent.host.store import Store
from microagent.demo import check_policy, look_up_order, support_policy
from microagent.invariants import check
from microagent.progress import keeping, report
from microagent.picture import draw
from microagent.trace import story
from microagent.schema import as_tool


class Host(Hosted):
    """A server on a free port in a thread, and a client that speaks as any of USERS."""

    def __init__(self, tmp_path, office=refund_office, users=USERS, db=None, **settings):
        super().__init__(office, str(tmp_path / "host.db") if db is None else db, users, SECRET, **settings)
        self.users = {name: user["token"] if isinstance(user, dict) else user for name, user in users.items()}

    def call(self, user, method, path, body=None):
        return request(self.port, method, path, self.users.get(user, user), body)

    def queue(self, user="bob") -> list[dict]:
        status, _, answer = self.call(user, "GET", "/approvals")
        assert status == 200, answer
        return answer["waiting"]

    def token(self, sid, user="bob") -> str:
        """The approval token the user's queue holds for the session."""
        [token] = [asked["approval_token"] for asked in self.queue(user) if asked["session"] == sid]
        return token

    def new(self, user="alice") -> str:
        status, _, answer = self.call(user, "POST", "/sessions")
        assert status == 201
        return answer["id"]

    def ask(self, sid, text=QUESTION, user="alice"):
        return self.call(user, "POST", f"/sessions/{sid}/messages", {"text": text})

    def paused(self, user="alice", approver="bob") -> tuple[str, str]:
        """A new session whose refund waits for an approver: (its id, the approver's token)."""
        sid = self.new(user)
        status, _, stream = self.ask(sid, user=user)
        assert status == 200 and stream[-1][0] == "approval_required"
        return sid, self.token(sid, approver)

    def verdict(self, sid, token, user="bob", **more):
        return self.call(user, "POST", f"/sessions/{sid}/approvals", {"approval_token": token, "approve": True, **more})

    def notebook(self, sid, user="alice") -> Context:
        status, _, answer = self.call(user, "GET", f"/sessions/{sid}")
        assert status == 200
        return check(from_json(json.dumps(answer["notebook"])))

    def refunds(self) -> list[tuple]:
        with sqlite3.connect(self.db) as db:
            return db.execute("SELECT call, order_id, amount FROM refunds").fetchall()



@pytest.fixture
def host(tmp_path):
    made = []

    def start(office=refund_office, **settings) -> Host:
        made.append(Host(tmp_path / str(len(made)), office, **settings))
        return made[-1]
    for i in range(3):
        (tmp_path / str(i)).mkdir()
    yield start
    for h in made:
        h.close()


def names(stream) -> list[str]:
    return [f"{event}:{data['tool']}" if event == "result" else event for event, data in stream]


# ----------------------------------------------------------------------------
# the protocol

def test_a_whole_session_create_ask_stream_approve_stream(host):
    h = host()
    sid = h.new()
    assert len(sid) == 22  # 16 random bytes (128 bits) in base64url
    status, response, stream = h.ask(sid)
    assert status == 200 and response.getheader("Content-Type") == "text/event-stream"
    assert names(stream) == ["result:look_up_order", "result:check_policy", "approval_required"]
    assert stream[0][1]["content"] == "A1234, Wireless Headphones, $79, delivered, reported defective"
    # alice asks, so the refund waits for an approver: her stream carries no token
    assert stream[-1][1] == {"tool": "issue_refund", "args": {"order_id": "A1234", "amount": 79}, "call": 5,
                             "waits_for": "an approver"}
    # what waits is in the notebook, and GET says so
    status, _, shown = h.call("alice", "GET", f"/sessions/{sid}")
    assert shown["pending"] == {"tool": "issue_refund", "args": {"order_id": "A1234", "amount": 79}, "call": 5}
    assert (shown["asker"], shown["running"], shown["stopped"]) == ("alice", False, "paused")
    assert approval.waiting(h.notebook(sid)).tool == "issue_refund" and h.refunds() == []
    # bob, who approves, finds it in his queue, in full, with a token bound to him
    [asked] = h.queue("bob")
    assert {k: v for k, v in asked.items() if k != "approval_token"} == {
        "session": sid, "asker": "alice", "question": QUESTION, "tool": "issue_refund",
        "args": {"order_id": "A1234", "amount": 79}, "call": 5}
    assert claims_of(asked["approval_token"])["sub"] == "bob"
    # he says yes, and the rest of the run streams to him
    status, _, stream = h.verdict(sid, asked["approval_token"])
    assert status == 200
    assert names(stream) == ["result:issue_refund", "result:final_answer", "done"]
    assert stream[0][1]["content"] == "$79 refunded to the original card (receipt R1)"
    assert stream[-1][1] == {"answer": ANSWER}
    ctx = h.notebook(sid)
    # question, then (decision, result) x2, decision, verdict, result, decision, result
    assert [m.role for m in ctx] == ["user"] + ["assistant", "tool"] * 2 + ["assistant", "user", "tool"] \
        + ["assistant", "tool"]
    assert ctx[6].name == "bob" and ctx[6].kind == "verdict"
    assert [data["at"] for event, data in stream if event == "result"] == [7, 9]  # where each note is
    assert h.refunds() == [(f"{sid}/5", "A1234", 79)]
    assert h.queue("bob") == [] and h.call("alice", "GET", f"/sessions/{sid}")[2]["stopped"] == "done"


def test_each_event_is_one_line_of_json_named_by_event_with_the_id_of_its_note(host):
    h = host()
    sid = h.new()
    conn = socket.create_connection(("127.0.0.1", h.port))
    body = json.dumps({"text": QUESTION}).encode()
    conn.sendall(f"POST /sessions/{sid}/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {h.users['alice']}\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    raw = b""
    while chunk := conn.recv(65536):
        raw += chunk
    conn.close()
    head, stream = raw.decode().split("\r\n\r\n", 1)
    assert "Content-Type: text/event-stream" in head
    blocks = stream.strip().split("\n\n")
    assert len(blocks) == 3
    for block in blocks:
        id, event, data = block.split("\n")
        assert id.startswith("id: ") and event.startswith("event: ") and data.startswith("data: ")
        json.loads(data.removeprefix("data: "))
    # each result's id is its note's index; the pause's is one past the decision (the verdict's place)
    assert [block.split("\n")[0] for block in blocks] == ["id: 2", "id: 4", "id: 6"]


def test_approve_with_edited_arguments_runs_the_tool_with_them(host):
    h = host()
    sid, token = h.paused()
    status, _, stream = h.verdict(sid, token, args={"order_id": "A1234", "amount": 70})
    assert status == 200 and stream[0][1]["content"] == "$70 refunded to the original card (receipt R1)"
    assert h.refunds() == [(f"{sid}/5", "A1234", 70)]
    assert h.notebook(sid)[6].args == '{"order_id": "A1234", "amount": 70}'
    assert ("bob", sid, "approved", 'asked by alice: issue_refund {"order_id": "A1234", "amount": 70}') in h.trail()


def test_edited_arguments_that_dont_fit_the_tool_are_refused_and_change_nothing(host):
    h = host()
    sid, token = h.paused()
    before = h.notebook(sid)
    status, _, answer = h.verdict(sid, token, args={"order_id": "A1234", "amount": "all of it"})
    assert status == 400 and "amount must be number" in answer["error"]
    assert h.notebook(sid) == before and h.refunds() == []
    assert h.verdict(sid, token)[0] == 200  # the same token still works: nothing was used up


def test_deny_with_a_reason_and_the_refund_never_runs(host):
    h = host()
    sid, token = h.paused()
    status, _, stream = h.call("bob", "POST", f"/sessions/{sid}/approvals",
                               {"approval_token": token, "approve": False, "reason": "send it back first"})
    assert status == 200
    assert names(stream) == ["result:issue_refund", "result:final_answer", "done"]
    assert stream[0][1]["error"] and stream[0][1]["content"] == "denied by bob: send it back first"
    assert stream[-1][1]["answer"].startswith("Sorry, I can't refund A1234")
    assert h.refunds() == []
    assert ("bob", sid, "denied", "asked by alice: issue_refund: send it back first") in h.trail()


def test_a_session_goes_on_with_a_second_question(host):
    h = host()
    sid, token = h.paused()
    h.verdict(sid, token)
    status, _, stream = h.ask(sid, "And order B9999?")
    assert status == 200 and stream[-1] == ("done", {"answer": "Sorry, I can't refund B9999 right now. "
                                                     "A teammate will follow up by email within a day."})
    assert len(h.notebook(sid)) == 10 + 5


def test_resume_asks_again_and_the_old_token_stops_working(host):
    h = host()
    sid, old = h.paused()
    status, _, stream = h.call("alice", "POST", f"/sessions/{sid}/resume", {})
    assert names(stream) == ["approval_required"] and stream[0][1]["waits_for"] == "an approver"
    new = h.token(sid)
    status, _, answer = h.verdict(sid, old)
    assert status == 403 and "newer token replaced it" in answer["error"]
    assert h.verdict(sid, new)[0] == 200


# ----------------------------------------------------------------------------
# the approval token: signed, bound, short-lived, single use

def claims_of(token: str) -> dict:
    body = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def test_the_token_is_a_jwt_bound_to_user_session_call_and_arguments(host):
    h = host()
    sid, token = h.paused()
    claims = claims_of(token)
    assert claims.keys() == {"sub", "sid", "call", "args", "jti", "iat", "exp"}
    assert (claims["sub"], claims["sid"], claims["call"]) == ("bob", sid, 5)
    assert claims["args"] == args_hash('{"order_id": "A1234", "amount": 79}')
    assert claims["exp"] - claims["iat"] == 600
    assert verify(token, SECRET, time.time()) == claims


@pytest.mark.parametrize("change, refusal", [
    ({"sid": "another-session"}, "not for this session"),
    ({"sub": "carol"}, "not for this user"),
    ({"call": 3}, "not for this tool call"),
    ({"args": args_hash('{"order_id": "A1234", "amount": 7900}')}, "not for this tool call's arguments"),
    ({"jti": "an-old-one"}, "newer token replaced it"),
])
def test_a_token_bound_to_anything_else_is_refused_403(host, change, refusal):
    h = host()
    sid, token = h.paused()
    forged = sign({**claims_of(token), **change}, SECRET)  # as if the server had signed it
    status, _, answer = h.verdict(sid, forged)
    assert status == 403 and refusal in answer["error"]
    assert h.refunds() == [] and h.verdict(sid, token)[0] == 200  # nothing lost: the real token still works


def test_a_token_for_another_session_of_the_same_user_is_refused(host):
    h = host()
    first, _ = h.paused()
    second, token = h.paused()
    status, _, answer = h.verdict(first, token)
    assert status == 403 and "not for this session" in answer["error"]


def test_a_tampered_token_another_secret_an_expired_one_and_alg_none_are_refused(host):
    h = host()
    sid, token = h.paused()
    claims = claims_of(token)
    head, body, signature = token.split(".")
    tampered = head + "." + sign({**claims, "sub": "mallory"}, SECRET).split(".")[1] + "." + signature
    none_head = sign({}, SECRET).split(".")[0].replace("SFMyNTYi", "bm9uZSIs")  # {"alg":"none",...}
    attempts = {
        "tampered": tampered,
        "another secret": sign(claims, b"another secret, 32 bytes or more"),
        "expired": sign({**claims, "exp": int(time.time()) - 1}, SECRET),
        "alg none": f"{none_head}.{body}.",
        "not a token": "hello",
        "a signature with junk": token + "x",
    }
    for what, forged in attempts.items():
        status, _, answer = h.verdict(sid, forged)
        assert status == 403, what
        assert "signature" in answer["error"] or "expired" in answer["error"] or "three parts" in answer["error"]
    assert h.refunds() == []
    assert sum(what == "refused 403" for _, _, what, _ in h.trail()) == len(attempts)


def test_a_used_token_replayed_finds_nothing_pending(host):
    h = host()
    sid, token = h.paused()
    assert h.verdict(sid, token)[0] == 200
    status, _, answer = h.verdict(sid, token)
    assert status == 409 and "nothing here waits for a verdict any more" in answer["error"]
    assert len(h.refunds()) == 1


def test_two_approvals_racing_for_one_token_exactly_one_wins_and_the_refund_runs_once(host):
    h = host(rate=(100.0, 100))
    for _ in range(3):
        sid, token = h.paused()
        go, statuses = threading.Barrier(6), []

        def approve_it(sid=sid, token=token, go=go, statuses=statuses):
            go.wait()
            statuses.append(h.verdict(sid, token)[0])
        racers = [threading.Thread(target=approve_it) for _ in range(6)]
        for t in racers:
            t.start()
        for t in racers:
            t.join()
        assert sorted(statuses) == [200] + [409] * 5
        assert sum(call.startswith(sid) for call, _, _ in h.refunds()) == 1
        assert sum(m.name == "issue_refund" for m in h.notebook(sid)) == 1


@settings(max_examples=50, deadline=None)
@given(claims=st.dictionaries(st.sampled_from(["sub", "sid", "jti"]), st.text(max_size=8)),
       at=st.integers(min_value=0), char=st.sampled_from("AQgw-_x."))
def test_changing_any_one_character_of_a_token_breaks_it(claims, at, char):
    token = sign({**claims, "exp": 2**40}, SECRET)
    at %= len(token)
    changed = token[:at] + char + token[at + 1:]
    if changed != token:
        with pytest.raises(ValueError):  # the signature covers the text, so even base64's spare bits count
            verify(changed, SECRET, time.time())
    assert verify(token, SECRET, time.time()) == {**claims, "exp": 2**40}


# ----------------------------------------------------------------------------
# who may see what, and when a session is busy

def test_another_users_session_answers_404_exactly_like_a_missing_one(host):
    h = host()
    sid, token = h.paused()
    for method, path, body in [("GET", "", None), ("GET", "/picture", None), ("POST", "/messages", {"text": "hi"}),
                               ("POST", "/resume", {}),
                               ("POST", "/approvals", {"approval_token": token, "approve": True})]:
        theirs = h.call("dan", method, f"/sessions/{sid}{path}", body)  # dan asks, and only in his own
        missing = h.call("dan", method, f"/sessions/no-such-session{path}", body)
        assert theirs[0] == missing[0] == 404 and theirs[2] == missing[2] == {"error": "no such session"}
    assert h.refunds() == [] and approval.waiting(h.notebook(sid)) is not None


def test_the_asker_gets_the_run_drawn_as_a_picture_with_every_text_escaped(host):
    h = host()
    sid = h.new()
    h.ask(sid, "<img src=x onerror=alert(1)> refund A1234?")
    status, response, svg = h.call("alice", "GET", f"/sessions/{sid}/picture")
    assert status == 200 and response.getheader("Content-Type") == "image/svg+xml; charset=utf-8"
    assert response.getheader("Content-Security-Policy") == "default-src 'none'; style-src 'unsafe-inline'"
    tree = ET.fromstring(svg)  # well-formed, and the question is text in it, never an element
    assert "<img" not in svg and not tree.findall(".//{http://www.w3.org/2000/svg}img")
    assert svg == draw(h.notebook(sid)).svg


def test_a_message_while_an_approval_waits_gets_409_until_the_human_decides(host):
    h = host()
    sid, token = h.paused()
    status, _, answer = h.ask(sid, "hello?")
    assert status == 409 and "waits for a verdict" in answer["error"]
    assert h.verdict(sid, token)[0] == 200
    assert h.ask(sid, "And order B9999?")[0] == 200


def blocking_office(started: threading.Event, release: threading.Event):
    """An office whose first tool waits until the test lets it go, then does nine quick turns."""
    @as_tool
    def wait() -> str:
        """Wait for the test."""
        started.set()
        assert release.wait(60)
        return "waited"

    @as_tool
    def tick() -> str:
        """A quick turn."""
        return "tick"
    policy = scripted(Action("wait", {}), *[Action("tick", {})] * 9, Action("final_answer", {"answer": "ok"}))
    return lambda db: Agent(policy, [wait, tick, final_answer], max_steps=20)


def test_a_second_message_while_a_run_streams_gets_409(host):
    started, release = threading.Event(), threading.Event()
    h = host(blocking_office(started, release))
    sid = h.new()
    first = []
    runner = threading.Thread(target=lambda: first.append(h.ask(sid, "go")))
    runner.start()
    assert started.wait(60)
    status, _, answer = h.ask(sid, "me too")
    assert status == 409 and "a run is streaming" in answer["error"]
    assert h.call("alice", "POST", f"/sessions/{sid}/resume", {})[0] == 409
    assert h.call("alice", "GET", f"/sessions/{sid}")[2]["running"] is True
    release.set()
    runner.join()
    assert first[0][2][-1] == ("done", {"answer": "ok"})
    assert [m.content for m in h.notebook(sid) if m.kind == "question"] == ["go"]  # "me too" never got in


def test_driving_the_loop_or_making_sessions_too_often_gets_429_with_retry_after(host):
    h = host(rate=(0.01, 3))  # three at once, then one per 100 seconds
    sid = h.new()
    assert h.ask(sid)[0] == 200
    assert h.call("alice", "POST", f"/sessions/{sid}/resume", {})[0] == 200
    status, response, answer = h.ask(sid, "again")
    assert status == 429 and "too many runs" in answer["error"]
    assert 90 <= int(response.getheader("Retry-After")) <= 100
    # making sessions counts too: a loop of POST /sessions can't fill the database
    status, response, answer = h.call("alice", "POST", "/sessions", {})
    assert status == 429 and 90 <= int(response.getheader("Retry-After")) <= 100
    assert h.paused("dan")  # per user: dan still drives his own sessions
    assert ("alice", sid, "refused 429", "too many runs: wait and try again") in h.trail()


# ----------------------------------------------------------------------------
# what a run may cost, and what never reaches a client

def test_a_brain_that_calls_tools_forever_is_stopped_by_the_step_budget(host):
    @as_tool
    def spin() -> str:
        """Go round again."""
        return "round"

    def forever(ctx, tools):
        return Action("spin", {}, "once more")
    h = host(lambda db: Agent(forever, [spin, final_answer], max_steps=4))
    sid = h.new()
    status, _, stream = h.ask(sid, "go")
    assert names(stream) == ["result:spin"] * 4 + ["out_of_steps"]
    assert stream[-1][1] == {"note": "out of steps: stopped after 4 turns without an answer"}
    assert len(h.notebook(sid)) == 1 + 4 * 2 + 1


def test_unknown_tools_and_bad_arguments_never_run_and_a_failing_tools_secret_never_leaks(host):
    ran = []

    @as_tool
    def charge(amount: int) -> str:
        """Charge a card."""
        ran.append(amount)
        raise ConnectionError("https://pay.example/charge?key=sk_live_SECRET refused")
    policy = scripted(Action("steal", {"all": True}), Action("charge", {"amount": "lots"}),
                      Action("charge", {"amount": 5}), Action("final_answer", {"answer": "sorry"}))
    h = host(lambda db: Agent(policy, [charge, final_answer]))
    sid = h.new()
    status, _, stream = h.ask(sid, "pay")
    assert names(stream) == ["result:steal", "result:charge", "result:charge", "result:final_answer", "done"]
    assert all(data["error"] for _, data in stream[:3]) and ran == [5]
    assert stream[0][1]["content"].startswith("error: there is no tool named 'steal'")
    assert stream[1][1]["content"].startswith("error: bad arguments for charge")
    assert stream[2][1]["content"] == "error: charge failed: RuntimeError: the tool failed"
    shown = json.dumps(h.call("alice", "GET", f"/sessions/{sid}")[2])
    for seen in (json.dumps(stream), shown, json.dumps(h.trail())):
        assert "SECRET" not in seen and "pay.example" not in seen
    assert ("alice", sid, "tool call", "charge (call 5) failed") in h.trail()


def test_a_brain_that_fails_to_think_ends_the_stream_with_a_generic_error_and_keeps_the_notebook(host):
    def broken(ctx, tools):
        if len(ctx) > 2:
            raise RuntimeError("model server at http://10.0.0.1 said: key sk_live_SECRET expired")
        return Action("tick", {})

    @as_tool
    def tick() -> str:
        """Tick."""
        return "tick"
    h = host(lambda db: Agent(broken, [tick, final_answer]))
    sid = h.new()
    status, _, stream = h.ask(sid, "go")
    assert names(stream) == ["result:tick", "error"] and "SECRET" not in json.dumps(stream)
    assert len(h.notebook(sid)) == 3  # question, decision, result: kept
    assert h.call("alice", "GET", f"/sessions/{sid}")[2]["running"] is False  # and the session is free


def test_a_brain_with_no_move_streams_what_was_wrong_and_nothing_runs(host):
    policy = scripted(Action(None, reasoning="your reply was cut off at 200 tokens"),
                      Action("final_answer", {"answer": "ok"}))
    h = host(lambda db: Agent(policy, [final_answer]))
    sid = h.new()
    status, _, stream = h.ask(sid, "go")
    assert stream[0] == ("no_move", {"note": "your reply was cut off at 200 tokens", "at": 1})
    assert names(stream) == ["no_move", "result:final_answer", "done"]
    assert [m.kind for m in h.notebook(sid)] == ["question", "no_move", "decision", "result"]


# ----------------------------------------------------------------------------
# the brain's words, as they come: thinking events

def test_a_python_brain_thinks_out_loud_with_thinking_and_outside_a_request_nobody_hears(host):
    def brain(ctx, tools):
        thinking("let me ")
        thinking("")  # a chunk with no words: only asks whether the client is still there
        thinking("<b>see</b>")
        return Action("final_answer", {"answer": "seen"}, "done looking")
    thinking("nobody hears this")  # outside a request it does nothing
    h = host(lambda db: Agent(brain, [final_answer]))
    sid = h.new()
    status, _, stream = h.ask(sid, "look")
    assert stream == [("thinking", {"text": "let me "}), ("thinking", {"text": "<b>see</b>"}),
                      ("result", {"tool": "final_answer", "args": '{"answer": "seen"}', "reasoning": "done looking",
                                  "content": "seen", "error": False, "at": 2}),
                      ("done", {"answer": "seen"})]
    assert len(h.notebook(sid)) == 3  # the words were the brain's, not a note


def test_the_llm_offices_words_stream_as_thinking_events_in_pieces_before_its_move(host):
    model = serve([reply("Let me look.", calls=[("look_up_order", '{"order_id": "A1234"}')]),
                   reply("That is all I can say.")])
    try:
        h = host(llm_office("stand-in", model.url))
        sid = h.new()
        status, _, stream = h.ask(sid)
    finally:
        model.close()
    kinds = [event for event, _ in stream]
    first = kinds.index("result")
    assert first > 1 and set(kinds[:first]) == {"thinking"}  # in pieces, before the move they led to
    assert "".join(data["text"] for _, data in stream[:first]) == "Let me look."
    assert all(data.keys() == {"text"} for event, data in stream if event == "thinking")
    assert [event for event in kinds if event != "thinking"] == ["result", "result", "done"]
    assert stream[-1] == ("done", {"answer": "That is all I can say."})
    assert stream[first][1]["content"] == "A1234, Wireless Headphones, $79, delivered, reported defective"


def test_a_client_gone_while_the_llm_thinks_stops_the_brain_mid_reply_and_the_session_goes_on(host):
    model = serve([reply("Let me think this over for a good long while. " * 6, pause=0.05), reply("Sorry, no.")])
    try:
        h = host(llm_office("stand-in", model.url))
        sid = h.new()
        conn = socket.create_connection(("127.0.0.1", h.port))
        conn.settimeout(60)
        body = json.dumps({"text": QUESTION}).encode()
        conn.sendall(f"POST /sessions/{sid}/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                     f"{h.users['alice']}\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
        got = b""
        while b"event: thinking" not in got:  # the brain has begun to speak
            got += conn.recv(1) or pytest.fail(f"the stream ended before any thinking: {got!r}")
        conn.close()
        assert model.hung_up.wait(60)  # the brain closed the model's reply mid-way: it stopped thinking
        deadline = time.monotonic() + 60
        while h.call("alice", "GET", f"/sessions/{sid}")[2]["running"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [m.kind for m in h.notebook(sid)] == ["question"]  # nothing half-decided was written
        assert ("alice", sid, "cancelled", "the client went away") in h.trail()
        status, _, stream = h.call("alice", "POST", f"/sessions/{sid}/resume", {})
        assert stream[-1] == ("done", {"answer": "Sorry, no."})
    finally:
        model.close()


def test_a_tools_progress_streams_as_events_before_its_result_and_the_log_keeps_a_failures_last(host):
    def copy_files(count: int) -> str:
        for i in range(1, count + 1):
            report(i, count, f"copying file {i}")
            if i == 2 and count > 2:
                raise OSError("disk full")
        return f"copied {count} files"
    copying = keeping(Tool("copy_files", "Copy files", copy_files))
    brain = scripted(Action("copy_files", {"count": 2}), Action("copy_files", {"count": 5}),
                     Action("final_answer", {"answer": "half done"}))
    h = host(lambda db: Agent(brain, [copying, final_answer]))
    logged = []
    h.server.log = logged.append  # the server's log, read here
    sid = h.new()
    status, _, stream = h.ask(sid, "copy")
    assert [(event, data) for event, data in stream if event == "progress"] == [
        ("progress", {"call": 1, "done": 1, "total": 2, "message": "copying file 1"}),
        ("progress", {"call": 1, "done": 2, "total": 2, "message": "copying file 2"}),
        ("progress", {"call": 3, "done": 1, "total": 5, "message": "copying file 1"}),
        ("progress", {"call": 3, "done": 2, "total": 5, "message": "copying file 2"})]
    # each call's progress comes before its result
    assert names(stream) == ["progress", "progress", "result:copy_files", "progress", "progress",
                             "result:copy_files", "result:final_answer", "done"]
    # question, decision, result, decision, result, decision, result: a report is no note
    notebook = h.notebook(sid)
    assert len(notebook) == 7 and notebook[4].error
    # the host hides a tool's failure from the brain and the page, and keeps how far it got (said once, though
    # the office kept the tool too); its log keeps the whole of it
    assert notebook[4].content == ("error: copy_files failed: RuntimeError: the tool failed "
                                   "(it got as far as 2 of 5: copying file 2)")
    assert [line for line in logged if "a tool failed" in line] == [
        f"{sid}/3: a tool failed: RuntimeError: OSError: disk full (it got as far as 2 of 5: copying file 2)"]


def test_a_hosted_tool_that_fails_leaves_how_far_it_got_in_the_notebook_and_the_story_and_hides_its_words(host):
    def copy_files(count: int) -> str:  # the office does not keep it: the host does
        for i in range(1, 3):
            report(i, count, f"copying file {i}")
        raise OSError("disk full at /srv/vault, password hunter2 refused")
    brain = scripted(Action("copy_files", {"count": 5}), Action("final_answer", {"answer": "stopped"}))
    h = host(lambda db: Agent(brain, [Tool("copy_files", "Copy files", copy_files), final_answer]))
    logged = []
    h.server.log = logged.append
    sid = h.new()
    status, _, stream = h.ask(sid, "copy")
    said = "error: copy_files failed: RuntimeError: the tool failed (it got as far as 2 of 5: copying file 2)"
    assert [data["content"] for event, data in stream if event == "result"] == [said, "stopped"]
    status, _, shown = h.call("alice", "GET", f"/sessions/{sid}")  # the notebook, as the session's GET gives it
    notebook = from_json(json.dumps(shown["notebook"]))
    assert status == 200 and notebook[2].content == said and notebook[2].error
    told = story(notebook)
    assert "    -> copy_files returned: " + said in told.split("\n")
    # the exception's words went to the log only
    for seen in (json.dumps(stream), json.dumps(shown), told, json.dumps(h.trail())):
        assert "disk full" not in seen and "hunter2" not in seen and "/srv/vault" not in seen
    assert [line for line in logged if "a tool failed" in line] == [
        f"{sid}/1: a tool failed: OSError: disk full at /srv/vault, password hunter2 refused"]


# ----------------------------------------------------------------------------
# bad requests: a clear 4xx with a JSON error, and nothing changes

BAD_BODIES = [
    (b"{not json", 400, "not valid JSON"),
    (b'{"text": "a", "text": "b"}', 400, '"text" is given twice'),
    (b'{"text": ' + b"[" * 50 + b"]" * 50 + b"}", 400, "the JSON is nested deeper than 8 levels (objects and "
                                                      "lists inside one another): send it flatter"),
    (b'{"text": ' + b"[" * 100000 + b"]" * 100000 + b"}", 413, "over 65536 bytes"),
    (b'{"text": "\\ud800 lone"}', 400, "the text holds a lone surrogate (\\ud800), which is not valid Unicode: "
                                    "send whole characters"),
    (b'{"text": NaN}', 400, "NaN is not a number JSON can hold"),
    (b'{"text": 1e999}', 400, "1e999 is not a number JSON can hold"),
    (b'["text"]', 400, "must be a JSON object"),
    (b'{"text": "hi", "admin": true}', 400, "unknown ['admin']"),
    (b"{}", 400, "missing ['text']"),
    (b'{"text": 5}', 400, '"text" must be a JSON string'),
    (b'{"text": "   "}', 400, "1 to 4000 characters"),
    (json.dumps({"text": "x" * (MAX_TEXT + 1)}).encode(), 400, "1 to 4000 characters"),
    (b"\xff\xfe", 400, "the body is not UTF-8 (byte 1 is 0xff): send JSON text in UTF-8"),
]


@pytest.mark.parametrize("body, status, says", BAD_BODIES, ids=[s for _, _, s in BAD_BODIES])
def test_a_bad_message_body_is_refused_with_a_json_error_and_changes_nothing(host, body, status, says):
    h = host()
    sid = h.new()
    got, response, answer = h.call("alice", "POST", f"/sessions/{sid}/messages", body)
    assert (got, response.getheader("Content-Type")) == (status, "application/json")
    assert says in answer["error"]
    assert len(h.notebook(sid)) == 0


def test_bad_approval_bodies_are_refused(host):
    h = host()
    sid, token = h.paused()
    for body, says in [({"approval_token": token}, "missing ['approve']"),
                       ({"approval_token": token, "approve": 1}, "true or false"),
                       ({"approval_token": token, "approve": True, "reason": "x"}, "not the other way"),
                       ({"approval_token": token, "approve": False, "args": {}}, "not the other way"),
                       ({"approval_token": token, "approve": True, "args": "{}"}, "JSON object"),
                       # edited arguments nine deep, or with half a character: each in its own words
                       ({"approval_token": token, "approve": True, "args": {"a": [[[[[[[[1]]]]]]]]}},
                        "the JSON is nested deeper than 8 levels (objects and lists inside one another): "
                        "send it flatter"),
                       ({"approval_token": token, "approve": True, "args": {"order_id": "A1\ud800"}},
                        "the text holds a lone surrogate (\\ud800), which is not valid Unicode: send whole "
                        "characters")]:
        status, _, answer = h.call("alice", "POST", f"/sessions/{sid}/approvals", body)
        assert status == 400 and says in answer["error"], body
    assert h.verdict(sid, token)[0] == 200


def test_a_missing_or_unknown_bearer_token_gets_401_and_writes_nothing_in_the_audit_trail(host):
    h = host()
    sid, token = h.paused()
    before = h.trail()
    for bearer in (None, "mallory-guessed-token", h.users["alice"] + "x", ""):
        for method, path, body in [("POST", "/sessions", {}), ("GET", "/approvals", None), ("GET", "/me", None),
                                   ("GET", f"/sessions/{sid}", None), ("POST", f"/sessions/{sid}/resume", {}),
                                   ("POST", f"/sessions/{sid}/approvals", {"approval_token": token, "approve": True})]:
            status, response, answer = request(h.port, method, path, bearer, body)
            assert status == 401 and response.getheader("WWW-Authenticate") == "Bearer"
            assert "Bearer <token>" in answer["error"]
    # a stranger's requests go to the server's log, not the audit trail: they could fill it for ever
    assert h.trail() == before and h.verdict(sid, token)[0] == 200
    status, _, answer = h.call("alice", "GET", "/nowhere")
    assert status == 404 and "the routes are GET /me, POST /sessions, GET /approvals" in answer["error"]


@pytest.mark.parametrize("authorization", ["alice-token-0123456789", "Basic alice-token-0123456789",
                                           "Bearer" + "alice-token-0123456789", "Token alice-token-0123456789"])
def test_a_known_token_without_the_bearer_prefix_gets_401(host, authorization):
    h = host()
    status, response, answer = request(h.port, "POST", "/sessions", None, authorization=authorization)
    assert status == 401 and response.getheader("WWW-Authenticate") == "Bearer"
    assert request(h.port, "POST", "/sessions", None, authorization="Bearer alice-token-0123456789")[0] == 201


def test_a_chunked_body_is_refused_411(host):
    h = host()
    conn = socket.create_connection(("127.0.0.1", h.port))
    conn.sendall(b"POST /sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
                 b"Authorization: Bearer alice-token-0123456789\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
    assert conn.makefile("rb").readline().startswith(b"HTTP/1.0 411")
    conn.close()


def test_a_slow_client_is_dropped_while_others_are_served(host):
    h = host(timeout=1.0)
    slow = socket.create_connection(("127.0.0.1", h.port))
    slow.sendall(b"POST /sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")  # 99 bytes never come
    started = time.monotonic()
    assert h.new()  # served meanwhile
    slow.settimeout(60)
    assert slow.recv(100) == b""  # the server hung up on it
    assert time.monotonic() - started < 30
    slow.close()
    stalled = socket.create_connection(("127.0.0.1", h.port))
    stalled.sendall(b"GET /sessions/x HTTP/1.1\r\n")  # the headers never end
    stalled.settimeout(60)
    assert stalled.recv(100) == b""
    stalled.close()


def test_a_client_that_trickles_its_request_a_byte_at_a_time_is_dropped_all_the_same(host):
    h = host(timeout=1.0)
    slow = socket.create_connection(("127.0.0.1", h.port))
    slow.settimeout(0.3)
    started, dropped = time.monotonic(), False
    for byte in b"POST /sessions HTTP/1.1\r\nHost: x\r\n" * 200:  # each byte well within the 1 s wait
        if dropped or time.monotonic() - started > 60:
            break
        try:
            slow.sendall(bytes([byte]))
            dropped = slow.recv(1) == b""
        except TimeoutError:
            pass  # nothing to read yet: the server is still listening
        except OSError:  # reset: the server hung up
            dropped = True
    assert dropped and time.monotonic() - started < 30
    slow.close()
    assert h.new()  # and the others are served


@pytest.mark.parametrize("length", ["\u00b2", "10, 10", "1e3", "-1"])
def test_a_content_length_that_is_not_one_whole_number_is_a_400(host, length):
    h = host()
    conn = socket.create_connection(("127.0.0.1", h.port))
    extra = "Content-Length: 2\r\n" if length == "10, 10" else ""
    conn.sendall(f"POST /sessions HTTP/1.1\r\nHost: x\r\n{extra}Content-Length: {length}\r\n"
                 f"Authorization: Bearer alice-token-0123456789\r\n\r\n{{}}".encode("latin-1"))
    assert conn.makefile("rb").readline().startswith(b"HTTP/1.0 400")
    conn.close()


def test_a_strangers_long_session_id_is_kept_short_in_the_audit_trail(host):
    h = host()
    assert h.call("alice", "GET", "/sessions/" + "x" * 60_000)[0] == 404
    assert max(len(row[1] or "") for row in h.trail()) <= 200


def test_a_client_that_disconnects_mid_stream_cancels_the_run_and_the_session_goes_on(host):
    started, release = threading.Event(), threading.Event()
    h = host(blocking_office(started, release))
    sid = h.new()
    conn = socket.create_connection(("127.0.0.1", h.port))
    body = b'{"text": "go"}'
    conn.sendall(f"POST /sessions/{sid}/messages HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {h.users['alice']}\r\n"
                 f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    assert started.wait(60)
    head = b""
    while not head.endswith(b"\r\n\r\n"):  # every byte sent so far read, so close() says goodbye (FIN), no reset
        head += conn.recv(1)
    assert head.startswith(b"HTTP/1.0 200")
    conn.close()  # gone, while the first tool still works
    release.set()
    deadline = time.monotonic() + 60
    while h.call("alice", "GET", f"/sessions/{sid}")[2]["running"] and time.monotonic() < deadline:
        time.sleep(0.05)
    ctx = h.notebook(sid)
    # the server sees the client has gone before the next step: nothing new starts, what was done is kept
    assert ctx[2].content == "waited" and sum(m.kind == "decision" for m in ctx) == 1 and ctx.last().kind == "result"
    status, _, stream = h.call("alice", "POST", f"/sessions/{sid}/resume", {})
    assert stream[-1] == ("done", {"answer": "ok"})
    assert sum(m.content == "tick" for m in h.notebook(sid)) == 9  # each turn once, none twice


# ----------------------------------------------------------------------------
# the audit trail, and a restart

def test_the_audit_trail_keeps_every_call_and_verdict_and_refusal_and_cannot_be_changed(host):
    h = host()
    sid, token = h.paused()
    h.verdict(sid, token)
    h.verdict(sid, token)  # replayed: 409
    h.call("dan", "GET", f"/sessions/{sid}")  # not dan's: 404
    # who asked, who approved (and whose request ran what), and every refusal
    assert h.trail() == [
        ("alice", sid, "created", ""),
        ("alice", sid, "tool call", "look_up_order (call 1)"),
        ("alice", sid, "tool call", "check_policy (call 3)"),
        ("alice", sid, "approval requested", 'issue_refund {"order_id": "A1234", "amount": 79}'),
        ("bob", sid, "approved", 'asked by alice: issue_refund {"order_id": "A1234", "amount": 79}'),
        ("bob", sid, "tool call", "issue_refund (call 5)"),
        ("bob", sid, "tool call", "final_answer (call 8)"),
        ("bob", sid, "refused 409", "nothing here waits for a verdict any more: it was decided, "
                                    "or the run moved on"),
        ("dan", sid, "refused 404", "no such session"),
    ]
    with sqlite3.connect(h.db) as db:
        # REPLACE deletes the row it replaces without firing the DELETE trigger: refused all the same
        for change in ("UPDATE audit SET who = 'mallory'", "DELETE FROM audit",
                       "INSERT OR REPLACE INTO audit VALUES (1, '2026', 'mallory', NULL, 'created', '')",
                       "REPLACE INTO audit VALUES (5, '2026', 'mallory', NULL, 'approved', '')",
                       "INSERT INTO audit VALUES (5, '', '', '', '', '') ON CONFLICT (n) DO UPDATE SET who = 'm'"):
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                db.execute(change)
    assert len(h.trail()) == 9 and h.trail()[0] == ("alice", sid, "created", "")


def test_sessions_pending_approvals_and_tokens_survive_a_restart(tmp_path):
    first = Host(tmp_path)
    sid, token = first.paused()
    first.close()
    second = Host(tmp_path)  # the same database file and the same secret
    try:
        assert approval.waiting(second.notebook(sid)).tool == "issue_refund"
        status, _, stream = second.verdict(sid, token)
        assert status == 200 and stream[-1] == ("done", {"answer": ANSWER})
        assert second.trail()[0] == ("alice", sid, "created", "")  # the trail from before the restart too
    finally:
        second.close()


def test_a_verdict_saved_but_not_carried_out_is_carried_out_by_resume_and_paid_once(host):
    h = host()
    sid, token = h.paused()
    # as if the server had died after saving the verdict and before running the refund
    s = h.server.store.load(sid)
    ctx = approval.verdict(s.context, h.server.agent.tools["issue_refund"], True, by="bob")
    assert h.server.store.save(sid, ctx, s.version) is not None
    assert h.verdict(sid, token)[0] == 409  # the verdict used the token up
    status, _, answer = h.ask(sid, "hello?")  # and a verdict not yet carried out is waited on too
    assert status == 409 and answer["error"] == ("the verdict on issue_refund is saved but not carried out yet: "
                                                 "resume the session to carry it out")
    assert h.call("carol", "POST", f"/sessions/{sid}/resume", {})[0] == 404  # nor hers to see any more
    status, _, stream = h.call("alice", "POST", f"/sessions/{sid}/resume", {})
    assert names(stream) == ["result:issue_refund", "result:final_answer", "done"]
    assert stream[0][1] == {"tool": "issue_refund", "args": '{"order_id": "A1234", "amount": 79}',
                            "reasoning": "it qualifies, and a refund needs a human to sign off",
                            "content": "$79 refunded to the original card (receipt R1)", "error": False, "at": 7}
    assert h.refunds() == [(f"{sid}/5", "A1234", 79)]
    assert ("alice", sid, "tool call", "issue_refund (call 5)") in h.trail()


def test_only_the_approver_whose_verdict_waits_may_resume_not_one_who_ruled_earlier_in_the_session(host):
    h = host()
    sid, token = h.paused()
    assert h.verdict(sid, token)[2][-1][0] == "done"  # bob approved the first refund
    status, _, stream = h.ask(sid, "Can I get a refund for order A1234 after all?")
    assert stream[-1][0] == "approval_required"
    # carol approves the second, and the server dies after saving her verdict, before carrying it out
    s = h.server.store.load(sid)
    ctx = approval.verdict(s.context, h.server.agent.tools["issue_refund"], True, by="carol")
    assert h.server.store.save(sid, ctx, s.version) is not None
    # bob still sees the session (his verdict is in it), but the verdict that waits is carol's
    assert h.call("bob", "GET", f"/sessions/{sid}")[0] == 200
    status, _, answer = h.call("bob", "POST", f"/sessions/{sid}/resume", {})
    assert (status, answer) == (403, {"error": "only the person who asked in this session may resume it"})
    assert h.notebook(sid) == ctx  # nothing ran
    status, _, stream = h.call("carol", "POST", f"/sessions/{sid}/resume", {})
    assert status == 200 and names(stream) == ["result:issue_refund", "result:final_answer", "done"]
    assert h.refunds() == [(f"{sid}/5", "A1234", 79), (f"{sid}/15", "A1234", 79)]
    assert ("carol", sid, "tool call", "issue_refund (call 15)") in h.trail()


def test_the_defaults_the_readme_quotes(host, tmp_path, monkeypatch):
    h = host()
    assert (h.server.client_timeout, h.server.lease, h.server.token_ttl) == (10.0, 30.0, 600)
    assert (MAX_BODY, MAX_TEXT, MAX_DEPTH) == (64 * 1024, 4000, 8)
    assert [h.server.limit("carol") for _ in range(20)] == [0.0] * 20  # 20 runs at once,
    assert 0 < h.server.limit("carol") <= 1.0  # then one a second
    # the signing secret: a file made 0600 on first start, unless $MICROAGENT_HOST_SECRET is set
    monkeypatch.delenv("MICROAGENT_HOST_SECRET", raising=False)
    made = secret_from(str(tmp_path / "secret"))
    assert len(made) == 32 and secret_from(str(tmp_path / "secret")) == made
    monkeypatch.setenv("MICROAGENT_HOST_SECRET", "from the environment, 32 bytes or more")
    assert secret_from(str(tmp_path / "secret")) == b"from the environment, 32 bytes or more"


def test_what_http_server_refuses_by_itself_is_json_too(host):
    h = host()  # an unknown method; a request line over 65536 bytes (sent whole: all of it is read)
    for raw, status in [(b"BREW /sessions HTTP/1.1\r\n\r\n", 501), (b"GET /" + b"x" * 65532, 414)]:
        conn = socket.create_connection(("127.0.0.1", h.port))
        conn.sendall(raw)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
        conn.close()
        head, body = answer.decode().split("\r\n\r\n", 1)
        assert head.split(" ")[1] == str(status) and "application/json" in head
        assert json.loads(body)["error"]


def test_a_notebook_broken_in_the_database_is_refused_with_500_and_its_text_never_shown(host, tmp_path):
    h = host()
    sid, token = h.paused()
    broken = '{"format": "microagent.context/1", "messages": [{"role": "tool", "content": "$1M", "name": "%s"}]}'
    with sqlite3.connect(h.db) as db:  # someone adds a note by hand, to the server that has the rest in memory:
        # a result from a tool the waiting decision did not call
        db.execute("INSERT INTO notes VALUES (?, 6, ?)", (sid, broken % "look_up_order"))
        db.execute("UPDATE sessions SET length = 7, version = version + 1 WHERE id = ?", (sid,))
    status, _, answer = h.call("alice", "GET", f"/sessions/{sid}")
    assert status == 500 and answer == {"error": "the server failed; the details went to its log"}
    assert h.verdict(sid, token)[0] == 500 and h.refunds() == []
    sid, token = h.paused()
    with sqlite3.connect(h.db) as db:  # or rewrites an old note, the trigger dropped: a result with no decision
        db.execute("DROP TRIGGER notes_no_update")
        db.execute("UPDATE notes SET note = ? WHERE session = ? AND n = 1", (broken % "issue_refund", sid))
    fresh = Host(tmp_path / "0")  # the same database, read afresh (by another process, or after a restart)
    try:
        assert fresh.call("alice", "GET", f"/sessions/{sid}")[0] == 500
        assert fresh.verdict(sid, token)[0] == 500 and fresh.refunds() == []
    finally:
        fresh.close()


def test_an_edited_approval_streams_the_arguments_the_tool_ran_with(host):
    h = host()
    sid, token = h.paused()
    status, _, stream = h.verdict(sid, token, args={"order_id": "A1234", "amount": 70})
    assert stream[0][1]["args"] == '{"order_id": "A1234", "amount": 70}'
    sid, token = h.paused()
    status, _, stream = h.call("bob", "POST", f"/sessions/{sid}/approvals",
                               {"approval_token": token, "approve": False})
    assert stream[0][1]["args"] is None and stream[0][1]["content"] == "denied by bob: no reason given"


@pytest.fixture(scope="module")
def waiting(tmp_path_factory):
    """One server for many generated requests, and a session on it that waits for approval."""
    h = Host(tmp_path_factory.mktemp("waiting"), rate=(1000.0, 1000))
    yield h, *h.paused()
    h.close()


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                           max_leaves=10)
bodies = st.one_of(st.binary(max_size=100), json_values.map(lambda v: json.dumps(v).encode()),
                   st.dictionaries(st.sampled_from(["text", "approval_token", "approve", "reason", "args", "x"]),
                                   json_values, max_size=4).map(lambda v: json.dumps(v).encode()))


@settings(max_examples=150, deadline=None)
@given(route=st.sampled_from(["messages", "approvals", "resume"]), body=bodies)
def test_whatever_a_client_sends_it_gets_a_json_refusal_and_nothing_changes(waiting, route, body):
    h, sid, token = waiting
    before = h.notebook(sid)
    user = "bob" if route == "approvals" else "alice"  # the one who may approve, and the one who asks
    status, response, answer = h.call(user, "POST", f"/sessions/{sid}/{route}", body)
    if route == "resume" and status == 200:  # a well-formed resume: asked again (the old token stops working)
        assert answer[-1][0] == "approval_required"
    else:
        assert status in (400, 403, 409) and response.getheader("Content-Type") == "application/json"
        assert isinstance(answer["error"], str) and answer["error"]
    assert h.notebook(sid) == before and h.refunds() == []


# ----------------------------------------------------------------------------
# who may approve: roles, the approver's queue, and an approver who is not the asker

def test_nobody_approves_their_own_request_unless_the_host_is_started_to_allow_it(host):
    h = host()
    sid = h.new("carol")  # carol asks and approves, but not her own request
    status, _, stream = h.ask(sid, user="carol")
    assert stream[-1][1]["waits_for"] == "an approver" and "approval_token" not in stream[-1][1]
    assert h.queue("carol") == [] and [asked["session"] for asked in h.queue("bob")] == [sid]
    # even a token the server signed for her own request is refused
    bobs = claims_of(h.token(sid))
    forged = sign({**bobs, "sub": "carol"}, SECRET)
    status, _, answer = h.verdict(sid, forged, user="carol", args={"order_id": "A1234", "amount": 9999})
    assert status == 403 and answer["error"] == "you asked for this yourself, so someone else approves it"
    # alice may only ask: she is refused the approval whatever token she holds
    sid, token = h.paused("alice")
    status, _, answer = h.verdict(sid, sign({**claims_of(token), "sub": "alice"}, SECRET), user="alice")
    assert status == 403 and answer["error"] == ('alice may not approve what the agent asks to do: the users file '
                                                 'does not give alice the role "approves"')
    assert h.refunds() == []
    # one flag away: the host started with approve_own lets carol approve her own, and still not alice
    one = host(approve_own=True)
    sid = one.new("carol")
    status, _, stream = one.ask(sid, user="carol")
    assert claims_of(stream[-1][1]["approval_token"])["sub"] == "carol"
    assert [asked["session"] for asked in one.queue("carol")] == [sid]
    assert one.verdict(sid, stream[-1][1]["approval_token"], user="carol")[2][-1] == ("done", {"answer": ANSWER})
    sid = one.new("alice")
    assert "approval_token" not in one.ask(sid)[2][-1][1]  # alice asks only


def test_each_role_does_only_what_it_may_and_me_says_which(host):
    h = host()
    assert h.call("bob", "GET", "/me")[2] == {"user": "bob", "roles": ["approves"], "approves_own": False}
    assert h.call("carol", "GET", "/me")[2]["roles"] == ["approves", "asks"]
    status, _, answer = h.call("bob", "POST", "/sessions", {})  # bob approves, and does not ask
    assert status == 403 and 'the role "asks"' in answer["error"]
    status, _, answer = h.call("alice", "GET", "/approvals")  # alice asks, and has no queue
    assert status == 403 and 'the role "approves"' in answer["error"]
    sid, token = h.paused()
    # bob may read what waits for him, and rule on it; not write in alice's session or drive it
    assert h.call("bob", "GET", f"/sessions/{sid}")[2]["pending"]["tool"] == "issue_refund"
    assert h.call("bob", "GET", f"/sessions/{sid}/picture")[0] == 200
    status, _, answer = h.call("bob", "POST", f"/sessions/{sid}/messages", {"text": "pay me instead"})
    assert status == 403 and answer["error"] == "only the person who asked in this session may write in it"
    assert h.call("bob", "POST", f"/sessions/{sid}/resume", {})[0] == 403
    # carol approves too, so she sees it while it waits; a token made out to bob is not hers to use
    assert h.call("carol", "GET", f"/sessions/{sid}")[0] == 200
    status, _, answer = h.verdict(sid, token, user="carol")
    assert status == 403 and answer["error"] == "the approval token is not for this user"
    assert h.verdict(sid, token)[0] == 200  # bob decides
    # now bob, who ruled, still sees it; carol, who did not, sees nothing, as if it never was
    assert h.call("bob", "GET", f"/sessions/{sid}")[0] == 200
    assert h.call("carol", "GET", f"/sessions/{sid}")[2] == {"error": "no such session"}
    assert h.call("alice", "GET", f"/sessions/{sid}")[2]["stopped"] == "done"


def test_the_queue_holds_every_decision_waiting_across_sessions_with_its_arguments_in_full(host):
    @as_tool(needs_approval=True)
    def wire(to: str, amount: float, memo: str, account: str, bank: str, when: str) -> str:
        """Wire money."""
        return f"wired {amount} to {to}"

    args = {"to": "ACME", "amount": 12.5, "memo": "x" * 500, "account": "DE89 3704", "bank": "B", "when": "now"}
    policy = scripted(Action("wire", args, "pay the supplier"), Action("final_answer", {"answer": "paid"}))
    h = host(lambda db: Agent(policy, [wire, final_answer]))
    sids = [h.new(user) for user in ("alice", "dan", "carol")]
    for sid, user in zip(sids, ("alice", "dan", "carol"), strict=True):
        h.ask(sid, "pay ACME", user=user)
    waiting = h.queue("bob")
    assert [(w["session"], w["asker"]) for w in waiting] == list(zip(sids, ["alice", "dan", "carol"], strict=True))
    assert all(w["args"] == args and w["question"] == "pay ACME" for w in waiting)  # in full: 500 x's
    assert [w["asker"] for w in h.queue("carol")] == ["alice", "dan"]  # not her own
    assert h.verdict(sids[1], waiting[1]["approval_token"])[0] == 200
    assert [w["session"] for w in h.queue("bob")] == [sids[0], sids[2]]


def test_the_users_file_gives_each_user_a_token_and_roles(tmp_path):
    made = users_from(str(tmp_path / "users.json"))  # a first start: alice asks, bob approves
    assert {name: user["roles"] for name, user in made.items()} == {"alice": ["asks"], "bob": ["approves"]}
    assert read_users({"ann": "a bare token, both roles"}) == {"ann": ("a bare token, both roles",
                                                                     frozenset({"asks", "approves"}))}
    token = "t" * 16
    for users, says in [([], "a JSON object"), ({}, "a JSON object"),
                        ({"ann": "short"}, "16 characters"), ({"ann": {"roles": ["asks"]}}, "16 characters"),
                        ({"ann": {"token": token, "roles": []}}, "roles are a list"),
                        ({"ann": {"token": token, "roles": ["admin"]}}, "roles are a list"),
                        ({"ann": {"token": token, "roles": "asks"}}, "roles are a list"),
                        ({"ann\nbob approved": token}, "a user's name"), ({"": token}, "a user's name"),
                        ({"ann": token, "bea": token}, "share a bearer token")]:
        with pytest.raises(ValueError, match=says):
            read_users(users)
    (tmp_path / "bad.json").write_text('{"ann": {"token": "%s", "roles": ["root"]}}' % token)
    with pytest.raises(SystemExit, match="bad.json: ann: roles are a list"):
        users_from(str(tmp_path / "bad.json"))


# ----------------------------------------------------------------------------
# the defects an attack over HTTP found, each fixed

def trickle_until_cut(port: int, start: bytes) -> None:
    """Send the start of a request, then one more header byte at a time, until the server hangs up."""
    conn = socket.create_connection(("127.0.0.1", port))
    conn.settimeout(0.2)
    conn.sendall(start + b"X-Padding: ")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            conn.sendall(b"x")
            if conn.recv(1) == b"":  # the server shut the connection: its deadline for the whole request
                break
        except TimeoutError:
            continue
        except OSError:
            break
    conn.close()
    time.sleep(0.3)  # what the server does with it, it has done by now


def test_a_request_cut_off_mid_headers_by_the_deadline_is_never_carried_out(host):
    h = host(timeout=1.0)
    auth = f"Authorization: Bearer {h.users['alice']}\r\n".encode()
    trickle_until_cut(h.port, b"POST /sessions HTTP/1.1\r\nHost: x\r\n" + auth)
    assert [row for row in h.trail() if row[2] == "created"] == []  # no session was made from half a request
    sid, token = h.paused()
    trickle_until_cut(h.port, f"POST /sessions/{sid}/resume HTTP/1.1\r\nHost: x\r\n".encode() + auth)
    # the half resume took no lease and no token: the approver's yes goes through at once
    assert h.verdict(sid, token)[2][-1] == ("done", {"answer": ANSWER})


def reset_right_after(h, monkeypatch, user: str, path: str, body: dict) -> None:
    """Send a whole request, and close with a reset (SO_LINGER 0) once the server has read it and
    is saving the session it takes, before any answer has gone out."""
    saving, go_on, saved = threading.Event(), threading.Event(), threading.Event()
    save = Store.save

    def slow(self, *args, **more):  # the first save that takes a lease waits for the reset
        if not (more.get("lease_until") and not saving.is_set()):
            return save(self, *args, **more)
        saving.set()
        go_on.wait(30)
        try:
            return save(self, *args, **more)
        finally:
            saved.set()
    monkeypatch.setattr(Store, "save", slow)
    conn = socket.create_connection(("127.0.0.1", h.port))
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    data = json.dumps(body).encode()
    conn.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {h.users[user]}\r\n"
                 f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
    assert saving.wait(30)
    conn.close()
    time.sleep(0.1)  # the reset has arrived
    go_on.set()
    assert saved.wait(30)  # the session is taken: from here on, running says whether it was let go
    monkeypatch.undo()


def free_soon(h, sid: str) -> float:
    """Seconds until the session stops reading running (at most 10: well within the 30 s lease)."""
    started = time.monotonic()
    while h.call("alice", "GET", f"/sessions/{sid}")[2]["running"] and time.monotonic() - started < 10:
        time.sleep(0.05)
    return time.monotonic() - started


def test_a_client_that_resets_right_after_its_request_leaves_the_session_free_and_a_verdict_carried_out(
        host, monkeypatch):
    h = host()
    sid = h.new()
    reset_right_after(h, monkeypatch, "alice", f"/sessions/{sid}/messages", {"text": QUESTION})
    assert free_soon(h, sid) < 10
    assert [m.kind for m in h.notebook(sid)] == ["question"]  # it was read, and nothing ran for nobody
    status, _, stream = h.call("alice", "POST", f"/sessions/{sid}/resume", {})  # and it goes on
    assert status == 200 and stream[-1][0] == "approval_required"
    reset_right_after(h, monkeypatch, "bob", f"/sessions/{sid}/approvals",
                      {"approval_token": h.token(sid), "approve": True})
    assert free_soon(h, sid) < 10
    # the verdict was saved, so it was carried out: the refund is paid, once, and the session goes on
    assert h.refunds() == [(f"{sid}/5", "A1234", 79)] and h.notebook(sid)[7].name == "issue_refund"
    assert h.call("alice", "POST", f"/sessions/{sid}/resume", {})[2][-1] == ("done", {"answer": ANSWER})


def test_a_stream_whose_headers_fail_to_go_out_lets_the_session_go(host, monkeypatch):
    h = host()
    sid = h.new()
    sent = Handler.send

    def broken(self, status, headers, payload=b""):
        if headers.get("Content-Type") == "text/event-stream":
            raise RuntimeError("the headers could not be written")
        sent(self, status, headers, payload)
    monkeypatch.setattr(Handler, "send", broken)
    with pytest.raises(http.client.RemoteDisconnected):  # the client hears nothing: the connection closes
        h.ask(sid)
    assert free_soon(h, sid) < 10
    monkeypatch.undo()
    assert h.call("alice", "POST", f"/sessions/{sid}/resume", {})[2][-1][0] == "approval_required"


def test_the_audit_trail_prints_a_reason_with_line_breaks_on_its_own_line(host, capsys):
    h = host()
    sid, token = h.paused()
    forged = "no.\n2026-12-01T09:10:24Z | bob | x | approved | issue_refund\u2028\u202e{\"amount\": 97}"
    h.call("bob", "POST", f"/sessions/{sid}/approvals", {"approval_token": token, "approve": False, "reason": forged})
    main(["--audit", "--db", h.db])
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == len(h.trail())  # a line per row, whatever the rows say
    [denied] = [line for line in printed if " | denied | " in line]
    assert denied.endswith(r"asked by alice: issue_refund: no.\n2026-12-01T09:10:24Z | bob | x | approved | "
                           r"issue_refund\u2028\u202e{\"amount\": 97}".replace('\\"', '"'))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text() | st.none(), min_size=1, max_size=5))
def test_an_audit_row_prints_as_one_line_whatever_its_values_hold(values):
    printed = " | ".join(printable(v) for v in values)
    assert printed.splitlines() in ([printed], [])  # one line: no break of any kind Python knows
    # no control character but tab, no format character (a mark that reorders text, one that prints as
    # nothing), no half a character: each shows as its escape, as in the story
    assert not [c for c in printed if c != "\t" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")]


def test_every_answer_of_the_api_says_nosniff_and_no_store(host):
    h = host()
    sid, token = h.paused()
    answers = [h.call("alice", "GET", "/me"), h.call("alice", "POST", "/sessions", {}), h.call("bob", "GET", "/approvals"),
               h.call("alice", "GET", f"/sessions/{sid}"), h.call("alice", "GET", f"/sessions/{sid}/picture"),
               h.call("alice", "GET", "/nowhere"), h.call("stranger-token-0000", "GET", "/me"),
               h.call("alice", "POST", f"/sessions/{sid}/messages", b"{"), h.verdict(sid, token),
               h.ask(h.new())]
    for status, response, _ in answers:
        assert (response.getheader("X-Content-Type-Options"), response.getheader("Cache-Control")) == \
            ("nosniff", "no-store"), status
    assert {status for status, _, _ in answers} == {200, 201, 400, 401, 404}


def test_the_page_is_served_whatever_the_query_says(host):
    h = host()
    for path in ("/?from=mail", "/?", "/page.js?v=2"):
        conn = socket.create_connection(("127.0.0.1", h.port))
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        head = conn.makefile("rb").read().split(b"\r\n\r\n")[0].decode()
        conn.close()
        assert head.startswith("HTTP/1.0 200") and "Content-Security-Policy" in head, path


# ----------------------------------------------------------------------------
# the defects the host's author found, each fixed

def office_without_a_refund(db):
    return Agent(support_policy, [look_up_order, check_policy, final_answer], name="support")


def test_a_verdict_on_a_tool_the_office_no_longer_has_is_refused_clearly_and_the_session_stays_free(tmp_path):
    first = Host(tmp_path)
    ruled, _ = first.paused()
    s = first.server.store.load(ruled)  # a verdict saved, not carried out: as a crash leaves it
    first.server.store.save(ruled, approval.verdict(s.context, first.server.agent.tools["issue_refund"], True,
                                                     by="bob"), s.version)
    waits, token = first.paused()
    first.close()
    second = Host(tmp_path, office_without_a_refund)  # a new release of the office, without the refund
    try:
        says = "issue_refund is no longer in this office, so a verdict on it can't be carried out"
        assert second.call("alice", "POST", f"/sessions/{ruled}/resume", {})[::2] == (409, {"error": says})
        assert second.verdict(waits, token)[::2] == (409, {"error": says})
        assert second.queue("bob") == []  # nobody is asked to rule on what can't run
        for sid in (ruled, waits):
            assert second.call("alice", "GET", f"/sessions/{sid}")[2]["running"] is False
    finally:
        second.close()


def held_past_its_lease(h, sid: str, question: str, go_on: threading.Event) -> list:
    """Ask in a thread; after more than twice the lease (0.5 s) while the run still works,
    a resume is refused, for the run holds the session; then let it go on: its events."""
    first = []
    runner = threading.Thread(target=lambda: first.append(h.ask(sid, question)))
    runner.start()
    time.sleep(1.2)
    status, _, answer = h.call("alice", "POST", f"/sessions/{sid}/resume", {})
    assert (status, answer) == (409, {"error": "a run is streaming on this session: wait for it to end"})
    go_on.set()
    runner.join(60)
    return first[0][2]


def test_a_brain_thinking_for_longer_than_a_lease_keeps_its_session(host):
    go_on, calls = threading.Event(), []

    def brain(ctx, tools):  # the first time, it thinks out loud for longer than the lease
        calls.append(len(ctx))
        deadline = time.monotonic() + 60
        while len(calls) == 1 and not go_on.is_set() and time.monotonic() < deadline:
            thinking(".")
            time.sleep(0.05)
        return Action("final_answer", {"answer": f"thought {len(calls)} times"}, "done thinking")
    h = host(lambda db: Agent(brain, [final_answer]), lease=0.5)
    sid = h.new()
    assert held_past_its_lease(h, sid, "think it over", go_on)[-1] == ("done", {"answer": "thought 1 times"})
    assert calls == [1]
    assert [m.kind for m in h.notebook(sid)] == ["question", "decision", "result"]


def test_a_tool_that_reports_progress_for_longer_than_a_lease_keeps_its_session(host):
    go_on = threading.Event()

    def copy_files() -> str:  # works for longer than the lease, telling how far it has got
        steps = itertools.count(1)
        deadline = time.monotonic() + 60
        while not go_on.is_set() and time.monotonic() < deadline:
            report(next(steps), message="copying")
            time.sleep(0.05)
        return "copied"
    brain = scripted(Action("copy_files", {}), Action("final_answer", {"answer": "copied"}))
    h = host(lambda db: Agent(brain, [Tool("copy_files", "Copy the files", copy_files), final_answer]), lease=0.5)
    sid = h.new()
    assert held_past_its_lease(h, sid, "copy", go_on)[-1] == ("done", {"answer": "copied"})
    assert [m.kind for m in h.notebook(sid)] == ["question", "decision", "result", "decision", "result"]


# ----------------------------------------------------------------------------
# the refund office's amounts: over $0, in dollars and cents, written as people read them

def test_the_hosted_refund_books_no_amount_that_is_no_refund_and_the_session_goes_on(host):
    h = host()
    sid, token = h.paused()
    for amount, says in [(-500, "a refund is more than $0, not -500"), (0.001, "in dollars and cents, not 0.001"),
                         (10 ** 400, "not a number of hundreds of digits")]:
        status, _, stream = h.verdict(sid, token, args={"order_id": "A1234", "amount": amount})
        assert status == 200 and stream[0][1]["error"] and says in stream[0][1]["content"]
        assert stream[-1][1]["answer"].startswith("Sorry, I can't refund A1234")
        status, _, stream = h.ask(sid, "Can I get a refund for order A1234 after all?")  # nothing is stuck
        assert stream[-1][0] == "approval_required"
        token = h.token(sid)
    assert h.refunds() == []


def test_an_approved_amount_the_ledger_cannot_hold_exactly_is_refused_never_booked_as_another_number(host):
    # the defect: the ledger's column is a double, and 10**30 was booked as $1,000,000,000,000,000,019,884,624,838,656
    h = host()
    sid, token = h.paused()
    for amount in (10 ** 30, 2 ** 53 + 1):  # far past what a double holds exactly, and the first it can't
        status, _, stream = h.verdict(sid, token, args={"order_id": "A1234", "amount": amount})
        assert status == 200 and stream[0][1]["error"]
        assert stream[0][1]["content"] == (f"error: {amount} is more than the ledger can book exactly: "
                                           "refund it in parts")
        assert stream[-1][1]["answer"].startswith("Sorry, I can't refund A1234")
        assert h.refunds() == []
        h.ask(sid, "Can I get a refund for order A1234 after all?")
        token = h.token(sid)
    stream = h.verdict(sid, token, args={"order_id": "A1234", "amount": 2 ** 53})[2]  # a double holds it
    assert stream[0][1]["content"] == "$9,007,199,254,740,992 refunded to the original card (receipt R1)"
    assert h.refunds() == [(f"{sid}/25", "A1234", 2 ** 53)]


def test_amounts_are_written_and_told_as_people_read_them(host):
    h = host()
    for n, (amount, told) in enumerate([(1234567, "$1,234,567"), (1e20, "$100,000,000,000,000,000,000"),
                                        (70.5, "$70.50")], start=1):
        sid, token = h.paused()
        stream = h.verdict(sid, token, args={"order_id": "A1234", "amount": amount})[2]
        assert stream[0][1]["content"] == f"{told} refunded to the original card (receipt R{n})"
        assert stream[-1][1] == {"answer": f"Good news, A1234 qualifies. I refunded {told} to your card, "
                                           "here in 3 to 5 days."}


HOST = pathlib.Path(__file__).resolve().parents[2] / "microagent" / "host"


def test_each_file_of_the_host_reads_in_one_sitting_within_300_lines_of_90_columns():
    for path in sorted(HOST.glob("*.py")):
        lines = path.read_text().splitlines()
        assert len(lines) <= 300, f"host/{path.name} has {len(lines)} lines: split it along a seam"
        wide = [n for n, line in enumerate(lines, 1) if len(line) > 90]
        assert not wide, f"host/{path.name} has lines over 90 columns: {wide}"


def test_the_hosts_files_import_one_another_one_way_only():
    # every import counts, one inside a function too: a circle is a circle however it is hidden
    arrows = {path.stem: {node.module.rpartition(".")[2] for node in ast.walk(ast.parse(path.read_text()))
                          if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("microagent.host.")}
              for path in HOST.glob("*.py")}
    assert arrows["store"] == {"sqlite", "postgres"} and arrows["postgres"] == set()
    done, seen = set(), []

    def visit(name):
        circle = seen[seen.index(name):] + [name] if name in seen else []
        assert not circle, f"the host's files import one another in a circle: {' -> '.join(circle)}"
        if name not in done:
            seen.append(name)
            for imported in arrows[name]:
                visit(imported)
            seen.pop()
            done.add(name)

    for name in arrows:
        visit(name)
