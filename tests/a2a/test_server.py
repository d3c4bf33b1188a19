"""The office as an A2A agent (microagent/a2a/server.py), driven by the a2a-sdk's own client.

Each test starts a real host on 127.0.0.1 (a free port) in this process, serving the
refund office, and talks to it with the official A2A client (a2a-sdk, a dev
dependency), or with raw JSON-RPC where the point is what a broken request gets.
alice and dan ask, bob approves, carol does both.
"""

import asyncio
import http.client
import json
import pathlib
import sqlite3
import subprocess
import sys
import threading
import time
import types

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, ClientConfig, ClientFactory
from a2a.types import (CancelTaskRequest, GetTaskRequest, Message, Part, Role, SendMessageRequest,
                       SubscribeToTaskRequest, TaskState)
from a2a.utils.errors import (InvalidParamsError, InvalidRequestError, TaskNotCancelableError,
                              TaskNotFoundError, UnsupportedOperationError)

from host_offices import ANSWER, QUESTION, SECRET, USERS, Hosted, gated_refund_office, request
from microagent import Agent
from microagent.a2a.server import ROUTES
from microagent.host import refund_office, thinking

pytestmark = pytest.mark.timeout(60)

TOKENS = {name: user["token"] for name, user in USERS.items()}


class Host(Hosted):
    """The refund office's host, A2A's routes with it, on a free port, in a thread."""

    def __init__(self, db: str, office=refund_office, **settings):
        super().__init__(office, db, USERS, SECRET, routes=ROUTES, **settings)

    def approve(self, sid: str, user="bob") -> list[str]:
        """bob approves through the host's own routes: his queue, then his verdict."""
        status, _, answer = request(self.port, "GET", "/approvals", TOKENS[user])
        [token] = [w["approval_token"] for w in answer["waiting"] if w["session"] == sid]
        status, _, stream = request(self.port, "POST", f"/sessions/{sid}/approvals", TOKENS[user],
                                    {"approval_token": token, "approve": True})
        assert status == 200
        return [event for event, _ in stream]


@pytest.fixture
def host(tmp_path):
    made = []

    def start(db=None, **settings) -> Host:
        made.append(Host(db or str(tmp_path / f"host{len(made)}.db"), **settings))
        return made[-1]
    yield start
    for h in made:
        h.close()


def refunds(db: str) -> list[tuple]:
    with sqlite3.connect(db) as ledger:
        return ledger.execute("SELECT order_id, amount FROM refunds").fetchall()


async def client_of(h: Host, user: str, streaming: bool = False, polling: bool = False):
    """The SDK's client for the host's card, signed in as `user` (a bearer token)."""
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {TOKENS[user]}"}, timeout=30)
    card = await A2ACardResolver(http, h.url).get_agent_card()
    config = ClientConfig(httpx_client=http, streaming=streaming, polling=polling)
    return ClientFactory(config).create(card)


def asking(text: str, task=None) -> SendMessageRequest:
    message = Message(message_id=f"m-{text[:8]}", role=Role.ROLE_USER, parts=[Part(text=text)],
                      task_id=task, context_id=task)
    return SendMessageRequest(message=message)


async def send(client, text: str, task=None):
    """A blocking SendMessage: the task where it stopped or waits."""
    [event] = [event async for event in client.send_message(asking(text, task))]
    return event.task


def plain(events) -> list[str]:
    """Each StreamResponse in a few words: its kind, its state, and what it says."""
    out = []
    for event in events:
        kind = event.WhichOneof("payload")
        if kind == "artifact_update":
            out.append(f"artifact: {event.artifact_update.artifact.parts[0].text}")
            continue
        status = event.task.status if kind == "task" else event.status_update.status
        said = status.message.parts[0].text if status.HasField("message") else ""
        out.append(f"{kind} {TaskState.Name(status.state)[11:]} {said}".strip())
    return out


# ----------------------------------------------------------------------------
# a whole refund: the card, the message, auth_required, bob's approval out of band,
# a reconnect with SubscribeToTask, and the answer as an artifact

