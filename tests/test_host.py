"""The hosted loop, talked to over real sockets: the protocol, and every guard proven by a real attempt.

Each test starts a real server on 127.0.0.1 (a free port) in this process and
talks HTTP to it; the tests that kill or race server processes are in
test_host_processes.py.
"""

import base64
import json
import socket
import sqlite3
import threading
import time

import pytest
from hypothesis import given, settings, strategies as st

from host_offices import request
from microagent import Action, Agent, Context, as_tool, final_answer, scripted
from microagent.host import MAX_BODY, MAX_TEXT, Server, digest, refund_office, sign, verify
from microagent.invariants import check

SECRET = b"s" * 32
QUESTION = "Can I get a refund for order A1234? It arrived broken."
ANSWER = "Good news, A1234 qualifies. I refunded $79 to your card, here in 3 to 5 days."


class Host:
    """A server on a free port in a thread, and a client that speaks as alice or bob."""

    def __init__(self, tmp_path, office=refund_office, **settings):
        self.db = str(tmp_path / "host.db")
        self.users = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789"}
        self.server = Server(office, self.db, self.users, SECRET, quiet=True, **settings)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def call(self, user, method, path, body=None):
        return request(self.port, method, path, self.users.get(user, user), body)

    def new(self, user="alice") -> str:
        status, _, answer = self.call(user, "POST", "/sessions")
        assert status == 201
        return answer["id"]

    def ask(self, sid, text=QUESTION, user="alice"):
        return self.call(user, "POST", f"/sessions/{sid}/messages", {"text": text})

    def paused(self, user="alice") -> tuple[str, str]:
        """A new session whose refund waits for a human: (its id, the approval token)."""
        sid = self.new(user)
        status, _, stream = self.ask(sid, user=user)
        assert status == 200 and stream[-1][0] == "approval_required"
        return sid, stream[-1][1]["approval_token"]

    def verdict(self, sid, token, user="alice", **more):
        return self.call(user, "POST", f"/sessions/{sid}/approvals", {"approval_token": token, "approve": True, **more})

    def notebook(self, sid, user="alice") -> Context:
        status, _, answer = self.call(user, "GET", f"/sessions/{sid}")
        assert status == 200
        return check(Context.from_json(json.dumps(answer["notebook"])))

    def refunds(self) -> list[tuple]:
        with sqlite3.connect(self.db) as db:
            return db.execute("SELECT call, order_id, amount FROM refunds").fetchall()

    def trail(self) -> list[tuple]:
        return [row[1:] for row in self.server.store.trail()]  # without the time

    def close(self):
        self.server.shutdown()
        self.server.server_close()


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
    status, response, stream = h.ask(sid)
    assert status == 200 and response.getheader("Content-Type") == "text/event-stream"
    assert names(stream) == ["result:look_up_order", "result:check_policy", "approval_required"]
    assert stream[0][1]["content"] == "A1234, Wireless Headphones, $79, delivered, reported defective"
    asked = stream[-1][1]
    assert (asked["tool"], asked["args"], asked["call"]) == ("issue_refund", {"order_id": "A1234", "amount": 79}, 5)
    # what waits is in the notebook, and GET says so
    status, _, shown = h.call("alice", "GET", f"/sessions/{sid}")
    assert shown["pending"] == {"tool": "issue_refund", "args": {"order_id": "A1234", "amount": 79}, "call": 5}
    assert h.notebook(sid).pending.tool == "issue_refund" and h.refunds() == []
    # the human says yes, and the rest of the run streams
    status, _, stream = h.verdict(sid, asked["approval_token"])
    assert status == 200
    assert names(stream) == ["result:issue_refund", "result:final_answer", "done"]
    assert stream[0][1]["content"] == "$79 refunded to the original card (receipt R1)"
    assert stream[-1][1] == {"answer": ANSWER}
    ctx = h.notebook(sid)
    # question, then (decision, result) x2, decision, verdict, result, decision, result
    assert [m.role for m in ctx] == ["user"] + ["assistant", "tool"] * 2 + ["assistant", "user", "tool"] \
        + ["assistant", "tool"]
    assert ctx[6].name == "alice" and ctx[6].is_verdict
    assert [data["at"] for event, data in stream if event == "result"] == [7, 9]  # where each note is
    assert h.refunds() == [(f"{sid}/5", "A1234", 79)]


def test_each_event_is_one_line_of_json_named_by_event(host):
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
        event, data = block.split("\n")
        assert event.startswith("event: ") and data.startswith("data: ")
        json.loads(data.removeprefix("data: "))


def test_approve_with_edited_arguments_runs_the_tool_with_them(host):
    h = host()
    sid, token = h.paused()
    status, _, stream = h.verdict(sid, token, args={"order_id": "A1234", "amount": 70})
    assert status == 200 and stream[0][1]["content"] == "$70 refunded to the original card (receipt R1)"
    assert h.refunds() == [(f"{sid}/5", "A1234", 70)]
    assert h.notebook(sid)[6].args == '{"order_id": "A1234", "amount": 70}'
    assert ("alice", sid, "approved", 'issue_refund {"order_id": "A1234", "amount": 70}') in h.trail()


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
    status, _, stream = h.call("alice", "POST", f"/sessions/{sid}/approvals",
                               {"approval_token": token, "approve": False, "reason": "send it back first"})
    assert status == 200
    assert names(stream) == ["result:issue_refund", "result:final_answer", "done"]
    assert stream[0][1]["error"] and stream[0][1]["content"] == "denied by alice: send it back first"
    assert stream[-1][1]["answer"].startswith("Sorry, I can't refund A1234")
    assert h.refunds() == []
    assert ("alice", sid, "denied", "issue_refund: send it back first") in h.trail()


def test_a_session_goes_on_with_a_second_question(host):
    h = host()
    sid, token = h.paused()
    h.verdict(sid, token)
    status, _, stream = h.ask(sid, "And order B9999?")
    assert status == 200 and stream[-1] == ("done", {"answer": "Sorry, I can't refund B9999 right now. "
                                                     "A teammate will follow up by email within a day."})
    assert len(h.notebook(sid)) == 10 + 5


def test_resume_hands_out_a_new_token_and_the_old_one_stops_working(host):
    h = host()
    sid, old = h.paused()
    status, _, stream = h.call("alice", "POST", f"/sessions/{sid}/resume", {})
    assert names(stream) == ["approval_required"]
    new = stream[0][1]["approval_token"]
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
    assert (claims["sub"], claims["sid"], claims["call"]) == ("alice", sid, 5)
    assert claims["args"] == digest('{"order_id": "A1234", "amount": 79}')
    assert claims["exp"] - claims["iat"] == 600
    assert verify(token, SECRET, time.time()) == claims


@pytest.mark.parametrize("change, refusal", [
    ({"sid": "another-session"}, "not for this session"),
    ({"sub": "bob"}, "not for this user"),
    ({"call": 3}, "not for this tool call"),
    ({"args": digest('{"order_id": "A1234", "amount": 7900}')}, "not for this arguments"),
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
    assert status == 409 and "nothing waits for approval" in answer["error"]
    assert len(h.refunds()) == 1


def test_two_approvals_racing_for_one_token_exactly_one_wins_and_the_refund_runs_once(host):
    h = host(rate=(100.0, 100))
    for _ in range(3):
        sid, token = h.paused()
        go, statuses = threading.Barrier(6), []

        def approve_it():
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
