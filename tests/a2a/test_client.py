"""The A2A client (microagent.a2a.coworker) against an agent served by the a2a-sdk server, code nobody
here wrote, and against small hostile peers (tests/a2a/client_fakes.py); all on 127.0.0.1.

Every test is bounded in time: a timeout of its own, and short timeouts on every call.
"""

import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from client_fakes import events, good_card, peer, reply, status, task, whole
from microagent import Action, Agent, final_answer, scripted
from microagent.a2a import A2AError, coworker
from microagent.a2a.client import CANCEL_WAIT
from microagent.a2a.exchange import MAX_REPLY, _events, _mended
from microagent.mcp import MAX_RESULT
from microagent.message import Message
from microagent.tool import read_json
from microagent.transport import Key
from microagent.trace import story
from printed import check_blocks, python_blocks

pytestmark = pytest.mark.timeout(60)
ROOT = Path(__file__).resolve().parents[2]
PEER = Path(__file__).with_name("client_peer.py")


def start(*flags):
    """The a2a-sdk agent (tests/a2a/client_peer.py) in a subprocess: the process and its URL."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, str(PEER), *flags], stdout=subprocess.PIPE, env=env, text=True)
    port = process.stdout.readline().strip()
    assert port.isdigit(), "the a2a-sdk agent did not start"
    url = f"http://127.0.0.1:{port}"
    for _ in range(200):  # uvicorn takes the socket at once, and answers once the app is up
        try:
            coworker(url, timeout=5)
            return process, url
        except A2AError:
            time.sleep(0.05)
    process.kill()
    raise AssertionError("the a2a-sdk agent never answered")


def stop(process):
    process.kill()
    process.wait(timeout=10)


@pytest.fixture(scope="module", params=["streaming", "not streaming"])
def sdk_agent(request):
    """The a2a-sdk agent, once with a card that says it streams and once without: its URL (a str
    that knows whether it `streams`)."""
    process, url = start(*(["--no-streaming"] if request.param == "not streaming" else []))
    yield Address(url, request.param == "streaming")
    stop(process)


class Address(str):
    def __new__(cls, url, streams):
        made = super().__new__(cls, url)
        made.streams = streams
        return made


@pytest.fixture
def fresh_agent():
    """An a2a-sdk agent of the test's own, so its first task is task-1: its URL."""
    process, url = start()
    yield url
    stop(process)


def ask(tool, **args) -> Message:
    return tool.run(json.dumps(args))


def task_id(note: Message) -> str:
    return re.search(r'task_id="([^"]+)"', note.content)[1]


# --- against the a2a-sdk server: a whole task, each way a task may end or wait ----------------------------

def test_the_card_names_the_tool_after_its_skill_and_says_what_it_is_for(sdk_agent):
    refunds = coworker(sdk_agent, timeout=10)
    assert refunds.name == "refunds"
    assert refunds.description == ('Ask "Refund office", an agent in another process (refunds: Refunds an order, '
                                   "asking what it needs to know.). It may ask you something back, or wait for a "
                                   "human: then go on with the same task_id.")
    assert refunds.schema["required"] == ["request"] and list(refunds.schema["properties"]) == ["request", "task_id"]


def test_a_completed_task_s_artifacts_are_the_result(sdk_agent):
    note = ask(coworker(sdk_agent, timeout=10), request="complete refund A1234")
    assert (note.content, note.error, note.name) == ("done: complete refund A1234", False, "refunds")


@pytest.mark.parametrize("request_, said", [
    ("fail", 'error: "Refund office" failed task {}: the refund desk is closed'),
    ("reject", 'error: "Refund office" rejected task {}: refunds over $500 are not ours'),
])
def test_a_failed_or_rejected_task_is_an_error_note_that_says_so(sdk_agent, request_, said):
    note = ask(coworker(sdk_agent, timeout=10), request=request_)
    found = re.search(r"task (task-\d+)", note.content)[1]
    assert (note.content, note.error) == (said.format(found), True)


