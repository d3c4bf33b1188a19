"""The loop: decide, write the decision down, act, write the result down; and every way it stops."""

import json
import math
import subprocess
import sys
import threading

import pytest
from hypothesis import given, settings, strategies as st

from hard_parts import payer
from microagent.agent import CANCELLED, DONE, OUT_OF_STEPS, PAUSED, Agent, Step
from microagent.context import Context
from microagent.message import ASSISTANT, SYSTEM, TOOL, USER, Message
from microagent.policy import Action
from microagent.saving import from_json, to_json
from microagent.schema import as_tool
from microagent.script import replay, scripted
from microagent.tool import Tool, final_answer


@as_tool
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@as_tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


def answer(text: str, why: str = "done") -> Action:
    return Action("final_answer", {"answer": text}, why)


def kinds(ctx: Context) -> list[str]:
    return [m.kind for m in ctx]


def test_one_turn_writes_a_decision_note_and_then_a_result_note():
    agent = Agent(scripted(Action("add", {"a": 2, "b": 3}, "add them"), answer("5")), [add, final_answer],
                  name="clerk")
    ctx = agent.run("what is 2 + 3?")
    assert kinds(ctx) == ["question", "decision", "result", "decision", "result"]
    assert ctx[1] == Message(ASSISTANT, "add them", name="clerk", tool="add", args='{"a": 2, "b": 3}')
    assert ctx[2] == Message(TOOL, "5", name="add")
    assert ctx[4] == Message(TOOL, "5", name="final_answer")
    assert agent.why_stop(ctx) == DONE and ctx.last().content == "5"


def test_steps_yields_each_turn_then_why_it_stopped():
    agent = Agent(scripted(Action("add", {"a": 1, "b": 1}), answer("2")), [add, final_answer])
    steps = list(agent.steps("1 + 1?"))
    assert [(s.action and s.action.tool, s.result and s.result.content, s.stop) for s in steps] == [
        ("add", "2", None), ("final_answer", "2", None), (None, None, DONE)]
    assert [len(s.context) for s in steps] == [3, 5, 5]  # each step carries the notebook as it stands


def test_the_brain_reads_the_tools_by_name_and_cannot_change_the_agent():
    seen = []

    def brain(ctx, tools):
        seen.append(("final_answer" in tools, sorted(tools), tools["final_answer"] is final_answer))
        with pytest.raises(TypeError):
            tools["add"] = add  # a read-only view of the agent's coworkers
        return answer("ok")
    agent = Agent(brain, [final_answer])
    agent.run("hi")
    assert seen == [(True, ["final_answer"], True)] and list(agent.tools) == ["final_answer"]


@pytest.mark.parametrize("mistake, error", [
    (Action("multiply", {"a": 2, "b": 3}),
     "error: there is no tool named 'multiply'; the tools are: add, divide, final_answer"),
    (Action("add", {"a": 2}), "error: bad arguments for add: missing b (it takes: a, b)"),
    (Action("add", {"a": 2, "b": 3, "c": 4}), "error: bad arguments for add: unexpected c (it takes: a, b)"),
    (Action("add", {"a": 2, "b": "3"}), "error: bad arguments for add: b must be integer, not str '3'"),
    (Action("add", {"a": True, "b": 3}), "error: bad arguments for add: a must be integer, not bool True"),
    (Action("add", '{"a": 2, "b": '), "error: bad arguments for add: the text is not valid JSON"),
    (Action("add", "[2, 3]"), "error: bad arguments for add: the arguments must be object, not list [2, 3]"),
    (Action("add", '{"a": 2, "a": 3, "b": 1}'), 'error: bad arguments for add: "a" is given twice: say each once'),
    (Action("add", "[" * 100_000), "error: bad arguments for add: the JSON is nested too deeply to read"),
    (Action("divide", {"a": 1, "b": 0}), "error: divide failed: ZeroDivisionError: division by zero"),
])
def test_a_brain_mistake_becomes_an_error_note_and_the_brain_recovers(mistake, error):
    brain = scripted(mistake, Action("add", {"a": 2, "b": 3}, "try again, properly"), answer("5"))
    ctx = Agent(brain, [add, divide, final_answer]).run("2 + 3?")
    assert kinds(ctx) == ["question"] + ["decision", "result"] * 3
    assert ctx[2].content.startswith(error) and ctx[2].error
    assert (ctx[4].content, ctx[6].content) == ("5", "5")


