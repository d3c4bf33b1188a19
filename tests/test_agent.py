"""The loop: decide, act, write it down, repeat; and every way it can stop."""

import json
import subprocess
import sys
import threading

import pytest
from hypothesis import given, settings, strategies as st

from microagent import (agent_tool, ASSISTANT, CANCELLED, DONE, ERROR, OUT_OF_STEPS, PAUSED, SYSTEM, TOOL, USER,
                        Action, Agent, Context, Message, Tool, approve, as_tool, deny, final_answer, gate,
                        replay, scripted, story)


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


def waiting_pay(paid: list) -> Tool:
    """A coworker that pays, but only after a human has said yes; it notes each amount it paid."""
    @as_tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"
    return pay


def roles(ctx: Context) -> list[str]:
    return [m.role for m in ctx]


def test_one_turn_writes_a_decision_note_and_a_result_note():
    agent = Agent(scripted(Action("add", {"a": 2, "b": 3}, "add them"), answer("5")), [add, final_answer],
                  name="clerk", system="You add numbers.")
    ctx = agent.run("what is 2 + 3?").context
    # system, user, assistant, tool, assistant, tool
    assert roles(ctx) == [SYSTEM, USER, ASSISTANT, TOOL, ASSISTANT, TOOL]
    assert ctx[2] == Message(ASSISTANT, "add them", name="clerk", tool="add", args='{"a": 2, "b": 3}')
    assert ctx[3] == Message(TOOL, "5", name="add")
    assert ctx[5] == Message(TOOL, "5", name="final_answer")
    assert agent.answer("what is 2 + 3?") == "5"


def test_steps_yields_each_turn_then_why_it_stopped():
    agent = Agent(scripted(Action("add", {"a": 1, "b": 1}), answer("2")), [add, final_answer])
    steps = list(agent.steps("1 + 1?"))
    assert [(s.action.tool if s.action else None, s.result.content if s.result else None, s.stop) for s in steps] == [
        ("add", "2", None), ("final_answer", "2", None), (None, None, DONE)]
    assert [len(s.context) for s in steps] == [3, 5, 5]  # each step carries the notebook as it stands


@pytest.mark.parametrize("mistake, error", [
    (Action("multiply", {"a": 2, "b": 3}), "error: there is no tool named 'multiply'; the tools are: add, divide, final_answer"),
    (Action("add", {"a": 2}), "error: bad arguments for add: missing b (it takes: a, b)"),
    (Action("add", {"a": 2, "b": 3, "c": 4}), "error: bad arguments for add: unexpected c (it takes: a, b)"),
    (Action("add", {"a": 2, "b": "3"}), "error: bad arguments for add: b must be integer, not str '3'"),
    (Action("add", '{"a": 2, "b": '), "error: bad arguments for add: the arguments are not valid JSON"),
    (Action("add", "[2, 3]"), "error: bad arguments for add: the arguments must be a JSON object"),
    (Action("divide", {"a": 1, "b": 0}), "error: divide failed: ZeroDivisionError: division by zero"),
])
def test_a_brain_mistake_becomes_an_error_note_and_the_brain_recovers(mistake, error):
    brain = scripted(mistake, Action("add", {"a": 2, "b": 3}, "try again, properly"), answer("5"))
    ctx = Agent(brain, [add, divide, final_answer]).run("2 + 3?").context
    # user, assistant (the mistake), tool (the error), assistant, tool, assistant, tool
    assert roles(ctx) == [USER, ASSISTANT, TOOL, ASSISTANT, TOOL, ASSISTANT, TOOL]
    assert ctx[2].content.startswith(error)
    assert ctx[2].content.startswith(ERROR)
    assert (ctx[4].content, ctx[6].content) == ("5", "5")


def test_a_terminal_tool_with_bad_arguments_does_not_end_the_run():
    brain = scripted(Action("final_answer", {"text": "5"}), answer("5"))
    ctx = Agent(brain, [final_answer]).run("?").context
    assert ctx[2].content.startswith("error: bad arguments for final_answer: missing answer")
    assert ctx.last().content == "5"


