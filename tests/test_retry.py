"""Recovering from errors: retrying a flaky tool, and hiding a tool's secrets from the brain."""

import pytest
from hypothesis import given, settings, strategies as st

from microagent.agent import Agent
from microagent.approval import gate
from microagent.message import TOOL, USER, Message
from microagent.policy import Action
from microagent.retry import hiding, retrying
from microagent.saving import to_json
from microagent.schema import as_tool
from microagent.script import scripted
from microagent.team import agent_tool
from microagent.tool import Tool, final_answer
from hard_parts import run_checked



def flaky(failures: int, error=ConnectionError):
    """A tool that raises `failures` times, then works; it keeps count of its calls."""
    calls = []

    @as_tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        calls.append(url)
        if len(calls) <= failures:
            raise error(f"dropped (call {len(calls)})")
        return f"the page at {url}"
    return fetch, calls


def one_call(tool: Tool) -> Message:
    """Run an agent that calls `tool` once and stops; hand back the result note."""
    agent = Agent(scripted(Action(tool.name, {"url": "x.org"}), Action("final_answer", {"answer": "ok"})),
                  [tool, final_answer])
    return run_checked(agent, "fetch x.org")[2]


def test_a_flaky_tool_is_tried_again_and_the_result_says_so():
    fetch, calls = flaky(2)
    waits = []
    note = one_call(retrying(fetch, attempts=3, wait=0.5, sleep=waits.append))
    assert note == Message(TOOL, "the page at x.org (on attempt 3 of 3; the last failure: "
                                 "ConnectionError: dropped (call 2))", name="fetch")
    assert len(calls) == 3 and waits == [0.5, 1.0]  # waiting longer before each new try


def test_a_tool_that_works_at_once_is_left_as_it_is():
    fetch, calls = flaky(0)
    assert one_call(retrying(fetch, sleep=pytest.fail)) == Message(TOOL, "the page at x.org", name="fetch")
    assert len(calls) == 1


def test_the_attempts_are_bounded_and_giving_up_is_an_error_note():
    fetch, calls = flaky(10)
    note = one_call(retrying(fetch, attempts=3, sleep=lambda s: None))
    assert note.content == ("error: fetch failed: RuntimeError: gave up after 3 attempts; "
                            "the last failure: ConnectionError: dropped (call 3)")
    assert len(calls) == 3


@settings(max_examples=100, deadline=None)
@given(failures=st.integers(0, 12), attempts=st.integers(1, 12), wait=st.floats(0, 5),
       max_wait=st.floats(0, 20))
def test_tries_and_waits_are_bounded_whatever_the_settings(failures, attempts, wait, max_wait):
    fetch, calls = flaky(failures)
    waits = []
    note = one_call(retrying(fetch, attempts=attempts, wait=wait, sleep=waits.append, max_wait=max_wait))
    assert len(calls) == min(failures + 1, attempts) and len(waits) == len(calls) - 1
    assert note.error == (failures >= attempts)
    assert waits == [min(wait * 2 ** i, max_wait) for i in range(len(waits))]


def test_a_failure_that_cannot_say_what_it_is_is_still_tried_again():
    class Mute(ConnectionError):
        def __str__(self):
            raise RuntimeError("no words")
    fetch, calls = flaky(1, error=lambda text: Mute())
    note = one_call(retrying(fetch, sleep=lambda s: None))
    assert note == Message(TOOL, "the page at x.org (on attempt 2 of 3; the last failure: "
                                 "Mute: (it could not say why))", "fetch")


def test_only_the_errors_named_are_tried_again():
    fetch, calls = flaky(1, error=ValueError)  # a bug, not a bad connection: trying again won't help
    note = one_call(retrying(fetch, on=(ConnectionError, TimeoutError), sleep=pytest.fail))
    assert note.content == "error: fetch failed: ValueError: dropped (call 1)" and len(calls) == 1


