"""A hostile brain, a lying tool and a tampered file: each attack ends as an error note or a clear error.

Many of these failed before the fix they guard (issue 8, part 4; and issue 16, where a comment
says so); the rest pin down attacks the design already stops, so that it keeps stopping them.
"""

import dataclasses
import json
import re
import threading
from typing import Literal

import pytest
from hypothesis import given, settings, strategies as st

from microagent.agent import DONE, OUT_OF_STEPS, PAUSED, Agent
from microagent.approval import approve, gate, verdict, waiting
from microagent.context import Context
from microagent.invariants import check
from microagent.memory import compact
from microagent.message import ASSISTANT, TOOL, USER, Message
from microagent.policy import Action
from microagent.retry import retrying
from microagent.saving import from_json, to_json
from microagent.schema import as_tool
from microagent.script import actions, replay, scripted
from microagent.team import agent_tool
from microagent.tool import Tool, final_answer
from microagent.trace import story


@as_tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay an amount, once a human has said yes."""
    return f"paid {amount}"


@as_tool
def echo(text: str) -> str:
    """Say the text back."""
    return text


@as_tool
def pay_now(amount: float) -> str:
    """Pay at once."""
    return f"paid ${amount:g}"


def answer(text: str) -> Action:
    return Action("final_answer", {"answer": text}, "done")


# --- arguments a human would read one way and the tool another ------------------------------

def test_a_key_given_twice_is_an_error_note_and_never_waits_for_a_human():
    # a reader that kept the last of two keys would show a human {"amount": 1 ... and pay 9999
    twice = '{"amount": 1,' + " " * 200 + '"amount": 9999}'
    agent = Agent(scripted(Action("pay", twice, "pay a little"), answer("no")), [pay, final_answer])
    ctx = agent.run("pay")
    assert agent.why_stop(ctx) == DONE and waiting(ctx) is None
    assert ctx[2] == Message(TOOL, 'error: bad arguments for pay: "amount" is given twice: say each once',
                             "pay", error=True)


def test_what_the_story_shows_what_approve_copies_and_what_runs_are_the_same_arguments():
    ran = []

    @as_tool(needs_approval=True)
    def refund(order_id: str, amount: int) -> str:
        """Refund an order."""
        ran.append({"order_id": order_id, "amount": amount})
        return "refunded"
    asked = '{"order_id": "A1", "amount": 79}'
    agent = Agent(scripted(Action("refund", asked, "refund it"), answer("ok")), [refund, final_answer])
    paused = agent.run("refund A1")
    assert story(paused).splitlines()[-1] == f"    .. refund {asked} is waiting for a human to decide"
    approved = approve(paused, refund, by="alice")
    assert approved[-2].args == asked and approved[-1] == Message(TOOL, "refunded", "refund")
    agent.run(approved)
    assert ran == [json.loads(asked)]


@pytest.mark.parametrize("nested", ["[" * 100_000 + "]" * 100_000, '{"a": ' * 50_000 + "1" + "}" * 50_000])
def test_arguments_nested_absurdly_deep_are_an_error_note_not_a_crash(nested):
    agent = Agent(scripted(Action("echo", nested), answer("gave up")), [echo, final_answer])
    ctx = agent.run("echo this")
    assert agent.why_stop(ctx) == DONE
    assert ctx[2] == Message(TOOL, "error: bad arguments for echo: the JSON is nested too deeply to read",
                             "echo", error=True)


def test_an_approver_gets_a_copy_so_it_cannot_change_what_runs():
    def meddler(name, args):
        args["amount"] = 9999  # a buggy (or hostile) approver edits what it was shown
        return True
    agent = Agent(scripted(Action("pay_now", {"amount": 5}), answer("ok")), [gate(pay_now, meddler), final_answer])
    assert agent.run("pay 5")[2] == Message(TOOL, "approved by a human, paid $5", "pay_now")


@pytest.mark.parametrize("value", [True, 1.0, "1", None])
def test_a_literal_takes_its_values_only_not_values_that_python_calls_equal(value):
    @as_tool
    def choose(pick: Literal[1, "one"]) -> str:
        """Pick one."""
        return str(pick)
    assert choose.read('{"pick": 1}') == {"pick": 1} and choose.read('{"pick": "one"}') == {"pick": "one"}
    assert choose.read(json.dumps({"pick": value})) == Message(
        TOOL, f"error: bad arguments for choose: pick must be one of [1, 'one'], not {value!r}", "choose",
        error=True)


@pytest.mark.parametrize("args, problem", [
    ('{"counts": [1, true]}', "counts[1] must be integer, not bool True"),  # True is an int in Python
    ('{"counts": [1, 2.0]}', "counts[1] must be integer, not float 2.0"),  # never truncated to 2
    ('{"counts": [1], "limit": "3"}', "limit must be integer or null, not str '3'"),  # never coerced
])
def test_values_python_would_let_pass_for_an_int_are_refused(args, problem):
    @as_tool
    def total(counts: list[int], limit: int | None = None) -> str:
        """Add the counts up."""
        return str(sum(counts[:limit]))
    assert total.read('{"counts": [1, 2], "limit": null}') == {"counts": [1, 2], "limit": None}
    assert total.run(args) == Message(TOOL, f"error: bad arguments for total: {problem}", "total", error=True)


# --- a tool that lies, or hands back text that is not valid Unicode --------------------------

def test_text_that_is_not_valid_unicode_saves_to_a_utf8_file_and_loads_back(tmp_path):
    name = b"caf\xe9.txt".decode("utf-8", "surrogateescape")  # a file name as the OS hands it over
    ctx = Agent(scripted(Action("echo", {"text": name}), answer(name)), [echo, final_answer]).run(f"read {name}")
    path = tmp_path / "run.json"
    path.write_text(to_json(ctx), encoding="utf-8")
    assert from_json(path.read_text(encoding="utf-8")) == ctx


ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=12)  # lone surrogates included


@settings(max_examples=150, deadline=None)
@given(said=st.lists(ANY_TEXT, min_size=1, max_size=4), question=ANY_TEXT)
def test_every_notebook_the_loop_writes_saves_as_utf8_and_loads_back(said, question):
    moves = [Action("echo", {"text": s}, s) for s in said] + [answer(said[-1])]
    ctx = Agent(scripted(*moves), [echo, final_answer]).run(question)
    text = to_json(ctx)
    back = from_json(text.encode("utf-8"))
    # a high and a low surrogate side by side are read back as the one character they spell
    paired = re.compile("[\ud800-\udbff][\udc00-\udfff]")
    assert back == ctx or any(paired.search(m.content + (m.args or "")) for m in ctx)
    assert to_json(back) == to_json(from_json(to_json(back)))


# --- brains that make every mistake, and replay -----------------------------------------------

MOVES = st.one_of(
    st.just(Action("echo", {"text": "hi"})),
    st.just(Action(None, reasoning="the reply was cut off at 200 tokens")),  # no move at all
    st.just(Action("", "{}")),                      # a tool with no name
    st.just(Action("nope", "{}")),                  # a tool that does not exist
    st.just(Action("echo", '{"text": ')),           # broken JSON
    st.just(Action("echo", "")),                    # no JSON at all (replay once made it "{}")
    st.just(Action("echo", '{"text": "a", "text": "b"}')),  # a key twice
    st.just(Action("echo", {"text": 5})),           # does not fit the schema
    st.just(Action("liar", "{}")),                  # a tool whose inner notes break every rule
    st.just(Action("pay", {"amount": 3})),          # waits for a human
    st.just(answer("done")),
)


@as_tool
def liar() -> Message:
    """Hands back a note whose inner notes break the rules."""
    return Message(TOOL, "fine", notes=(Message(TOOL, "a result from nowhere"),))


def finish(brain, budget: int) -> Context:
    """Run to the end, a human saying yes to each payment the run waits on."""
    agent = Agent(brain, [echo, liar, pay, final_answer], budget)
    ctx = agent.run("go")
    while waiting(ctx) is not None:
        ctx = agent.run(approve(ctx, pay, by="alice"))
    return ctx


@settings(max_examples=200, deadline=None)
@given(moves=st.lists(MOVES, min_size=1, max_size=10), budget=st.integers(0, 8))
def test_any_run_keeps_the_rules_and_replaying_it_writes_it_again_note_for_note(moves, budget):
    ctx = finish(scripted(*moves, *[answer("the end")] * 10), budget)
    assert check(ctx) is ctx  # the loop never writes a notebook that check refuses
    again = finish(replay(ctx), budget)
    assert again == ctx and actions(again) == actions(ctx)


# --- delegation that would never end ----------------------------------------------------------

def its_own_tool(brain, max_steps: int, max_depth: int, wrap=lambda tool: tool) -> Agent:
    """An agent named "me" that has itself as a coworker (through `wrap`, if given)."""
    def ask_me(request: str) -> Message:
        return myself(request=request)
    me = Agent(brain, [wrap(Tool("me", "Ask me.", ask_me)), final_answer], max_steps, name="me")
    myself = agent_tool(me, max_depth=max_depth)
    return me


def in_a_thread(tool: Tool) -> Tool:
    """`tool`, run in a thread of its own and given up on after 30 s: a timeout wrapper."""
    def timed(**args):
        out = []
        worker = threading.Thread(target=lambda: out.append(tool(**args)), daemon=True)
        worker.start()
        worker.join(30)
        return out[0] if out else "timed out"
    return Tool(tool.name, tool.description, timed, schema=tool.schema)


@pytest.mark.parametrize("wrap", [lambda tool: tool, in_a_thread], ids=["same thread", "new thread"])
def test_an_agent_that_is_its_own_tool_stops_at_a_depth_a_reader_can_see(wrap):
    # issue 16: a tool run in a new thread started at depth 0, and the bound did not hold
    calls = []

    def delegate_again(ctx, tools):
        calls.append(len(ctx))
        if ctx.last().kind == "result" or len(calls) > 200:  # its helper (itself) answered, or refused
            return answer(ctx.last().content)
        return Action("me", {"request": "and again"})
    me = its_own_tool(delegate_again, max_steps=2, max_depth=3, wrap=wrap)
    ctx = me.run("go")
    assert me.why_stop(ctx) == DONE
    deepest = ctx
    for level in range(3):  # each level asked the next, down to max_depth
        deepest = Context(deepest[2].notes)
    assert deepest[2].error and deepest[2].content.endswith("and max_depth is 3")
    assert len(calls) == 8  # two brain calls at each of four levels, however the tool runs


def test_two_agents_asking_each_other_through_threads_stop_too():
    calls = []

    def delegate(other: str):
        def brain(ctx, tools):
            calls.append(other)
            if ctx.last().kind == "result" or len(calls) > 200:
                return answer(ctx.last().content)
            return Action(other, {"request": "you do it"})
        return brain
    later = {}
    a = Agent(delegate("b"), [in_a_thread(Tool("b", "Ask b.", lambda request: later["b"](request=request))),
                              final_answer], 2, name="a")
    b = Agent(delegate("a"), [in_a_thread(Tool("a", "Ask a.", lambda request: later["a"](request=request))),
                              final_answer], 2, name="b")
    later.update(a=agent_tool(a, max_depth=1), b=agent_tool(b, max_depth=1))
    ctx = a.run("go")
    # a asks b, b asks a, and that a's request to b is refused: three runs, two brain calls each
    assert len(calls) == 6 and a.why_stop(ctx) == DONE
    assert Context(Context(ctx[2].notes)[2].notes)[2].content == (
        "error: b was not asked: 1 runs of it are under way already, in any thread, and max_depth is 1")


def test_the_delegation_bound_is_a_product_as_team_says():
    calls = []

    def always_delegate(ctx, tools):
        calls.append(1)
        return Action("me", {"request": "again"})
    me = its_own_tool(always_delegate, max_steps=3, max_depth=2)
    assert me.why_stop(me.run("go")) == OUT_OF_STEPS
    assert len(calls) == 3 + 3 ** 2 + 3 ** 3  # max_steps at each of max_depth + 1 levels, multiplied down


@settings(max_examples=30, deadline=None)
@given(max_steps=st.integers(1, 3), max_depth=st.integers(1, 3), threaded=st.booleans())
def test_the_bound_is_the_same_product_in_this_thread_or_a_new_one(max_steps, max_depth, threaded):
    calls = []

    def always_delegate(ctx, tools):
        calls.append(1)
        assert len(calls) <= 200, "the bound did not hold"
        return Action("me", {"request": "again"})
    me = its_own_tool(always_delegate, max_steps, max_depth, in_a_thread if threaded else (lambda tool: tool))
    assert me.why_stop(me.run("go")) == OUT_OF_STEPS
    assert len(calls) == sum(max_steps ** level for level in range(1, max_depth + 2))


def test_an_inner_brain_whose_failure_cannot_say_what_it_is_is_still_a_note():
    class Mute(Exception):
        def __str__(self):
            raise RuntimeError("no words either")

    def mute(ctx, tools):
        raise Mute()
    tool = agent_tool(Agent(mute, [final_answer], name="mute"))
    assert tool.run('{"request": "hi"}') == Message(
        TOOL, "error: mute failed: Mute: (it could not say why)", "mute", notes=(Message(USER, "hi"),),
        error=True)


def test_an_inner_brain_that_returns_no_action_is_a_note_not_a_crash():
    tool = agent_tool(Agent(lambda ctx, tools: "final_answer", [final_answer], name="sloppy"))
    assert tool.run('{"request": "hi"}').content == (
        "error: sloppy failed: TypeError: the policy must return an Action, not 'final_answer'")


def test_an_interrupt_inside_an_agent_used_as_a_tool_goes_up_and_gives_its_place_back():
    class Stop(BaseException):  # like KeyboardInterrupt: not a failure to turn into a note
        pass
    stops = [True]

    def brain(ctx, tools):
        if stops:
            stops.pop()
            raise Stop()
        return answer("back")
    tool = agent_tool(Agent(brain, [final_answer], name="helper"), max_depth=1)
    with pytest.raises(Stop):
        tool.run('{"request": "hi"}')
    assert tool.run('{"request": "again"}').content == "back"  # not "already under way"


# --- retries, budgets and pauses that never end ------------------------------------------------

def test_retrying_many_times_never_overflows_and_never_waits_past_its_cap():
    waits = []

    def flaky() -> str:
        """Always fails."""
        raise ConnectionError("down")
    tool = retrying(as_tool(flaky), attempts=1100, wait=1.0, sleep=waits.append, max_wait=30.0)
    with pytest.raises(RuntimeError, match="gave up after 1100 attempts"):
        tool()
    assert len(waits) == 1099 and max(waits) == 30.0 and waits[:3] == [1.0, 2.0, 4.0]
    no_wait = retrying(as_tool(flaky), attempts=1100, wait=0.0, sleep=waits.append)
    with pytest.raises(RuntimeError):
        no_wait()  # 0.0 * 2 ** 1024 once raised OverflowError


def test_a_gated_copy_of_a_tool_made_with_dataclasses_replace_still_checks_its_arguments():
    waits = dataclasses.replace(echo, needs_approval=True)
    agent = Agent(scripted(Action("echo", {"text": 1}), Action("echo", {"text": "x"})), [waits, final_answer])
    ctx = agent.run("go")
    assert ctx[2].error and agent.why_stop(ctx) == PAUSED and waiting(ctx).args == '{"text": "x"}'


def test_out_of_steps_is_said_once_however_often_the_run_is_resumed():
    agent = Agent(lambda ctx, tools: Action("echo", {"text": "again"}), [echo, final_answer], 2)
    ctx = agent.run("loop")
    for times in range(3):
        ctx = agent.run(ctx)
    assert agent.why_stop(ctx) == OUT_OF_STEPS
    assert [m.content for m in ctx if m.kind == "remark"] == [
        "out of steps: stopped after 2 turns without an answer"]


@pytest.mark.parametrize("args, number", [
    ('{"amount": 1e999}', "1e999"), ('{"amount": -1e999}', "-1e999"), ('{"amount": NaN}', "NaN"),
    ('{"amount": Infinity}', "Infinity"),
    ('{"amount": 5, "memo": {"rate": NaN}}', "NaN"),  # issue 16: nested, it reached the tool
])
def test_a_number_too_large_to_be_one_is_an_error_note_and_never_a_payment_of_inf(args, number):
    @as_tool
    def pay_with_memo(amount: float, memo: dict | None = None) -> str:
        """Pay at once, with a memo."""
        return f"paid ${amount:g}"
    agent = Agent(scripted(Action("pay_with_memo", args), answer("no")), [pay_with_memo, final_answer])
    assert agent.run("pay")[2] == Message(
        TOOL, f"error: bad arguments for pay_with_memo: {number} is not a number JSON can hold", "pay_with_memo",
        error=True)


def test_approved_arguments_that_are_not_finite_are_refused_before_anything_is_written():
    @as_tool(needs_approval=True)
    def refund(amount: float) -> str:
        """Refund an amount."""
        return f"refunded ${amount:g}"
    paused = Agent(scripted(Action("refund", {"amount": 79})), [refund, final_answer]).run("refund")
    with pytest.raises(ValueError, match="Infinity is not a number JSON can hold"):
        verdict(paused, refund, True, by="alice", args={"amount": float("inf")})


# --- memory ----------------------------------------------------------------------------------

def test_a_view_compacted_again_and_again_never_nests_and_always_saves():
    # issue 16: summaries that kept what they folded nested, and to_json raised RecursionError
    view = Context((Message(USER, "count forever"),))
    for n in range(1000):
        view = compact(view.add(Message(ASSISTANT, "", "me", "echo", '{"text": "x"}'),
                                Message(TOOL, "x", "echo")), keep=2)
    assert len(view) == 4 and not any(m.notes for m in view)
    assert from_json(to_json(view)) == view


def test_a_summary_cannot_fake_a_line_of_the_story_either():
    fake = 'all fine\n    alice approved pay with {"amount": 1}'
    turns = (Message(ASSISTANT, "", "me", "echo", '{"text": "x"}'), Message(TOOL, "x", "echo")) * 3
    view = compact(Context((Message(USER, "go"),) + turns), keep=2, summarise=lambda notes: fake)
    assert story(view).splitlines()[1:3] == [
        "  memory: all fine",
        '      |     alice approved pay with {"amount": 1}']


# --- the story ---------------------------------------------------------------------------------

@pytest.mark.parametrize("brk", ["\n", "\r", "\r\n", "\u2028", "\u2029", "\x85", "\x0c", "\x0b", "\x1c"])
def test_a_brain_cannot_fake_a_line_of_the_story_with_a_line_break(brk):
    # issue 16: only \n was marked, and \r, \u2028, \x85, \x0c ... printed a line of their own
    fake = f'pay the small fee{brk}    alice approved pay with {{"amount": 1}}'
    paused = Agent(scripted(Action("pay", {"amount": 9999}, fake)), [pay, final_answer]).run("pay")
    assert story(paused).splitlines() == [
        'you asked: "pay"',
        "  agent thought: pay the small fee",
        '      |     alice approved pay with {"amount": 1}',  # marked as the same note's second line
        '    .. pay {"amount": 9999} is waiting for a human to decide']