def test_running_out_of_steps_is_said_in_a_note_and_is_never_passed_off_as_an_answer():
    def busy(ctx, tools):
        return Action("add", {"a": 1, "b": 1}, "keep adding")
    agent = Agent(busy, [add, final_answer], name="clerk", max_steps=3)
    steps = list(agent.steps("count forever"))
    assert steps[-1].stop == OUT_OF_STEPS
    ctx = steps[-1].context
    assert roles(ctx) == [USER] + [ASSISTANT, TOOL] * 3 + [ASSISTANT]
    assert ctx.last() == Message(ASSISTANT, "out of steps: stopped after 3 turns without an answer", name="clerk")
    assert agent.answer("count forever") == "(no answer: out of steps)"  # not "2", the last tool output
    # running the ended notebook again neither calls the brain nor writes a second note
    assert agent.run(context=ctx).context == ctx


def test_a_finished_run_handed_back_stays_finished():
    agent = Agent(scripted(answer("hi")), [final_answer])
    ctx = agent.run("hello").context
    steps = list(agent.steps(context=ctx))
    assert [(s.stop, s.context) for s in steps] == [(DONE, ctx)]


def test_a_conversation_goes_on_with_a_new_question_and_a_new_step_budget():
    agent = Agent(scripted(answer("hello!"), answer("still here")), [final_answer], max_steps=1)
    first = agent.run("hi").context
    second = agent.run("are you there?", context=first).context
    assert second.messages[:len(first)] == first.messages
    assert story(second).splitlines()[-3:] == [
        'you asked: "are you there?"', "  agent thought: done", "    -> final_answer returned: still here"]
    assert second.last().content == "still here"


def test_the_agent_asks_for_something_to_do():
    with pytest.raises(ValueError, match="give the agent something to do"):
        Agent(scripted(), [final_answer]).run()


def test_a_policy_that_returns_nonsense_is_a_programmers_mistake():
    with pytest.raises(TypeError, match="must return an Action"):
        Agent(lambda ctx, tools: "final_answer", [final_answer]).run("?")
    with pytest.raises(TypeError, match="must return an Action"):
        Agent(lambda ctx, tools: [], [final_answer]).run("?")


def test_two_tools_with_one_name_are_refused():
    with pytest.raises(ValueError, match="two tools share a name"):
        Agent(scripted(), [add, add])


def test_a_brain_may_ask_for_several_tools_at_once_and_each_is_a_turn():
    def brain(ctx, tools):
        if len(ctx) == 1:
            return [Action("add", {"a": 1, "b": 2}), Action("add", {"a": 3, "b": 4})]
        return [answer("3 and 7"), Action("add", {"a": 0, "b": 0})]  # the second is dropped: the job is done
    steps = list(Agent(brain, [add, final_answer]).steps("two sums"))
    assert [s.result.content for s in steps if s.result] == ["3", "7", "3 and 7"]
    assert steps[-1].stop == DONE and len(steps[-1].context) == 7


def test_a_thinking_brain_streams_events_through_the_steps():
    def brain(ctx, tools):
        yield "thinking "
        yield "aloud"
        return answer("done thinking")
    steps = list(Agent(brain, [final_answer]).steps("think"))
    assert [s.event for s in steps] == ["thinking ", "aloud", None, None]
    assert steps[-1].stop == DONE


def thinker(closed: list, kept: list | None = None):
    """A brain that thinks aloud in two pieces, and notes in `closed` when it is closed.

    Each thought is also kept in `kept`, so only an explicit close() can close it
    (not Python dropping the last reference to it).
    """
    def brain(ctx, tools):
        try:
            yield "one"
            yield "two"
            return answer("never")
        finally:
            closed.append(True)

    def keeping(ctx, tools):
        thought = brain(ctx, tools)
        if kept is not None:
            kept.append(thought)
        return thought
    return keeping