def test_the_card_names_the_office_its_json_rpc_address_and_its_bearer_token(host):
    h = host()

    async def main():
        async with httpx.AsyncClient() as http:  # no token: the card is for anyone
            return await A2ACardResolver(http, h.url).get_agent_card()
    card = asyncio.run(main())
    assert card.name == "support" and card.capabilities.streaming
    assert not card.capabilities.push_notifications
    [interface] = card.supported_interfaces
    assert (interface.url, interface.protocol_binding, interface.protocol_version) == \
        (f"{h.url}/a2a", "JSONRPC", "1.0")
    assert card.security_schemes["bearer"].http_auth_security_scheme.scheme == "Bearer"
    assert "issue_refund waits for an approver" in card.skills[0].description


def whole_refund(h: Host, again_at: Host) -> None:
    """alice asks at h, and reconnects at `again_at` (another host on the same database)."""
    async def main():
        alice = await client_of(h, "alice")
        task = await send(alice, QUESTION)  # blocking: it returns where the task waits
        assert TaskState.Name(task.status.state) == "TASK_STATE_AUTH_REQUIRED"
        assert task.status.message.parts[0].text.startswith(
            'issue_refund {"order_id": "A1234", "amount": 79} waits for an approver\'s verdict')
        assert task.context_id == task.id
        # alice can't approve by saying so: a message on the task is refused, nothing written
        with pytest.raises(UnsupportedOperationError, match="a message can't give it"):
            await send(alice, "yes", task.id)
        # she reconnects, streaming: the task as it stands first, then it follows bob's approval
        again = await client_of(again_at, "alice", streaming=True)
        events = again.subscribe(SubscribeToTaskRequest(id=task.id))
        first = await anext(events)
        assert first.task.id == task.id
        assert TaskState.Name(first.task.status.state) == "TASK_STATE_AUTH_REQUIRED"
        assert await asyncio.to_thread(h.approve, task.id) == ["result", "result", "done"]
        rest = [event async for event in events]  # the stream ends once the task is done
        assert plain(rest) == [
            "status_update WORKING issue_refund: $79 refunded to the original card (receipt R1)",
            f"status_update WORKING final_answer: {ANSWER}",
            f"artifact: {ANSWER}",
            "status_update COMPLETED"]
        done = await alice.get_task(GetTaskRequest(id=task.id))
        assert TaskState.Name(done.status.state) == "TASK_STATE_COMPLETED"
        assert [part.text for part in done.artifacts[0].parts] == [ANSWER]
        await alice.close()
        await again.close()
        return task.id
    sid = asyncio.run(main())
    trail = h.trail()
    assert (("alice", sid, "created", "over A2A") in trail and
            ("bob", sid, "approved", 'asked by alice: issue_refund {"order_id": "A1234", "amount": 79}')
            in trail)
    assert ("alice", sid, "refused -32004") in [t[:3] for t in trail]


def test_a_whole_refund_with_the_sdk_client_approved_out_of_band_and_followed_after_a_reconnect(host):
    h = host()
    whole_refund(h, h)
    assert refunds(h.db) == [("A1234", 79)]


def test_a_whole_refund_on_postgresql_followed_from_another_host_process(host, postgres):
    whole_refund(host(postgres), host(postgres))


def test_a_streamed_message_stays_open_through_the_approval_and_ends_with_the_answer(host):
    h = host()

    async def main():
        alice = await client_of(h, "alice", streaming=True)
        events, seen = alice.send_message(asking(QUESTION)), []
        async for event in events:
            seen.append(event)
            if plain([event])[0].startswith("status_update AUTH_REQUIRED"):
                sid = event.status_update.task_id
                assert await asyncio.to_thread(h.approve, sid) == ["result", "result", "done"]
        await alice.close()
        return seen
    seen = plain(asyncio.run(main()))
    assert seen[0] == "task WORKING"
    assert seen[1:3] == [
        "status_update WORKING look_up_order: A1234, Wireless Headphones, $79, delivered, reported defective",
        "status_update WORKING check_policy: eligible, within the 30 day window and reported defective"]
    assert seen[3].startswith("status_update AUTH_REQUIRED issue_refund")
    assert seen[4:] == [
        "status_update WORKING issue_refund: $79 refunded to the original card (receipt R1)",
        f"status_update WORKING final_answer: {ANSWER}",
        f"artifact: {ANSWER}",
        "status_update COMPLETED"]