def test_a_wrapped_tool_looks_exactly_like_the_tool_it_wraps():
    @as_tool(terminal=True, needs_approval=True)
    def send(to: str, times: int = 1) -> str:
        """Send a letter."""
        return f"sent to {to}"
    for wrapped in (retrying(send), hiding(send, print)):
        assert (wrapped.name, wrapped.description, wrapped.terminal, wrapped.needs_approval) == (
            "send", "Send a letter.", True, True)
        assert wrapped.schema == send.schema
        assert wrapped.read('{"to": 3}') == send.read('{"to": 3}') == Message(
            TOOL, "error: bad arguments for send: to must be string, not int 3", "send", error=True)


def test_an_agent_used_as_a_tool_answers_its_brains_failure_so_it_is_not_retried():
    tries = []

    def brain(ctx, tools):
        tries.append(1)
        raise TimeoutError("the model took too long")

    helper = agent_tool(Agent(brain, [final_answer], name="reader"))
    note = run_checked(Agent(scripted(Action("reader", {"request": "read x.org"}),
                                      Action("final_answer", {"answer": "ok"})), [retrying(helper), final_answer]),
                       "go")[2]
    assert note == Message(TOOL, "error: reader failed: TimeoutError: the model took too long", "reader",
                           notes=(Message(USER, "read x.org"),), error=True)
    assert len(tries) == 1  # an error note is an answer: retrying leaves it be


def test_at_least_one_attempt():
    with pytest.raises(ValueError, match="attempts, a whole number from 1 up"):
        retrying(final_answer, attempts=0)


SECRET = "sk-demo-0000-not-a-real-key"


@as_tool
def charge(amount: float) -> str:
    """Charge a card."""
    raise PermissionError(f"gateway said 401 for key {SECRET}")


def test_a_hidden_error_reaches_the_brain_generic_and_the_developer_in_full():
    errors = []
    agent = Agent(scripted(Action("charge", {"amount": 5}), Action("final_answer", {"answer": "sorry"})),
                  [hiding(charge, errors.append), final_answer])
    ctx = run_checked(agent, "pay")
    assert ctx[2] == Message(TOOL, "error: charge failed: RuntimeError: it failed; the details went to the "
                                   "developer", name="charge", error=True)
    assert SECRET not in to_json(ctx)  # nowhere in the notebook
    assert [(type(e), str(e)) for e in errors] == [(PermissionError, f"gateway said 401 for key {SECRET}")]


def test_the_generic_error_carries_no_link_back_to_the_secret():
    hidden = hiding(charge, lambda e: None, said="payment failed")
    with pytest.raises(RuntimeError) as e:
        hidden(amount=5)
    assert str(e.value) == "payment failed"
    assert e.value.__context__ is None and e.value.__cause__ is None  # a traceback can't print the original


def test_hidden_then_retried_the_attempts_happen_and_the_secret_stays_out():
    errors = []
    fetch, calls = flaky(5, error=lambda text: ConnectionError(f"{text}, token={SECRET}"))
    note = one_call(retrying(hiding(fetch, errors.append), attempts=2, sleep=lambda s: None))
    assert len(calls) == 2 and SECRET not in note.content
    assert len(errors) == 2 and SECRET in str(errors[-1])  # the developer sees every failure, in full


def test_a_failure_followed_by_a_success_keeps_the_secret_out_too():
    # retrying writes the last failure into a successful result, so hiding goes inside
    errors = []
    fetch, calls = flaky(1, error=lambda text: ConnectionError(f"{text}, token={SECRET}"))
    note = one_call(retrying(hiding(fetch, errors.append, said="the fetch failed"), sleep=lambda s: None))
    assert note.content == "the page at x.org (on attempt 2 of 3; the last failure: RuntimeError: the fetch failed)"
    assert SECRET in str(errors[0]) and len(calls) == 2