@pytest.mark.parametrize("args", [{"amount": math.nan}, {"amount": math.inf}, {"memo": {"x": [math.nan]}},
                                  '{"amount": 1e999}', '{"memo": {"deep": [NaN]}}', '{"amount": -Infinity}'])
def test_a_number_json_cannot_hold_never_reaches_a_tool_however_deep_it_sits(args):
    paid = []

    @as_tool
    def pay(amount: float = 0.0, memo: dict | None = None) -> str:
        """Pay an amount, with a memo."""
        paid.append((amount, memo))
        return "paid"
    ctx = Agent(scripted(Action("pay", args), answer("no")), [pay, final_answer]).run("pay")
    assert ctx[2].error and "is not a number JSON can hold" in ctx[2].content and paid == []


def test_a_tool_whose_exception_cannot_even_be_printed_is_an_error_note_not_a_crash():
    class Mute(Exception):
        def __str__(self):
            raise RuntimeError("no words")

    def fails():
        raise Mute()
    ctx = Agent(scripted(Action("fails"), answer("sorry")), [Tool("fails", "Fail.", fails), final_answer]).run("?")
    assert ctx[2] == Message(TOOL, "error: fails failed: Mute: (it could not say why)", name="fails", error=True)
    assert ctx.last().content == "sorry"


def test_a_tool_that_returns_a_note_with_a_flag_that_is_not_a_bool_is_refused_where_it_is_made():
    with pytest.raises(TypeError, match="error must be True or False"):
        Message(TOOL, "x", error=1)


def test_a_terminal_tool_with_bad_arguments_does_not_end_the_run():
    ctx = Agent(scripted(Action("final_answer", {"text": "5"}), answer("5")), [final_answer]).run("?")
    assert ctx[2].content.startswith("error: bad arguments for final_answer: missing answer")
    assert ctx.last().content == "5"


def test_a_final_answer_that_starts_like_an_error_still_ends_the_run():
    agent = Agent(scripted(answer("error: 404 is the page you asked about")), [final_answer])
    ctx = agent.run("what is a 404?")
    assert agent.why_stop(ctx) == DONE and not ctx.last().error  # the flag tells, not the words


def test_running_out_of_steps_is_said_in_a_remark_and_is_never_passed_off_as_an_answer():
    def busy(ctx, tools):
        return Action("add", {"a": 1, "b": 1}, "keep adding")
    agent = Agent(busy, [add, final_answer], max_steps=3, name="clerk")
    steps = list(agent.steps("count forever"))
    ctx = steps[-1].context
    assert steps[-1].stop == OUT_OF_STEPS == agent.why_stop(ctx)
    assert kinds(ctx) == ["question"] + ["decision", "result"] * 3 + ["remark"]
    assert ctx.last() == Message(ASSISTANT, "out of steps: stopped after 3 turns without an answer", name="clerk")
    # running the ended notebook again neither calls the brain nor writes a second note
    assert agent.run(ctx) == ctx


def test_a_budget_of_zero_steps_asks_the_brain_nothing():
    def brain(ctx, tools):
        raise AssertionError("asked")
    ctx = Agent(brain, [final_answer], max_steps=0).run("?")
    assert kinds(ctx) == ["question", "remark"]
    assert ctx.last().content == "out of steps: stopped after 0 turns without an answer"


def test_one_turn_is_said_as_one_turn():
    ctx = Agent(scripted(Action("add", {"a": 1, "b": 1})), [add, final_answer], max_steps=1).run("1 + 1?")
    assert ctx.last().content == "out of steps: stopped after 1 turn without an answer"