def test_input_required_is_a_note_that_says_what_it_asks_and_how_to_answer(sdk_agent):
    refunds = coworker(sdk_agent, timeout=10)
    note = ask(refunds, request="ask for a refund")
    found = task_id(note)
    assert (note.content, note.error) == (
        f'"Refund office" needs more from you to go on with task {found}: Which order?\n'
        f'To answer, call refunds again with task_id="{found}" and your answer as the request.', False)
    assert ask(refunds, request="A1234", task_id=found).content == "refunded order A1234"
    # the task has ended: a message to it is refused, and looking at it shows how it ended
    assert ask(refunds, request="and again", task_id=found).content.startswith(
        'error: "Refund office" refused Send')
    assert ask(refunds, request="", task_id=found).content == "refunded order A1234"


def test_auth_required_is_a_note_that_says_an_approval_is_not_a_yes_from_the_caller(sdk_agent):
    note = ask(coworker(sdk_agent, timeout=10), request="auth please")
    found = task_id(note)
    assert (note.content, note.error) == (
        f'"Refund office" waits for an authorization on task {found}: bob must approve the refund first\n'
        f'If it asks you for something, call refunds again with task_id="{found}" and it as the request. An '
        "approval given elsewhere is not given by you saying yes: to see how the task stands later, call "
        f'refunds again with task_id="{found}" and an empty request.', False)


def test_a_task_that_is_not_there_is_an_error_note(sdk_agent):
    note = ask(coworker(sdk_agent, timeout=10), request="", task_id="no-such-task")
    assert note.content.startswith('error: "Refund office" refused GetTask: no such task:') and note.error


def test_a_streaming_agent_s_words_reach_on_text_as_they_come(sdk_agent):
    heard = []
    note = ask(coworker(sdk_agent, timeout=10, on_text=heard.append), request="stream refunding your order")
    assert note.content == "streamed"
    words = [piece for piece in heard if piece]  # "" is a tick while it waits
    assert words == (["refunding ", "your ", "order ", "streamed"] if sdk_agent.streams else [])


def test_a_stop_of_ours_cancels_the_remote_task_then_goes_on(fresh_agent):
    class Gone(Exception):  # as microagent.host's thinking raises ClientGone
        pass

    def leave(piece):
        if piece:  # the agent's first words: by then, the client has gone
            raise Gone("the client went away")
    with pytest.raises(Gone):
        coworker(fresh_agent, timeout=10, on_text=leave).fn(request="slow refund")
    note = ask(coworker(fresh_agent, timeout=10), request="", task_id="task-1")
    assert (note.content, note.error) == ('error: "Refund office" was cancelled task task-1', True)


def test_a_python_agent_behind_the_tool_answers_in_a_real_agent_loop(sdk_agent):
    manager = Agent(scripted(Action("refunds", {"request": "agent: refund A1234"}),
                             Action("final_answer", {"answer": "refunded"})),
                    [coworker(sdk_agent, timeout=10), final_answer], name="manager")
    ctx = manager.run("Refund A1234, please.")
    assert [m.kind for m in ctx] == ["question", "decision", "result", "decision", "result"]
    assert ctx.messages[2].content == "an agent says: agent: refund A1234"


def test_a_whole_task_with_a_question_answered_on_the_next_turn_by_a_scripted_brain(fresh_agent):
    # the manager asks; the remote office asks back; the manager answers on the same task; done
    manager = Agent(scripted(Action("refunds", {"request": "ask: refund my order"}),
                             Action("refunds", {"request": "A1234", "task_id": "task-1"}),
                             Action("final_answer", {"answer": "A1234 is refunded"})),
                    [coworker(fresh_agent, timeout=10), final_answer], name="manager")
    ctx = manager.run("Refund my order, please.")
    assert story(ctx) == """\
you asked: "Refund my order, please."
  manager thought: call refunds with {"request": "ask: refund my order"}
    -> refunds returned: "Refund office" needs more from you to go on with task task-1: Which order?
      | To answer, call refunds again with task_id="task-1" and your answer as the request.
  manager thought: call refunds with {"request": "A1234", "task_id": "task-1"}
    -> refunds returned: refunded order A1234
  manager thought: call final_answer with {"answer": "A1234 is refunded"}
    -> final_answer returned: A1234 is refunded"""


