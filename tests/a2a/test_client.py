"""The A2A client (microagent.a2a.coworker) against an agent served by the a2a-sdk server, code nobody
here wrote, and against small hostile peers (tests/a2a/client_fakes.py); all on 127.0.0.1.

Every test is bounded in time: a timeout of its own, and short timeouts on every call.
"""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from client_fakes import events, good_card, peer, reply, status, task, whole
from microagent import Action, Agent, final_answer, scripted
from microagent.a2a import A2AError, coworker
from microagent.a2a.exchange import MAX_REPLY
from microagent.mcp import MAX_RESULT
from microagent.message import Message
from microagent.trace import story

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