def test_cancelling_stops_a_thinking_brain_and_leaves_the_notebook_whole():
    cancel, closed, kept = threading.Event(), [], []
    brain = thinker(closed, kept)
    steps = []
    for step in Agent(brain, [final_answer]).steps("think", cancel=cancel):
        steps.append(step)
        cancel.set()  # the caller cancels after the first event
    assert steps[-1].stop == CANCELLED and closed == [True]
    assert roles(steps[-1].context) == [USER]  # no half-written decision


def test_a_cancelled_run_continues_later_from_its_notebook():
    cancel = threading.Event()
    agent = Agent(scripted(Action("add", {"a": 1, "b": 2}), answer("3")), [add, final_answer])
    for step in agent.steps("1 + 2?", cancel=cancel):
        cancel.set()
    assert step.stop == CANCELLED and roles(step.context) == [USER, ASSISTANT, TOOL]
    assert agent.run(context=step.context).context.last().content == "3"


def test_an_agent_used_as_a_tool_keeps_its_whole_run_in_the_result_note():
    adder = Agent(scripted(Action("add", {"a": 2, "b": 2}), answer("4")), [add, final_answer],
                  name="adder", description="Adds numbers.")
    manager = Agent(scripted(Action("adder", {"request": "2 + 2?"}, "ask the adder"), answer("it is 4")),
                    [agent_tool(adder), final_answer], name="manager")
    ctx = manager.run("what is 2 + 2?").context
    note = ctx[2]
    assert (note.role, note.name, note.content) == (TOOL, "adder", "4")
    assert roles(Context(note.notes)) == [USER, ASSISTANT, TOOL, ASSISTANT, TOOL]  # the inner run, whole
    assert Context.from_json(ctx.to_json()) == ctx
    assert story(ctx) == "\n".join([
        'you asked: "what is 2 + 2?"',
        "  manager thought: ask the adder",
        '      you asked: "2 + 2?"',
        '        adder thought: call add with {"a": 2, "b": 2}',
        "          -> add returned: 4",
        "        adder thought: done",
        "          -> final_answer returned: 4",
        "    -> adder returned: 4",
        "  manager thought: done",
        "    -> final_answer returned: it is 4",
    ])


def test_an_inner_agent_that_runs_out_of_steps_says_so_to_the_outer_one():
    looper = Agent(lambda ctx, tools: Action("add", {"a": 1, "b": 1}), [add, final_answer], name="looper",
                   description="Loops.", max_steps=2)
    outer = Agent(scripted(Action("looper", {"request": "go"}), answer("gave up")), [agent_tool(looper), final_answer])
    note = outer.run("?").context[2]
    assert note.content == "(no answer: out of steps)" and note.error  # a delegation that failed


def test_the_on_the_spot_gate_runs_the_tool_only_on_a_yes():
    ran = []

    @as_tool
    def wipe(disk: str) -> str:
        """Wipe a disk."""
        ran.append(disk)
        return f"{disk} wiped"
    brain = scripted(Action("wipe", {"disk": "D"}), answer("ok"))
    yes = Agent(brain, [gate(wipe, lambda name, args: True), final_answer]).run("wipe D").context
    no = Agent(brain, [gate(wipe, lambda name, args: args["disk"] != "D", by="alice"), final_answer]).run("wipe D").context
    assert yes[2].content == "approved by a human, D wiped"
    assert no[2].content == "denied by alice: wipe did not run"
    assert ran == ["D"]
    assert gate(wipe, print).schema == wipe.schema  # the gate takes exactly what the tool takes