# --- hostile or broken peers: each a clear error, never a hang or a crash ---------------------------------

def answers(*results):
    """A peer's answer: the JSON-RPC reply with each result in turn, as a whole reply."""
    left = list(results)

    def answer(request, h):
        whole(h, reply(request, left.pop(0)))
    return answer


def streams(*results, then=None):
    """A peer's answer: a stream of `results`, then `then(h)`."""
    def answer(request, h):
        events(h, request, results, then)
    return answer


def test_a_card_of_another_version_or_binding_is_refused_when_the_tool_is_made():
    with peer(answers(), card=lambda url: good_card(url, version="0.3")) as fake:
        with pytest.raises(A2AError, match=r'^"Fake office" speaks A2A as \["JSONRPC 0.3"\]; this client speaks '
                                           r"only A2A 1.0 over JSON-RPC$"):
            coworker(fake.url, timeout=5)
    with peer(answers(), card=lambda url: good_card(url, binding="GRPC")) as fake:
        with pytest.raises(A2AError, match=r'speaks A2A as \["GRPC 1.0"\]'):
            coworker(fake.url, timeout=5)
    old = {"name": "Old office", "url": "http://127.0.0.1:1/", "protocolVersion": "0.3.0", "skills": []}
    with peer(answers(), card=lambda url: old) as fake:
        with pytest.raises(A2AError, match=r'^"Old office" has a card with no supportedInterfaces: it speaks A2A '
                                           r'"0.3.0"; this client speaks 1.0$'):
            coworker(fake.url, timeout=5)


def test_a_server_that_refuses_our_version_is_an_error_note_that_says_so():
    def refuse(request, h):
        whole(h, {"jsonrpc": "2.0", "id": request["id"], "error": {
            "code": -32009, "message": "A2A version '1.0' is not supported by this handler."}})
    with peer(refuse, card=lambda url: good_card(url, streaming=False)) as fake:
        note = ask(coworker(fake.url, timeout=5), request="hello")
    assert (note.content, note.error) == (
        'error: "Fake office" refused SendMessage: it does not speak A2A 1.0: '
        '"A2A version \'1.0\' is not supported by this handler."', True)
    assert fake.asked == [("SendMessage", fake.asked[0][1], None)]


def test_a_card_whose_calls_go_elsewhere_is_refused_and_the_token_goes_nowhere():
    with peer(answers()) as elsewhere:
        with peer(answers(), card=lambda url: good_card(url, rpc=elsewhere.url + "/")) as fake:
            with pytest.raises(A2AError, match=r'^"Fake office"\'s card, at http://127.0.0.1:\d+, sends its calls '
                                               r"to http://127.0.0.1:\d+: the token goes only where you said"):
                coworker(fake.url, token="secret-token-1", timeout=5)
    assert elsewhere.asked == []


@pytest.mark.parametrize("skills, skill, problem", [
    ([], None, r"card lists no skill \(with an id, a name and a description\)"),
    ([{"id": "desk"}], None, "card lists no skill"),
    (None, "refunds", r"card has no skill 'refunds'; its skills are \[\"desk\"\]: give coworker\(..., skill=...\)"),
    ([{"id": i, "name": i, "description": "d"} for i in ("a", "b")], None,
     r'card has its skills are \["a", "b"\]: give coworker\(..., skill=...\) one of them'),
])
def test_a_card_with_no_such_skill_is_refused_naming_the_skills_it_has(skills, skill, problem):
    with peer(answers(), card=lambda url: good_card(url, skills=skills)) as fake:
        with pytest.raises(A2AError, match=problem):
            coworker(fake.url, skill=skill, timeout=5)