def test_a_remark_someone_else_wrote_does_not_end_the_run_while_the_budget_lasts():
    thinking = Context((Message(USER, "2 + 2?"), Message(ASSISTANT, "let me think", "agent")))
    agent = Agent(scripted(answer("4")), [final_answer], max_steps=1)
    assert agent.why_stop(thinking) is None  # no move made yet: one of one left
    ctx = agent.run(thinking)
    assert kinds(ctx) == ["question", "remark", "decision", "result"]  # the brain read it as a note
    assert agent.why_stop(ctx) == DONE and ctx.last().content == "4"
    # with no budget at all, the same remark is the end of the run, and no note is added
    spent = Agent(scripted(), [final_answer], max_steps=0)
    assert spent.why_stop(thinking) == OUT_OF_STEPS and spent.run(thinking) == thinking


def test_an_agent_with_a_bigger_budget_goes_on_where_an_out_of_steps_run_stopped():
    brain = scripted(Action("add", {"a": 1, "b": 1}), Action("add", {"a": 2, "b": 1}), answer("3"))
    tight, roomy = (Agent(brain, [add, final_answer], max_steps=n) for n in (1, 3))
    spent = tight.run("count to 3")
    assert tight.why_stop(spent) == OUT_OF_STEPS and tight.run(spent) == spent
    assert roomy.why_stop(spent) is None  # one move of three made: the remark is a note to read
    ctx = roomy.run(spent)
    # question, decision, result, remark (out of steps), then two more turns
    assert kinds(ctx) == ["question", "decision", "result", "remark"] + ["decision", "result"] * 2
    assert ctx.messages[:len(spent)] == spent.messages
    assert roomy.why_stop(ctx) == DONE and ctx.last().content == "3"


def test_an_empty_notebook_has_nothing_to_stop_and_a_run_asks_it_for_a_question():
    agent = Agent(scripted(), [final_answer])
    assert agent.why_stop(Context()) is None
    with pytest.raises(TypeError, match="give the agent a question"):
        agent.run(Context())
    # a notebook with no question counts every move it holds
    remark = Message(ASSISTANT, "a summary", "memory")
    assert Agent(scripted(), [final_answer], max_steps=0).why_stop(Context((remark,))) == OUT_OF_STEPS


def test_a_finished_run_handed_back_stays_finished():
    agent = Agent(scripted(answer("hi")), [final_answer])
    ctx = agent.run("hello")
    assert [(s.stop, s.context) for s in agent.steps(ctx)] == [(DONE, ctx)]


def test_a_conversation_goes_on_with_a_new_question_and_a_new_step_budget():
    agent = Agent(scripted(answer("hello!"), answer("still here")), [final_answer], max_steps=1)
    first = agent.run("hi")
    second = agent.run(first.add(Message(USER, "are you there?")))
    assert second.messages[:len(first)] == first.messages
    assert kinds(second) == ["question", "decision", "result", "question", "decision", "result"]
    assert second.last().content == "still here"


def test_a_brain_with_no_move_writes_what_was_wrong_and_is_asked_again():
    brain = scripted(Action(None, reasoning="your reply was cut off at 200 tokens: write a shorter one"),
                     answer("short"))
    agent = Agent(brain, [final_answer], name="helper")
    steps = list(agent.steps("?"))
    ctx = steps[-1].context
    assert kinds(ctx) == ["question", "no_move", "decision", "result"]
    assert ctx[1] == Message(ASSISTANT, "your reply was cut off at 200 tokens: write a shorter one",
                             name="helper", error=True)
    assert steps[0].result is None and steps[-1].stop == DONE


def test_a_brain_that_never_makes_a_move_is_still_stopped_by_the_budget():
    ctx = Agent(lambda ctx, tools: Action(None, reasoning="nothing to say"), [final_answer], max_steps=4).run("?")
    assert kinds(ctx) == ["question"] + ["no_move"] * 4 + ["remark"]