def test_a_tool_that_needs_approval_pauses_the_run_before_it_runs():
    ran = []

    pay = waiting_pay(ran)
    agent = Agent(scripted(Action("pay", {"amount": 5}, "pay up"), answer("paid")), [pay, final_answer])
    paused = list(agent.steps("pay 5"))[-1]
    assert paused.stop == PAUSED and ran == []
    assert paused.context.pending == paused.context.last() and paused.context.pending.tool == "pay"
    assert agent.answer("pay 5") == "(no answer: paused)"
    assert agent.run(context=paused.context).context == paused.context  # no verdict yet: still paused
    done = agent.run(context=approve(paused.context, by="alice")).context
    assert ran == [5] and done.last().content == "paid"
    denied = agent.run(context=deny(paused.context, "not today", by="bob")).context
    assert ran == [5] and denied[-3].content == "denied by bob: not today"
    with pytest.raises(ValueError, match=r"this run waits on pay: finish it first with agent.run\(context=ctx\), after a human.s verdict"):
        agent.run("something else", context=paused.context)


def test_replay_makes_the_same_decisions_as_a_saved_run():
    original = Agent(scripted(Action("add", {"a": 2}, "oops"), Action("add", {"a": 2, "b": 2}), answer("4")),
                     [add, final_answer]).run("2 + 2?").context
    again = Agent(replay(original), [add, final_answer]).run("2 + 2?").context
    assert again == original


CONTINUE = """
import sys
from microagent import Agent, Context, Action, scripted, as_tool, final_answer

@as_tool
def add(a: int, b: int) -> int:
    '''Add two whole numbers.'''
    return a + b

agent = Agent(scripted(Action("add", {"a": 1, "b": 2}), Action("add", {"a": 3, "b": 3}), Action("final_answer", {"answer": "6"}, "done")),
              [add, final_answer], max_steps=5)
ctx = agent.run(context=Context.from_json(sys.stdin.read())).context
print(ctx.to_json())
"""


def test_a_saved_notebook_continues_in_a_fresh_process_exactly_where_it_stopped():
    agent = Agent(scripted(Action("add", {"a": 1, "b": 2}), Action("add", {"a": 3, "b": 3}), answer("6")),
                  [add, final_answer], max_steps=5)
    whole = agent.run("1 + 2, then 3 + 3?").context
    first_turn = next(agent.steps("1 + 2, then 3 + 3?")).context
    out = subprocess.run([sys.executable, "-c", CONTINUE], input=first_turn.to_json(),
                         capture_output=True, text=True, check=True)
    assert Context.from_json(out.stdout) == whole


# --- properties: the loop always ends, and the brain's mistakes are always notes ---------

moves = st.one_of(
    st.builds(lambda a, b: Action("add", {"a": a, "b": b}), st.integers(), st.integers()),
    st.builds(lambda a, b: Action("divide", {"a": a, "b": b}), st.integers(-3, 3), st.integers(-1, 1)),
    st.builds(lambda t, raw: Action(t, raw), st.sampled_from(["add", "nope", "final_answer"]), st.text(max_size=12)),
    st.builds(lambda x: Action("final_answer", {"answer": x}), st.text(max_size=5) | st.integers()
              | st.just("error: an answer that only looks like an error")),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(moves, min_size=1, max_size=3), min_size=1, max_size=30), st.integers(1, 8))
def test_any_brain_ends_within_max_steps_and_every_decision_gets_a_result(batches, max_steps):
    def brain(ctx, tools):
        return batches[min(sum(m.role == TOOL for m in ctx), len(batches) - 1)]
    steps = list(Agent(brain, [add, divide, final_answer], max_steps=max_steps).steps("go"))
    last = steps[-1]
    assert last.stop in (DONE, OUT_OF_STEPS) and all(s.stop is None for s in steps[:-1])
    ctx = last.context
    decisions = [m for m in ctx if m.role == ASSISTANT and m.tool]
    results = [m for m in ctx if m.role == TOOL]
    assert len(decisions) == len(results) <= max_steps
    for d, r in zip(decisions, results, strict=True):
        assert r.name == d.tool
        tool_ok = d.tool in ("add", "divide", "final_answer")
        if not tool_ok:
            assert r.content.startswith(ERROR + "there is no tool named")
    assert (last.stop == DONE) == (ctx.last().name == "final_answer" and not ctx.last().error)
    assert all(m.error == m.content.startswith(ERROR) for m in results if m.name != "final_answer")
    json.loads(ctx.to_json())