def test_a_card_that_claims_a_stream_it_does_not_serve_is_an_error_note():
    with peer(answers({"task": task("t1", "COMPLETED", artifacts=["done"])})) as fake:
        note = ask(coworker(fake.url, timeout=5), request="hello")
    assert (note.content, note.error) == (
        'error: "Fake office"\'s card says it streams, but it answered SendStreamingMessage with no stream: its '
        "card lies; ask whoever runs it", True)


def test_a_task_whose_id_changes_mid_task_is_an_error_note():
    with peer(streams({"task": task("t1", "WORKING")}, status("t2", "COMPLETED"))) as fake:
        note = ask(coworker(fake.url, timeout=5), request="hello")
    assert (note.content, note.error) == (
        'error: "Fake office" answered about task "t2" while task t1 was under way: a task whose id changes is not '
        "followed; task t1 was cancelled", True)
    assert [method for method, *_ in fake.asked] == ["SendStreamingMessage", "CancelTask"]
    # going on with a task, an answer about another is refused the same way
    with peer(answers({"task": task("t9", "COMPLETED", artifacts=["done"])}), card=lambda url: good_card(url, streaming=False)) as fake:
        note = ask(coworker(fake.url, timeout=5), request="A1234", task_id="t1")
    assert note.content.startswith('error: "Fake office" answered about task "t9" while task t1 was under way')


def cancels(answer):
    """`answer`, except that a CancelTask is answered: the task, cancelled."""
    def either(request, h):
        if request["method"] == "CancelTask":
            whole(h, reply(request, task(request["params"]["id"], "CANCELED")))
        else:
            answer(request, h)
    return either


def keep_alives(h):
    """A stream's end that never comes: a comment every 50 ms, until the client hangs up."""
    while True:
        h.wfile.write(b": still here\n\n")
        h.wfile.flush()
        time.sleep(0.05)


def test_a_stream_that_never_ends_is_cut_off_at_the_timeout_and_its_task_cancelled():
    heard = []
    with peer(cancels(streams({"task": task("t1", "WORKING", "on it")}, then=keep_alives))) as fake:
        note = ask(coworker(fake.url, timeout=1, on_text=heard.append), request="hello")
    assert (note.content, note.error) == (
        f"error: {fake.url} had not answered in full within the timeout: a reply that may never end was cut off; "
        "raise timeout=; task t1 was cancelled", True)
    assert [method for method, *_ in fake.asked] == ["SendStreamingMessage", "CancelTask"]
    assert [piece for piece in heard if piece] == ["on it"] and "" in heard  # the words, then ticks


def test_a_stream_that_stops_before_the_task_ends_is_an_error_note():
    with peer(cancels(streams({"task": task("t1", "WORKING")}))) as fake:
        note = ask(coworker(fake.url, timeout=5), request="hello")
    assert (note.content, note.error) == (
        'error: "Fake office" stopped answering before task t1 ended or waited (it was TASK_STATE_WORKING); '
        "task t1 was cancelled", True)


def test_a_card_that_never_comes_is_cut_off_at_the_timeout():
    def silent(h):
        time.sleep(10)
    with peer(answers(), card=lambda url: silent) as fake:
        with pytest.raises(A2AError, match=r"had not answered in full within the timeout"):
            coworker(fake.url, timeout=0.5)


def huge(request, h):
    """A reply whose artifact is 50 MB of text, written a MiB at a time."""
    head = json.dumps(reply(request, {"task": task("t1", "COMPLETED", artifacts=["@"])})).encode()
    before, after = head.split(b"@")
    size = 50 << 20
    if request["method"] == "SendStreamingMessage":
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        h.wfile.write(b"data: " + before)
    else:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(before) + size + len(after)))
        h.end_headers()
        h.wfile.write(before)
    for _ in range(size >> 20):
        h.wfile.write(b"a" * (1 << 20))
    h.wfile.write(after + b"\n\n")