@pytest.mark.parametrize("make, says", [
    (lambda: Agent("not a policy", [final_answer]), "the policy is the brain"),
    (lambda: Agent(scripted(), final_answer), "tools must be a list of Tools"),
    (lambda: Agent(scripted(), [print]), "tools must be a list of Tools"),
    (lambda: Agent(scripted(), [add, add]), "two tools share a name"),
    (lambda: Agent(scripted(), [add], max_steps=True), "max_steps must be a whole number"),
    (lambda: Agent(scripted(), [add], max_steps=-1), "max_steps must be a whole number"),
    (lambda: Agent(scripted(), [add]).run(Context()), "give the agent a question"),
    (lambda: Agent(scripted(), [add]).run('{"format": ...}'.encode()), "give the agent a question"),
    (lambda: Agent(lambda ctx, tools: "final_answer", [add]).run("?"), "the policy must return an Action"),
    (lambda: Agent(lambda ctx, tools: None, [add]).run("?"), "the policy must return an Action"),
    (lambda: Agent(lambda ctx, tools: [answer("x")], [add]).run("?"), "the policy must return an Action"),
])
def test_an_agent_built_or_run_wrongly_says_what_to_do(make, says):
    with pytest.raises((TypeError, ValueError), match=says):
        make()


def test_a_tool_that_needs_approval_pauses_the_run_before_it_runs():
    paid = []
    pay = payer(paid)
    agent = Agent(scripted(Action("pay", {"amount": 5}, "pay it"), answer("paid")), [pay, final_answer])
    steps = list(agent.steps("pay 5"))
    ctx = steps[-1].context
    assert kinds(ctx) == ["question", "decision"] and steps[-1].stop == PAUSED == agent.why_stop(ctx)
    assert paid == [] and steps[0].result is None
    assert agent.run(ctx) == ctx  # still waiting: nothing runs until a verdict is written


def test_a_call_that_cannot_fit_a_tool_that_needs_approval_is_refused_without_asking_anyone():
    ctx = Agent(scripted(Action("pay", {"amount": "lots"}), answer("no")), [payer([]), final_answer]).run("pay")
    assert kinds(ctx) == ["question", "decision", "result", "decision", "result"]
    assert ctx[2].content == "error: bad arguments for pay: amount must be integer, not str 'lots'"


def test_a_notebook_that_ends_on_a_verdict_waits_until_the_verdict_is_carried_out():
    waiting = Context((Message(USER, "pay 5"), Message(ASSISTANT, "", "agent", "pay", '{"amount": 5}'),
                       Message(USER, "approved", "alice", "pay", '{"amount": 5}')))
    agent = Agent(scripted(), [final_answer])
    assert agent.why_stop(waiting) == PAUSED and agent.run(waiting) == waiting


def test_a_cancel_is_heard_between_steps_and_the_run_goes_on_later_from_its_notebook():
    cancel = threading.Event()
    agent = Agent(scripted(Action("add", {"a": 1, "b": 2}), Action("add", {"a": 3, "b": 4}), answer("7")),
                  [add, final_answer])
    steps = agent.steps("add", cancel)
    first = next(steps)
    cancel.set()
    last = next(steps)
    assert (last.stop, last.context) == (CANCELLED, first.context)
    assert agent.why_stop(last.context) is None and agent.why_stop(last.context, cancel) == CANCELLED
    ctx = agent.run(last.context)  # later, without the cancel: it goes on from the notebook
    assert kinds(ctx) == ["question"] + ["decision", "result"] * 3 and ctx.last().content == "7"


def test_replay_makes_the_same_moves_as_a_saved_run():
    brain = scripted(Action("add", {"a": 2}), Action(None, reasoning="lost"), Action("add", {"a": 2, "b": 3}),
                     answer("5"))
    ctx = Agent(brain, [add, final_answer]).run("2 + 3?")
    again = Agent(replay(from_json(to_json(ctx))), [add, final_answer]).run("2 + 3?")
    assert again == ctx