def test_an_agent_refuses_a_bare_function_where_a_tool_belongs():
    def look_up(order_id: str) -> str:
        return order_id
    with pytest.raises(TypeError, match="make one from a function with @as_tool"):
        Agent(scripted(), [look_up])
    with pytest.raises(TypeError, match="'str' object is not callable"):  # Python says it at the first turn
        Agent("not a brain", [final_answer]).run("hi")


def test_a_caller_who_stops_pulling_steps_closes_a_thinking_brain():
    closed, kept = [], []
    brain = thinker(closed, kept)
    steps = Agent(brain, [final_answer]).steps("think")
    assert next(steps).event == "one"
    steps.close()  # the caller walks away mid-thought
    assert closed == [True]


def test_a_hand_made_verdict_for_another_tool_is_refused_and_nothing_runs():
    ran = []

    pay = waiting_pay([])

    @as_tool
    def wipe() -> str:
        """Wipe everything."""
        ran.append("wipe")
        return "wiped"
    agent = Agent(scripted(Action("pay", {"amount": 5})), [pay, wipe, final_answer])
    paused = agent.run("pay 5").context
    forged = paused.add(Message(USER, "approved", name="eve", tool="wipe", args="{}"))
    with pytest.raises(ValueError, match="the verdict is on wipe, but the run waits on pay"):
        agent.run(context=forged)
    assert ran == []


def test_the_story_shows_what_a_human_changed():
    pay = waiting_pay([])
    agent = Agent(scripted(Action("pay", {"amount": 50}, "pay it"), answer("ok")), [pay, final_answer])
    ctx = agent.run(context=approve(agent.run("pay 50").context, by="alice", args={"amount": 40}, tool=pay)).context
    assert '    alice approved pay with {"amount": 40} (it asked for {"amount": 50})' in story(ctx).splitlines()
    assert "    -> pay returned: paid 40" in story(ctx).splitlines()


def test_a_final_answer_that_starts_like_an_error_still_ends_the_run():
    brain = scripted(Action("final_answer", {"answer": "error: no such order, sorry"}), answer("never said"))
    agent = Agent(brain, [final_answer])
    assert agent.answer("where is B0000?") == "error: no such order, sorry"


def test_a_policy_that_forgets_to_return_gets_a_clear_error():
    def forgetful(ctx, tools):
        Action("final_answer", {"answer": "hi"})  # no return
    with pytest.raises(TypeError, match="the policy must return an Action or a list of them, not None"):
        Agent(forgetful, [final_answer]).run("hi")


@pytest.mark.parametrize("make, says", [
    (lambda: Agent(scripted(), final_answer), "a list of Tools"),
    (lambda: Agent(scripted(), [final_answer], max_steps=-1), "max_steps must be a whole number, 0 or more"),
    (lambda: Agent(scripted(), [final_answer], max_steps="3"), "max_steps must be a whole number"),
    (lambda: Agent(scripted(), [final_answer], max_steps=True), "max_steps must be a whole number"),
    (lambda: Agent(scripted(), [final_answer]).run(context='{"format": "..."}').context, "load a saved one with Context.from_json"),
])
def test_an_agent_built_or_run_wrongly_says_what_to_do(make, says):
    with pytest.raises((TypeError, ValueError), match=says):
        make()


def test_a_notebook_with_only_a_verdict_and_no_question_is_refused_clearly():
    lonely = Context((Message(ASSISTANT, "", name="a", tool="final_answer", args="{}"),
                      Message(USER, "approved", name="bob", tool="final_answer", args="{}")))
    with pytest.raises(ValueError, match="give the agent something to do"):
        Agent(scripted(), [final_answer]).run(context=lonely)