@pytest.mark.parametrize("streaming", [True, False])
def test_a_50_mb_artifact_is_not_read_past_the_cap_and_the_note_says_so(streaming):
    with peer(huge, card=lambda url: good_card(url, streaming=streaming)) as fake:
        note = ask(coworker(fake.url, timeout=20), request="hello")
    assert (note.content, note.error) == (
        f"error: {fake.url} sent more than {MAX_REPLY >> 20} MiB: the reply was not read (MAX_REPLY); ask for less",
        True)


def test_a_long_artifact_is_cut_and_the_result_says_so():
    with peer(answers({"task": task("t1", "COMPLETED", artifacts=["a" * 100_000])}),
              card=lambda url: good_card(url, streaming=False)) as fake:
        note = ask(coworker(fake.url, timeout=5), request="hello")
    assert note.content == "a" * MAX_RESULT + (
        f"\n[cut: the result was 100,000 characters; only the first {MAX_RESULT:,} are above]")


def raw(text):
    """A peer's answer: `text` (with {id} for the request's id), as it is."""
    def answer(request, h):
        whole(h, text.replace("{id}", json.dumps(request["id"])).encode())
    return answer


DONE = json.dumps({"task": task("t1", "COMPLETED", artifacts=["$79 refunded"])})
WRONG = json.dumps({"task": task("t1", "COMPLETED", artifacts=["$9999 refunded"])})


@pytest.mark.parametrize("text, problem", [
    ('{"jsonrpc": "2.0", "id": {id}, "result": ' + DONE[:-1] + ', "task": ' + WRONG[9:] + "}",
     '"task" is given twice: say each once'),
    ("[" * 100_000 + "]" * 100_000, "the JSON is nested too deeply to read"),
    ('{"jsonrpc": "2.0", "id": {id}, "result": {"amount": NaN}}', "NaN is not a number JSON can hold"),
    ("<html>busy</html>", "the text is not valid JSON (Expecting value: line 1 column 1 (char 0))"),
])
def test_json_a_reader_could_misread_is_an_error_note_never_a_guess(text, problem):
    with peer(raw(text), card=lambda url: good_card(url, streaming=False)) as fake:
        note = ask(coworker(fake.url, timeout=5), request="hello")
    assert (note.content, note.error) == (f"error: {fake.url} sent a reply that could not be read: {problem}", True)


def test_lone_surrogates_become_replacement_characters_and_the_result_is_utf_8():
    text = '{"jsonrpc": "2.0", "id": {id}, "result": ' + DONE.replace("$79 refunded", "\\ud83d $79 \\udc00 \\ud83d\\ude00") + "}"
    with peer(raw(text), card=lambda url: good_card(url, streaming=False)) as fake:
        note = ask(coworker(fake.url, timeout=5), request="hello")
    assert note.content == "\ufffd $79 \ufffd \U0001f600"
    assert note.content.encode("utf-8")


@pytest.mark.parametrize("text, problem", [
    ('{"jsonrpc": "2.0", "id": "another", "result": ' + DONE + "}", "with no JSON-RPC 2.0 reply to it"),
    ('{"jsonrpc": "2.0", "id": {id}, "result": {"task": {"id": "t1", "status": {"state": "DONE"}}}}',
     'said task t1 is in a state A2A has not: "DONE"'),
    ('{"jsonrpc": "2.0", "id": {id}, "result": {"task": {"status": {"state": "TASK_STATE_COMPLETED"}}}}',
     "sent a task with no id"),
    ('{"jsonrpc": "2.0", "id": {id}, "result": {"surprise": 1}}', 'sent an event that is none of A2A\'s: {"surprise": 1}'),
])
def test_a_reply_that_is_no_a2a_is_an_error_note_saying_what_it_lacks(text, problem):
    with peer(raw(text), card=lambda url: good_card(url, streaming=False)) as fake:
        note = ask(coworker(fake.url, timeout=5), request="hello")
    assert problem in note.content and note.error


TOKEN = "tok-" + "s3cr3t" * 6