def test_a_message_that_returns_at_once_leaves_its_run_going_on_in_the_host(host):
    h = host()

    async def main():
        alice = await client_of(h, "alice", polling=True)  # SendMessage with returnImmediately
        task = await send(alice, QUESTION)
        assert TaskState.Name(task.status.state) == "TASK_STATE_WORKING"  # as its run began
        for _ in range(300):  # the run goes on without anyone waiting: read it until it waits
            now = await alice.get_task(GetTaskRequest(id=task.id))
            if now.status.state != TaskState.TASK_STATE_WORKING:
                break
            await asyncio.sleep(0.1)
        await alice.close()
        return now
    now = asyncio.run(main())
    assert TaskState.Name(now.status.state) == "TASK_STATE_AUTH_REQUIRED"


def test_nobody_approves_over_a2a_what_waits_for_an_approver_not_even_an_asker_who_approves(host):
    h = host()  # carol asks and approves; this host lets nobody approve their own

    async def main():
        carol, bob = await client_of(h, "carol"), await client_of(h, "bob")
        task = await send(carol, QUESTION)
        assert TaskState.Name(task.status.state) == "TASK_STATE_AUTH_REQUIRED"
        with pytest.raises(UnsupportedOperationError, match="a message can't give it"):
            await send(carol, "yes", task.id)
        with pytest.raises(InvalidRequestError, match="bob may not ask the agent"):
            await send(bob, "yes", task.id)  # bob approves only through the host's approvals
        await carol.close()
        await bob.close()
    asyncio.run(main())
    assert refunds(h.db) == []
    assert not any(t[2] == "approved" for t in h.trail())


def thinking_office(db: str) -> Agent:
    """The refund office whose brain says a few words before each move, and has 2 moves."""
    office = refund_office(db)

    def policy(ctx, tools):
        thinking("Let me see. ")
        return office.policy(ctx, tools)
    return Agent(policy, list(office.tools.values()), max_steps=2, name=office.name)


def test_the_brains_words_stream_as_they_come_and_out_of_steps_is_failed_saying_so(host):
    h = host(office=thinking_office)

    async def main():
        alice = await client_of(h, "alice", streaming=True)
        seen = [event async for event in alice.send_message(asking(QUESTION))]
        await alice.close()
        return seen
    assert plain(asyncio.run(main())) == [
        "task WORKING",
        "status_update WORKING Let me see.",
        "status_update WORKING look_up_order: A1234, Wireless Headphones, $79, delivered, reported defective",
        "status_update WORKING Let me see.",
        "status_update WORKING check_policy: eligible, within the 30 day window and reported defective",
        "status_update FAILED out of steps: stopped after 2 turns without an answer"]


# ----------------------------------------------------------------------------
# input_required: a host where the asker may approve their own

def test_a_pause_the_caller_may_decide_is_input_required_and_answered_on_the_same_task(host):
    h = host(approve_own=True)

    async def main():
        carol = await client_of(h, "carol")
        task = await send(carol, QUESTION)
        assert TaskState.Name(task.status.state) == "TASK_STATE_INPUT_REQUIRED"
        assert task.status.message.parts[0].text == (
            'issue_refund {"order_id": "A1234", "amount": 79} waits for your verdict: answer "yes" to '
            'approve it, or "no: <why>" to refuse it')
        with pytest.raises(InvalidParamsError, match='answer "yes"'):
            await send(carol, "maybe later", task.id)
        done = await send(carol, "yes", task.id)
        assert done.id == task.id and TaskState.Name(done.status.state) == "TASK_STATE_COMPLETED"
        assert done.artifacts[0].parts[0].text == ANSWER
        # a finished task takes no more messages
        with pytest.raises(UnsupportedOperationError, match="the task is completed"):
            await send(carol, "and another thing", task.id)
        await carol.close()
        return task.id
    sid = asyncio.run(main())
    assert refunds(h.db) == [("A1234", 79)]
    assert ("carol", sid, "approved", 'asked by carol: issue_refund {"order_id": "A1234", "amount": 79}') \
        in h.trail()