def test_an_empty_notebook_handed_in_still_gets_the_system_note():
    agent = Agent(scripted(answer("hi")), [final_answer], system="Be brief.")
    assert roles(agent.run("hello", context=Context()).context) == [SYSTEM, USER, ASSISTANT, TOOL]


def test_asking_something_new_after_the_verdict_says_to_resume_first():
    pay = waiting_pay([])
    agent = Agent(scripted(Action("pay", {"amount": 5})), [pay, final_answer])
    with pytest.raises(ValueError, match=r"finish it first with agent.run\(context=ctx\), after a human.s verdict"):
        agent.run("and another thing", context=approve(agent.run("pay 5").context, by="bob"))


def test_a_gated_agent_used_as_a_tool_keeps_its_notes():
    adder = Agent(scripted(Action("add", {"a": 1, "b": 1}), answer("2")), [add, final_answer], name="adder",
                  description="Adds.")
    outer = Agent(scripted(Action("adder", {"request": "1 + 1?"}), answer("done")),
                  [gate(agent_tool(adder), lambda name, args: True), final_answer])
    note = outer.run("?").context[2]
    assert note.content == "approved by a human, 2"
    assert len(note.notes) == 5  # user, assistant, tool, assistant, tool: the inner run, kept


def test_an_inner_agent_whose_brain_fails_still_leaves_its_run_on_record():
    def flaky_brain(ctx, tools):
        if sum(m.role == TOOL for m in ctx) == 0:
            return Action("add", {"a": 1, "b": 1}, "add first")
        raise ConnectionError("the model server went away")
    inner = Agent(flaky_brain, [add, final_answer], name="adder", description="Adds.")
    outer = Agent(scripted(Action("adder", {"request": "1 + 1?"}), answer("sorry")), [agent_tool(inner), final_answer])
    note = outer.run("?").context[2]
    assert note.error and note.content == "error: adder failed: ConnectionError: the model server went away"
    assert [m.role for m in note.notes] == [USER, ASSISTANT, TOOL]  # the add that ran is on record


def test_denying_a_terminal_tool_does_not_end_the_run():
    @as_tool(terminal=True, needs_approval=True)
    def send(text: str) -> str:
        """Send the final reply."""
        return text
    brain = scripted(Action("send", {"text": "draft"}), Action("send", {"text": "better"}))
    agent = Agent(brain, [send], max_steps=3)
    ctx = agent.run(context=deny(agent.run("reply").context, "wrong wording", by="alice")).context
    assert ctx[-2].error and ctx[-2].content == "denied by alice: wrong wording"
    assert ctx.pending is ctx.last() and ctx.pending.args == '{"text": "better"}'  # tried again, waits again
    done = agent.run(context=approve(ctx, by="alice")).context
    assert agent.answer(context=done) == "better"


def test_a_final_answer_starting_like_an_error_stays_the_answer_when_handed_back():
    agent = Agent(scripted(Action("final_answer", {"answer": "error: none of that worked"})), [final_answer])
    ctx = agent.run("?").context
    assert agent.answer(context=Context.from_json(ctx.to_json())) == "error: none of that worked"


def test_a_cancel_set_before_resuming_runs_nothing_not_even_the_approved_tool():
    ran = []

    pay = waiting_pay(ran)
    agent = Agent(scripted(Action("pay", {"amount": 5})), [pay, final_answer])
    cancel = threading.Event()
    cancel.set()
    steps = list(agent.steps(context=approve(agent.run("pay 5").context, by="bob"), cancel=cancel))
    assert [s.stop for s in steps] == [CANCELLED] and ran == []


def test_a_gate_refuses_the_final_answer_and_an_approver_that_does_not_say_true_or_false():
    with pytest.raises(ValueError, match="not the final answer"):
        gate(final_answer, lambda name, args: True)
    gated = Agent(scripted(Action("add", {"a": 1, "b": 2}), answer("?")), [gate(add, lambda n, a: "no"), final_answer])
    assert gated.run("1 + 2").context[2].content == (
        "error: add failed: TypeError: the approver must answer True or False, not 'no'")