def echo(request, h):
    """A peer that says the token it was sent everywhere it can: in an error, and in an artifact."""
    said = h.headers["Authorization"]
    if request["params"]["message"]["parts"][0]["text"] == "error":
        whole(h, {"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32603, "message": f"bad {said}"}})
        return
    whole(h, reply(request, {"task": task("t1", "COMPLETED", artifacts=[f"you sent {said}"])}))


def test_the_token_is_never_shown_whatever_a_server_says_back():
    with peer(echo, card=lambda url: good_card(url, streaming=False)) as fake:
        desk = coworker(fake.url, token=TOKEN, timeout=5)
        notes = [ask(desk, request="hello"), ask(desk, request="error")]
    assert [note.content for note in notes] == [
        "you sent Bearer [the key]", 'error: "Fake office" refused SendMessage: error -32603: "bad Bearer [the key]"']
    assert fake.asked[0][2] == f"Bearer {TOKEN}"  # sent it was


def test_a_refusal_of_the_token_quotes_nothing_the_server_said():
    def refuse(request, h):
        whole(h, {"error": f"unknown token {h.headers['Authorization']}"}, status=401)
    with peer(refuse, card=lambda url: good_card(url, streaming=False)) as fake:
        note = ask(coworker(fake.url, token=TOKEN, timeout=5), request="hello")
    assert note.content == f"error: {fake.url} refused the request (401): check the token (token=), and that it may use this agent"


def test_a_redirect_is_not_followed():
    def moved(h):
        h.send_response(302)
        h.send_header("Location", "http://127.0.0.2:9/card")
        h.send_header("Content-Length", "0")
        h.end_headers()
    with peer(answers(), card=lambda url: moved) as fake:
        with pytest.raises(A2AError, match=r'answered 302, a redirect to "http://127.0.0.2:9/card": it was not '
                                           "followed, so the token goes only where you said"):
            coworker(fake.url, token=TOKEN, timeout=5)


def test_settings_that_cannot_work_are_refused_when_it_is_made_and_a_password_is_never_echoed():
    with pytest.raises(ValueError) as raised:
        coworker("http://bob:hunter2@127.0.0.1:9", timeout=5)
    assert "hunter2" not in str(raised.value) and "not in the address" in str(raised.value)
    with pytest.raises(ValueError, match="the token is not shown here"):
        coworker("http://127.0.0.1:9", token="hunter2\n")
    with pytest.raises(ValueError, match="timeout must be a number of seconds above 0, not 0"):
        coworker("http://127.0.0.1:9", timeout=0)
    with pytest.raises(A2AError, match=r"could not connect to http://127.0.0.1:9/.well-known/agent-card.json: "
                                       "connection refused"):
        coworker("http://127.0.0.1:9", timeout=5)


def test_a_skill_named_like_final_answer_is_refused_unless_renamed():
    skills = [{"id": "Final-Answer", "name": "x", "description": "d"}]
    with peer(answers(), card=lambda url: good_card(url, skills=skills)) as fake:
        with pytest.raises(ValueError, match="reads like final_answer"):
            coworker(fake.url, timeout=5)
        assert coworker(fake.url, timeout=5, name="their_answer").name == "their_answer"


def test_the_client_imports_only_the_books_public_names_and_the_standard_library():
    found = set()
    for path in (ROOT / "microagent" / "a2a").glob("*.py"):
        if path.name in ("client.py", "exchange.py", "__init__.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module.startswith("microagent"):
                    found |= {f"{node.module}.{alias.name}" for alias in node.names}
    assert found <= {"microagent.a2a.client.VERSION", "microagent.a2a.client.coworker",
                     "microagent.a2a.exchange.A2AError", "microagent.a2a.exchange.replies",
                     "microagent.llm.endpoint", "microagent.mcp.tools.MAX_RESULT", "microagent.mcp.tools.cut",
                     "microagent.mcp.tools.local_name", "microagent.mcp.tools.reads_as", "microagent.message.Message",
                     "microagent.tool.Tool", "microagent.tool.error_note", "microagent.tool.final_answer",
                     "microagent.tool.read_json", "microagent.transport.MAX_REPLY", "microagent.transport.Key",
                     "microagent.transport.READ", "microagent.transport.TICK", "microagent.transport.mended"}


def test_a_stop_is_heard_while_a_stream_sends_only_keep_alives_and_the_task_is_cancelled():
    class Gone(Exception):
        pass
    heard = []

    def leave(piece):
        heard.append(piece)
        if heard[-2:] == ["on it", ""]:  # the first piece after the words: the client has gone
            raise Gone("the client went away")
    with peer(cancels(streams({"task": task("t1", "WORKING", "on it")}, then=keep_alives))) as fake:
        with pytest.raises(Gone):
            coworker(fake.url, timeout=20, on_text=leave).fn(request="hello")
    assert [(method, params.get("id")) for method, params, _ in fake.asked] == [
        ("SendStreamingMessage", None), ("CancelTask", "t1")]


def test_a_card_whose_url_is_no_url_is_refused_and_a_long_description_is_cut():
    with peer(answers(), card=lambda url: good_card(url, rpc="x" * 10_000)) as fake:
        with pytest.raises(A2AError, match=r"^\"Fake office\"'s card gives no usable URL, http:// or https://, like "
                                           r"'http://127.0.0.1:8000/', not 'xxx"):
            coworker(fake.url, timeout=5)
    skills = [{"id": "desk", "name": "desk", "description": "d" * 50_000}]
    with peer(answers(), card=lambda url: good_card(url, skills=skills)) as fake:
        about = coworker(fake.url, timeout=5).description
    assert "[cut: the result was 50,000 characters; only the first 2,000 are above]" in about and len(about) < 2_300


# --- the README's taste -----------------------------------------------------------------------------------

def test_the_readme_s_client_section_runs_as_printed(fresh_agent):
    readme = (ROOT / "microagent" / "a2a" / "README.md").read_text()
    ours = readme.split("## Calling a remote agent")[1].split("## Serving an office")[0]
    assert len(python_blocks(ours)) == 1, "the manager asking the remote refund office, and answering its question"
    check_blocks(ours.replace("http://127.0.0.1:8000", fresh_agent), "microagent/a2a/README.md")


def test_the_limits_are_what_the_readme_says():
    readme = (ROOT / "microagent" / "a2a" / "README.md").read_text()
    assert f"{MAX_RESULT:,} characters" in readme and f"{MAX_REPLY >> 20} MiB" in readme
    assert f"within {CANCEL_WAIT:g} s" in readme and "coworker(url, *, token=None, timeout=30.0, on_text=None, " \
        "skill=None, name=None)" in readme


# --- invariants of the wire -------------------------------------------------------------------------------

@settings(max_examples=60)
@given(st.lists(st.text(alphabet="ab\n:", max_size=8).map(lambda t: t.replace("\n", "")), min_size=1, max_size=5),
       st.lists(st.integers(1, 30), max_size=10))
def test_a_stream_s_events_are_the_same_however_its_bytes_are_cut(datas, cuts):
    stream = b"".join(b"data: " + d.encode() + b"\r\n: keep-alive\n\n" for d in datas)
    pieces, at = [], 0
    for n in cuts:
        pieces.append(stream[at:at + n])
        at += n
    pieces.append(stream[at:])
    assert list(_events(pieces)) == [d.encode() for d in datas]


@settings(max_examples=60)
@given(st.text(alphabet=st.characters(blacklist_categories=()), max_size=20))  # lone surrogates too
def test_whatever_text_a_server_sends_comes_out_as_utf_8_and_good_text_as_it_was(text):
    mended = _mended(read_json(json.dumps(text)), Key(None))  # \ud800 and friends, as JSON escapes them
    mended.encode("utf-8")  # raises if a lone surrogate is left
    if not any("\ud800" <= c <= "\udfff" for c in text):
        assert mended == text