def test_a_no_with_a_reason_is_read_by_the_brain_and_nothing_is_paid(host):
    h = host(approve_own=True)

    async def main():
        carol = await client_of(h, "carol")
        task = await send(carol, QUESTION)
        done = await send(carol, "no: we refund store credit only", task.id)
        await carol.close()
        return done
    done = asyncio.run(main())
    assert TaskState.Name(done.status.state) == "TASK_STATE_COMPLETED"
    assert refunds(h.db) == []


# ----------------------------------------------------------------------------
# cancel, other people's tasks, tokens

def test_cancel_task_withdraws_a_waiting_refund_and_the_approver_can_no_longer_approve_it(host):
    h = host()

    async def main():
        alice = await client_of(h, "alice")
        task = await send(alice, QUESTION)
        cancelled = await alice.cancel_task(CancelTaskRequest(id=task.id))
        assert TaskState.Name(cancelled.status.state) == "TASK_STATE_CANCELED"
        assert cancelled.status.message.parts[0].text == "cancelled over A2A by alice"
        with pytest.raises(TaskNotCancelableError, match="the task is canceled"):
            await alice.cancel_task(CancelTaskRequest(id=task.id))
        with pytest.raises(UnsupportedOperationError, match="the task is canceled"):
            await send(alice, "hello again", task.id)
        await alice.close()
        return task.id
    sid = asyncio.run(main())
    status, _, answer = request(h.port, "GET", "/approvals", TOKENS["bob"])
    assert answer == {"waiting": []}
    assert refunds(h.db) == []
    assert ("alice", sid, "cancelled", "over A2A") in h.trail()


def test_cancel_task_stops_a_task_whose_run_goes_on_and_the_task_ends_canceled(host):
    entered, go = threading.Event(), threading.Event()
    h = host(office=gated_refund_office(entered, go))

    async def main():
        alice = await client_of(h, "alice", polling=True)  # returnImmediately: the run goes on
        task = await send(alice, QUESTION)
        assert entered.wait(60)  # the run is inside check_policy
        cancelling = asyncio.ensure_future(alice.cancel_task(CancelTaskRequest(id=task.id)))
        # the cancel is asked (the host's, heard at the run's next commit); then the tool ends
        await asyncio.to_thread(until, lambda: ("alice", task.id, "cancel asked", "") in h.trail())
        go.set()
        cancelled = await cancelling
        assert TaskState.Name(cancelled.status.state) == "TASK_STATE_CANCELED"
        assert cancelled.status.message.parts[0].text == "cancelled over A2A by alice"
        await alice.close()
        return task.id
    sid = asyncio.run(main())
    # the step that was running is kept, nothing new started, nothing paid; a remark withdraws it
    assert [m.kind for m in h.server.store.load(sid).context] == \
        ["question", "decision", "result", "decision", "result", "remark"]
    assert refunds(h.db) == []
    assert [t[2:] for t in h.trail() if t[:2] == ("alice", sid)] == [
        ("created", "over A2A"), ("tool call", "look_up_order (call 1)"), ("cancel asked", ""),
        ("tool call", "check_policy (call 3)"), ("cancelled", "over A2A")]


def test_a_cancelled_task_ends_canceled_on_its_own_stream_and_on_a_followers(host):
    entered, go = threading.Event(), threading.Event()
    h = host(office=gated_refund_office(entered, go))

    async def main():
        alice = await client_of(h, "alice", streaming=True)
        own = alice.send_message(asking(QUESTION))
        sid = (await anext(own)).task.id
        assert await asyncio.to_thread(entered.wait, 60)  # the run is inside check_policy
        follower = await client_of(h, "alice", streaming=True)
        theirs = follower.subscribe(SubscribeToTaskRequest(id=sid))
        assert plain([await anext(theirs)]) == ["task WORKING"]
        cancelling = asyncio.ensure_future(alice.cancel_task(CancelTaskRequest(id=sid)))
        await asyncio.to_thread(until, lambda: ("alice", sid, "cancel asked", "") in h.trail())
        go.set()
        seen = plain([event async for event in own]), plain([event async for event in theirs])
        cancelled = await cancelling
        assert TaskState.Name(cancelled.status.state) == "TASK_STATE_CANCELED"
        await alice.close()
        await follower.close()
        return seen
    own, theirs = asyncio.run(main())
    policy = "status_update WORKING check_policy: eligible, within the 30 day window and reported defective"
    assert own[1:] == [policy, "status_update CANCELED cancelled by alice"]
    # the follower hears the same end (or CancelTask's remark, if that came first): never a state
    # that is about to change
    assert theirs[0] == policy and theirs[1:] in (["status_update CANCELED cancelled by alice"],
                                                  ["status_update CANCELED cancelled over A2A by alice"])