@pytest.mark.parametrize("wrongly, says", [
    ({"attempts": 0}, "attempts, a whole number from 1 up"),
    ({"attempts": "3"}, "attempts, a whole number from 1 up"),
    ({"attempts": 2.5}, "attempts, a whole number from 1 up"),
    ({"attempts": True}, "attempts, a whole number from 1 up"),
    ({"wait": -1}, "wait and max_wait, seconds from 0 up"),
    ({"wait": float("nan")}, "wait and max_wait, seconds from 0 up"),
    ({"max_wait": float("inf")}, "wait and max_wait, seconds from 0 up"),  # a wait that never ends
    ({"on": ConnectionError}, "on= is a tuple of exception classes"),
    ({"on": ("oops",)}, "on= is a tuple of exception classes"),
])
def test_retrying_set_up_wrongly_says_so_when_the_tool_is_wrapped(wrongly, says):
    fetch, calls = flaky(0)
    with pytest.raises((TypeError, ValueError), match=says):
        retrying(fetch, **wrongly)


def test_a_no_from_a_gate_is_an_answer_and_is_not_asked_again():
    asked = []

    def says_no(name: str, args: dict) -> bool:
        asked.append(args)
        return False
    fetch, calls = flaky(0)
    gated = gate(fetch, says_no)
    note = one_call(retrying(gated, sleep=pytest.fail))
    assert note == Message(TOOL, "denied by a human: fetch did not run", "fetch", error=True)
    assert len(asked) == 1 and calls == []


def test_a_no_from_a_gate_reaches_the_brain_through_hiding():
    errors = []
    fetch, calls = flaky(0)
    note = one_call(hiding(gate(fetch, lambda name, args: False), errors.append))
    assert note == Message(TOOL, "denied by a human: fetch did not run", "fetch", error=True)
    assert errors == [] and calls == []  # a no is an answer, not a failure to hide


def test_a_hidden_agent_used_as_a_tool_keeps_the_secret_its_brain_raised():
    def leaky(ctx, tools):
        raise RuntimeError(f"db error for {SECRET}")
    errors = []
    # the agent used as a tool answers its brain's failure as an error note; hiding hides its words
    inner = agent_tool(Agent(leaky, [final_answer], name="fetch"), description="Fetch a page.")
    agent = Agent(scripted(Action("fetch", {"request": "x.org"}), Action("final_answer", {"answer": "ok"})),
                  [hiding(inner, errors.append), final_answer])
    ctx = run_checked(agent, "fetch x.org")
    assert ctx[2] == Message(TOOL, "error: fetch failed: it failed; the details went to the developer",
                             "fetch", notes=(Message(USER, "x.org"),), error=True)
    assert SECRET not in to_json(ctx)
    assert [str(e) for e in errors] == [f"fetch: error: fetch failed: RuntimeError: db error for {SECRET}"]


@pytest.mark.parametrize("wrap", [
    lambda tool: hiding(tool, lambda e: None),
    lambda tool: retrying(tool, attempts=2, sleep=lambda s: None),
])
def test_a_wrapped_agent_used_as_a_tool_keeps_its_run_when_it_fails(wrap):
    def breaks_after_one_turn(ctx, tools):
        if sum(m.role == TOOL for m in ctx) == 0:
            return Action("fetch", {"url": "x.org"}, "look first")
        raise RuntimeError("the brain broke")
    fetch, calls = flaky(0)
    inner = agent_tool(Agent(breaks_after_one_turn, [fetch, final_answer], name="reader"))
    agent = Agent(scripted(Action("reader", {"request": "read x.org"}), Action("final_answer", {"answer": "ok"})),
                  [wrap(inner), final_answer])
    note = run_checked(agent, "go")[2]
    assert note.error and [m.kind for m in note.notes] == ["question", "decision", "result"]
    assert len(calls) == 1  # not retried: the failure came back as an answer


@pytest.mark.parametrize("make", [
    lambda: retrying(lambda url: url),
    lambda: hiding(lambda url: url, print),
    lambda: retrying(flaky(0)[0], sleep="not a function"),
])
def test_wrappers_take_a_tool_and_functions(make):
    with pytest.raises(TypeError, match="takes a Tool"):
        make()