def test_the_budget_spans_a_resume_because_it_is_counted_from_the_notebook():
    busy = Agent(lambda ctx, tools: Action("add", {"a": 1, "b": 1}), [add, final_answer], max_steps=4)
    steps = busy.steps("count")
    for _ in range(2):
        half = next(steps).context
    steps.close()
    ctx = busy.run(from_json(to_json(half)))
    assert kinds(ctx) == ["question"] + ["decision", "result"] * 4 + ["remark"]


PLAN = [Action("add", {"a": 1, "b": 2}, "first"), Action("add", {"a": 3}, "a mistake"),
        Action(None, reasoning="no move"), Action("add", {"a": 3, "b": 4}, "again"), answer("7")]
FINISH = """
import sys
from microagent.agent import Agent
from microagent.policy import Action
from microagent.saving import from_json, to_json
from microagent.schema import as_tool
from microagent.script import scripted
from microagent.tool import final_answer

@as_tool
def add(a: int, b: int) -> int:
    '''Add two whole numbers.'''
    return a + b

plan = [Action("add", {"a": 1, "b": 2}, "first"), Action("add", {"a": 3}, "a mistake"),
        Action(None, reasoning="no move"), Action("add", {"a": 3, "b": 4}, "again"),
        Action("final_answer", {"answer": "7"}, "done")]
print(to_json(Agent(scripted(*plan), [add, final_answer]).run(from_json(sys.stdin.read()))))
"""


@pytest.mark.parametrize("stop_after", range(1, 5))
def test_a_saved_notebook_goes_on_in_a_fresh_process_exactly_where_it_stopped(stop_after):
    agent = Agent(scripted(*PLAN), [add, final_answer])
    whole = agent.run("1 + 2, then 3 + 4?")
    steps = agent.steps("1 + 2, then 3 + 4?")
    for _ in range(stop_after):
        saved = next(steps).context
    out = subprocess.run([sys.executable, "-c", FINISH], input=to_json(saved), capture_output=True, text=True,
                         timeout=60, check=True)
    assert from_json(out.stdout) == whole


moves = st.one_of(
    st.builds(lambda a, b: Action("add", {"a": a, "b": b}), st.integers(-5, 5), st.integers(-5, 5)),
    st.just(Action("add", {"a": 1})), st.just(Action("nope", {})), st.just(Action("add", "{broken")),
    st.just(Action("divide", {"a": 1, "b": 0})), st.just(Action(None, reasoning="no move")),
    st.just(answer("done")), st.just(Action("final_answer", {"wrong": 1})))


@settings(max_examples=150, deadline=None)
@given(st.lists(moves, min_size=1, max_size=30), st.integers(0, 8))
def test_any_brain_ends_within_its_budget_with_every_decision_answered_and_says_why(plan, max_steps):
    calls = []

    def brain(ctx, tools):
        calls.append(len(ctx))
        return plan[len(calls) - 1] if len(calls) <= len(plan) else Action(None, reasoning="the plan is over")
    agent = Agent(brain, [add, divide, final_answer], max_steps=max_steps)
    steps = list(agent.steps("go"))
    ctx, stop = steps[-1].context, steps[-1].stop
    assert len(calls) <= max_steps and stop in (DONE, OUT_OF_STEPS) and agent.why_stop(ctx) == stop
    for i, m in enumerate(ctx):  # every decision is answered by a result from the tool it called, right after it
        if m.kind == "decision":
            assert ctx[i + 1].kind == "result" and ctx[i + 1].name == m.tool
    assert all(isinstance(s, Step) for s in steps) and [s.stop for s in steps[:-1]] == [None] * (len(steps) - 1)
    assert from_json(to_json(ctx)) == ctx
    assert json.loads(to_json(ctx))["messages"][0] == {"role": USER, "content": "go"}
    assert SYSTEM not in [m.role for m in ctx]