@pytest.mark.timeout(120)
def test_cancel_task_waits_past_the_lease_for_a_long_tool_in_this_process_and_keeps_its_step(host):
    entered, go = threading.Event(), threading.Event()
    h = host(office=gated_refund_office(entered, go), lease=1.0)

    async def main():
        alice = await client_of(h, "alice", polling=True)  # returnImmediately: the run goes on
        task = await send(alice, QUESTION)
        assert await asyncio.to_thread(entered.wait, 60)  # inside check_policy: no progress
        cancelling = asyncio.ensure_future(alice.cancel_task(CancelTaskRequest(id=task.id)))
        await asyncio.to_thread(until, lambda: ("alice", task.id, "cancel asked", "") in h.trail())
        # the lease runs out while the tool goes on: the task reads as no longer running
        await asyncio.to_thread(until, lambda: h.server.store.load(task.id).lease_until <= time.time())
        go.set()
        cancelled = await cancelling
        assert TaskState.Name(cancelled.status.state) == "TASK_STATE_CANCELED"
        await alice.close()
        return task.id
    sid = asyncio.run(main())
    # check_policy's step is kept before the remark, and the run said nothing was lost
    assert [m.kind for m in h.server.store.load(sid).context] == \
        ["question", "decision", "result", "decision", "result", "remark"]
    assert ("tool call", "check_policy (call 3)") in [t[2:] for t in h.trail()]
    assert "run stopped" not in [t[2] for t in h.trail()]


def until(check, what="it") -> None:
    for _ in range(6000):
        if check():
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"{what} never came")


def test_another_users_task_is_not_found_whatever_is_asked_of_it(host):
    h = host()

    async def main():
        alice, dan = await client_of(h, "alice"), await client_of(h, "dan", streaming=True)
        task = await send(alice, QUESTION)
        for call in (dan.get_task(GetTaskRequest(id=task.id)),
                     dan.cancel_task(CancelTaskRequest(id=task.id)),
                     anext(dan.send_message(asking("yes", task.id))),
                     anext(dan.subscribe(SubscribeToTaskRequest(id=task.id)))):
            with pytest.raises(TaskNotFoundError, match="^task not found$"):
                await call
        with pytest.raises(TaskNotFoundError):
            await alice.get_task(GetTaskRequest(id="no-such-task"))
        await alice.close()
        await dan.close()
        return task.id
    sid = asyncio.run(main())
    assert [t[2] for t in h.trail() if t[:2] == ("dan", sid)] == ["refused -32001"] * 4


def test_a_bad_token_is_refused_with_401_before_anything_is_read(host):
    h = host()

    async def main():
        http = httpx.AsyncClient(headers={"Authorization": "Bearer not-a-token-0123456789"}, timeout=30)
        card = await A2ACardResolver(http, h.url).get_agent_card()  # the card needs none
        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)
        with pytest.raises(A2AClientError, match="401"):
            await send(client, QUESTION)
        await client.close()
    asyncio.run(main())
    status, response, answer = rpc(h, {"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                       "params": {"id": "x"}}, token="wrong")
    assert (status, response.getheader("WWW-Authenticate")) == (401, "Bearer")
    assert h.trail() == []  # a stranger writes nothing in the trail


@pytest.mark.parametrize("module", ["calls", "tasks", "server"])
def test_each_module_of_the_server_may_be_the_first_imported(module):
    # server.py and tasks.py import the host, which imports nothing of theirs
    out = subprocess.run([sys.executable, "-c", f"import microagent.a2a.{module}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_python_dash_m_microagent_host_speaks_a2a_too(tmp_path):
    # the host's __main__.py gives its Server A2A's routes: served from the command line,
    # the card is there, and a task runs to where it waits for bob
    proc = subprocess.Popen([sys.executable, "-m", "microagent.host", "--port", "0"], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()  # "serving on http://127.0.0.1:PORT (...)"
        assert line.startswith("serving on http://127.0.0.1:"), line
        users = json.loads((tmp_path / "microagent-users.json").read_text())
        h = types.SimpleNamespace(port=int(line.split(":")[2].split(" ")[0]))  # for rpc()
        asked = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": MESSAGE}}
        status, _, answer = rpc(h, asked, token=users["alice"]["token"])
        assert (status, answer["result"]["task"]["status"]["state"]) == (200, "TASK_STATE_AUTH_REQUIRED")
    finally:
        proc.kill()
        proc.wait(60)
        proc.stdout.close()


def test_the_benchmark_the_readme_quotes_runs():
    bench = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "a2a_serve.py"
    out = subprocess.run([sys.executable, str(bench), "--runs", "2"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "over A2A (coworker, streamed)" in out.stdout, out.stderr


# ----------------------------------------------------------------------------
# malformed JSON-RPC, answered in JSON-RPC's words

def rpc(h: Host, body, token=TOKENS["alice"], version="1.0"):
    """One raw JSON-RPC request: (status, response, the JSON answer)."""
    conn = http.client.HTTPConnection("127.0.0.1", h.port, timeout=30)
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    if version is not None:
        headers["A2A-Version"] = version
    try:
        conn.request("POST", "/a2a", body=data, headers=headers)
        response = conn.getresponse()
        return response.status, response, json.loads(response.read())
    finally:
        conn.close()


MESSAGE = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": QUESTION}]}


@pytest.mark.parametrize("body, code, words", [
    (b'{"jsonrpc": "2.0", "id": 1, "method": ', -32700, "not valid JSON"),
    (b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "GetTask"}', -32700, '"id" is given twice'),
    ({"jsonrpc": "2.0", "id": 1}, -32600, "missing ['method']"),
    ({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "extra": 1}, -32600, "unknown ['extra']"),
    ({"jsonrpc": "1.0", "id": 1, "method": "GetTask"}, -32600, '"jsonrpc" must be "2.0"'),
    ({"jsonrpc": "2.0", "id": 1, "method": "tasks/get"}, -32601, "the methods are SendMessage"),
    ({"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": 7}}, -32602,
     "params.id must be a JSON string"),
    ({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": "hi"}}, -32602,
     "params.message must be a JSON object"),
    ({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
      "params": {"message": {**MESSAGE, "sender": "x"}}}, -32602, "unknown ['sender']"),
    ({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
      "params": {"message": {**MESSAGE, "parts": [{"url": "http://127.0.0.1/x.png"}]}}}, -32005,
     "text parts only"),
    ({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
      "params": {"message": {**MESSAGE, "parts": [{"text": " "}]}}}, -32602, "not only spaces"),
    ({"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
      "params": {"message": MESSAGE, "configuration": {"taskPushNotificationConfig": {"url": "x"}}}},
     -32003, "no push notifications"),
])
def test_a_malformed_call_gets_the_json_rpc_error_that_names_what_is_wrong(host, body, code, words):
    h = host()
    status, _, answer = rpc(h, body)
    assert status == 200 and answer["jsonrpc"] == "2.0"
    assert answer["error"]["code"] == code and words in answer["error"]["message"]
    assert answer["id"] == (None if code == -32700 else 1)
    assert refunds(h.db) == [] and not any(t[2] == "created" for t in h.trail())


def test_a_call_without_the_version_header_is_told_which_version_to_send(host):
    status, _, answer = rpc(host(), {"jsonrpc": "2.0", "id": "a", "method": "GetTask",
                                     "params": {"id": "x"}}, version=None)
    assert answer == {"jsonrpc": "2.0", "id": "a", "error": {
        "code": -32009, "message": "this agent speaks A2A 1.0: send the header A2A-Version: 1.0 (not '')"}}


def test_the_rate_limit_holds_for_a2a_messages_as_for_the_hosts_own(host):
    h = host(rate=(0.001, 2))
    call = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": MESSAGE}}
    assert [rpc(h, call)[0] for _ in range(3)] == [200, 200, 429]
    status, response, answer = rpc(h, call)
    assert response.getheader("Retry-After") and "too many runs" in answer["error"]
