"""Doing things at the same time: async tools, a run driven from asyncio, several calls at once.

No test here reads a clock: calls that overlap are shown by a Barrier they can only pass
together, an event loop that stays free by a coroutine that runs while a tool waits, and
every wait is bounded (WAIT seconds), so a broken build fails instead of hanging.
"""

import asyncio
import contextvars
import threading

import pytest
from hypothesis import given, settings, strategies as st

from hard_parts import run_checked
from microagent.agent import CANCELLED, DONE, PAUSED, Agent
from microagent.approval import approve, deny
from microagent.context import Context
from microagent.message import ASSISTANT, TOOL, USER, Message
from microagent.parallel import (LEFT, async_steps, async_tool, at_once, at_once_action,
                                 left_calls, left_first)
from microagent.policy import Action
from microagent.saving import from_json, to_json
from microagent.schema import as_tool
from microagent.script import replay, scripted
from microagent.tool import final_answer

WAIT = 10  # seconds: the most any test waits for a thread or an event


@async_tool
async def look_up_order(order_id: str) -> str:
    """Look up an order by its id."""
    await asyncio.sleep(0)  # it really awaits: the coroutine is driven by a loop
    return f"{order_id}: Wireless Headphones, $79"


@as_tool
def stock(item: str) -> str:
    """How many of an item are in stock."""
    return f"{item}: 3 in stock"


def calls(*made: tuple[str, dict]) -> dict:
    """at_once's arguments for the calls `made`, each (tool name, its arguments)."""
    return {"calls": [{"tool": tool, "args": args} for tool, args in made]}


# --- async tools ------------------------------------------------------------------------

def test_an_async_tool_runs_its_coroutine_and_its_note_is_what_the_coroutine_returned():
    note = look_up_order.run('{"order_id": "A1234"}')
    assert note == Message(TOOL, "A1234: Wireless Headphones, $79", "look_up_order")
    assert look_up_order.schema == {"type": "object", "required": ["order_id"],
                                    "properties": {"order_id": {"type": "string"}}}
    assert look_up_order.description == "Look up an order by its id."


def test_an_async_tool_works_in_a_run_called_inside_a_running_event_loop():
    # a run called straight from `async def` calls the tool on the event loop's own
    # thread, where asyncio.run would raise: the coroutine gets a loop of its own
    agent = Agent(scripted(Action("look_up_order", {"order_id": "A1234"}),
                           Action("final_answer", {"answer": "found"})),
                  [look_up_order, final_answer])

    async def main():
        return agent.run("Where is A1234?")
    ctx = asyncio.run(main())
    # question, decision, result, decision, result
    assert ctx[2] == Message(TOOL, "A1234: Wireless Headphones, $79", "look_up_order")
    assert agent.why_stop(ctx) == DONE


def test_an_async_tool_that_raises_is_an_error_note():
    @async_tool
    async def flaky(order_id: str) -> str:
        """A lookup whose server is down."""
        await asyncio.sleep(0)
        raise ConnectionError(f"no answer about {order_id}")
    note = flaky.run('{"order_id": "A1234"}')
    assert note == Message(TOOL, "error: flaky failed: ConnectionError: no answer about "
                                 "A1234", "flaky", error=True)


def test_async_tool_takes_its_settings_like_as_tool():
    @async_tool(name="refund", needs_approval=True)
    async def pay(order_id: str) -> str:
        """Refund an order."""
        return f"refunded {order_id}"
    assert (pay.name, pay.needs_approval, pay.terminal) == ("refund", True, False)
    assert pay.run('{"order_id": "A1"}').content == "refunded A1"


def test_async_tool_refuses_a_plain_def_and_says_what_to_use():
    def plain(order_id: str) -> str:
        """Not async."""
        return order_id
    with pytest.raises(TypeError, match=r"from an async def, not .*\(@as_tool\)"):
        async_tool(plain)


# --- a run driven from asyncio ----------------------------------------------------------

def office(*script: Action, tools=(look_up_order, stock)) -> Agent:
    return Agent(scripted(*script), [*tools, final_answer], name="clerk")


GOOD = (Action("look_up_order", {"order_id": "A1234"}, "look it up"),
        Action("final_answer", {"answer": "on its way"}, "answer"))


def collected(agent: Agent, task, cancel=None) -> list:
    async def main():
        return [step async for step in async_steps(agent, task, cancel)]
    return asyncio.run(main())


def test_async_steps_yields_the_steps_that_steps_yields():
    assert collected(office(*GOOD), "Where is A1234?") == list(office(*GOOD).steps(
        "Where is A1234?"))


def test_async_steps_leaves_the_event_loop_free_while_a_tool_waits():
    # the tool waits for an event that only a coroutine on the same loop sets:
    # were the loop blocked by the run, the tool would wait in vain
    served = threading.Event()

    @as_tool
    def wait_for_the_loop() -> str:
        """Wait until the event loop has served someone else."""
        return "the loop was free" if served.wait(WAIT) else "the loop was blocked"

    agent = office(Action("wait_for_the_loop"), Action("final_answer", {"answer": "ok"}),
                   tools=[wait_for_the_loop])

    async def main():
        async def someone_else():
            await asyncio.sleep(0)
            served.set()
        other = asyncio.create_task(someone_else())
        steps = [step async for step in async_steps(agent, "go")]
        await other
        return steps
    steps = asyncio.run(main())
    assert steps[0].result.content == "the loop was free"
    assert steps[-1].stop == DONE


def test_setting_cancel_ends_async_steps_after_the_turn_under_way_with_a_cancelled_step():
    cancel, started, go_on = threading.Event(), threading.Event(), threading.Event()

    @as_tool
    def slow() -> str:
        """A call that takes a while."""
        started.set()
        assert go_on.wait(WAIT)
        return "done slowly"

    agent = office(Action("slow"), Action("final_answer", {"answer": "never"}),
                   tools=[slow])

    async def main():
        seen = []
        async for step in async_steps(agent, "go", cancel):
            seen.append(step)
        return seen

    async def cancel_mid_turn():
        run = asyncio.create_task(main())
        assert await asyncio.to_thread(started.wait, WAIT)
        cancel.set()
        go_on.set()
        return await asyncio.wait_for(run, WAIT)
    seen = asyncio.run(cancel_mid_turn())
    # the turn under way ended and was written; then nothing new started
    assert [s.stop for s in seen] == [None, CANCELLED]
    assert [m.kind for m in seen[-1].context] == ["question", "decision", "result"]
    assert seen[-1].context[-1].content == "done slowly"


def test_cancelling_the_task_sets_cancel_and_the_brain_is_not_asked_again():
    cancel, started, go_on, asked = (threading.Event(), threading.Event(),
                                     threading.Event(), [])

    @as_tool
    def slow() -> str:
        """A call that takes a while."""
        started.set()
        assert go_on.wait(WAIT)
        return "done slowly"

    def brain(ctx, tools):
        asked.append(len(ctx))
        return Action("slow")
    agent = Agent(brain, [slow, final_answer])

    async def main():
        async def consume():
            async for step in async_steps(agent, "go", cancel):
                pass
        run = asyncio.create_task(consume())
        assert await asyncio.to_thread(started.wait, WAIT)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        assert cancel.is_set()  # set as the task was cancelled, before the turn ended
        go_on.set()
    asyncio.run(main())  # asyncio.run waits for the worker thread before it returns
    assert asked == [1]  # the brain was asked once, for the turn under way


# --- several calls at once --------------------------------------------------------------

def test_at_once_runs_its_calls_at_the_same_time():
    # three calls that can only pass the barrier together: one at a time, each would
    # wait in vain and break it
    together = threading.Barrier(3, timeout=WAIT)

    @as_tool
    def meet(who: str) -> str:
        """Wait for the others."""
        together.wait()
        return f"{who} met the others"

    note = at_once([meet]).run(to_json_args(calls(("meet", {"who": "a"}),
                                                   ("meet", {"who": "b"}),
                                                   ("meet", {"who": "c"}))))
    assert note.content == "meet: a met the others\nmeet: b met the others\n" \
                           "meet: c met the others"
    assert not note.error


def to_json_args(args: dict) -> str:
    return Action("at_once", args).args


def test_async_tools_called_at_once_run_at_the_same_time_each_on_a_loop_of_its_own():
    together = threading.Barrier(2, timeout=WAIT)

    @async_tool
    async def meet(who: str) -> str:
        """Wait for the other, without blocking this call's event loop."""
        await asyncio.to_thread(together.wait)
        return f"{who} met"

    note = at_once([meet]).run(to_json_args(calls(("meet", {"who": "a"}),
                                                   ("meet", {"who": "b"}))))
    assert note.content == "meet: a met\nmeet: b met"


def test_each_call_at_once_sees_the_contextvars_of_the_thread_that_made_it():
    # how deep agents ask agents (microagent.team) is such a variable
    asker = contextvars.ContextVar("who asked", default="nobody")

    @as_tool
    def who() -> str:
        """Say who asked."""
        return asker.get()

    asker.set("the manager")
    note = at_once([who]).run(to_json_args(calls(("who", {}), ("who", {}))))
    assert note.content == "who: the manager\nwho: the manager"


def test_at_once_keeps_each_calls_decision_and_result_in_its_notes():
    note = at_once([look_up_order, stock]).run(to_json_args(calls(
        ("look_up_order", {"order_id": "A1234"}), ("stock", {"item": "headphones"}))))
    assert note == Message(
        TOOL, "look_up_order: A1234: Wireless Headphones, $79\n"
              "stock: headphones: 3 in stock", "at_once",
        notes=(Message(ASSISTANT, "", "at_once", "look_up_order", '{"order_id": "A1234"}'),
               Message(TOOL, "A1234: Wireless Headphones, $79", "look_up_order"),
               Message(ASSISTANT, "", "at_once", "stock", '{"item": "headphones"}'),
               Message(TOOL, "headphones: 3 in stock", "stock")))


def test_a_failing_call_among_them_is_an_error_line_and_the_others_stand():
    note = at_once([look_up_order, stock]).run(to_json_args(calls(
        ("stock", {"item": "headphones"}), ("look_up_order", {"order": "A1234"}))))
    assert note.content.split("\n") == [
        "stock: headphones: 3 in stock",
        "look_up_order: error: bad arguments for look_up_order: missing order_id "
        "(it takes: order_id)"]
    assert note.error and [m.error for m in note.notes] == [False, False, False, True]


def test_at_once_refuses_a_call_to_a_tool_it_was_not_given():
    note = at_once([stock]).run(to_json_args(calls(("refund", {"order_id": "A1"}))))
    assert note == Message(TOOL, "error: bad arguments for at_once: tool must be one of "
                                 "['stock'], not 'refund'", "at_once", error=True)


def test_at_once_with_no_calls_says_so():
    note = at_once([stock]).run('{"calls": []}')
    assert note == Message(TOOL, "error: at_once failed: ValueError: no calls were given: "
                                 "give at least one", "at_once", error=True)


def test_at_once_refuses_the_final_answer_and_a_bad_thread_count():
    with pytest.raises(TypeError, match="none of them terminal"):
        at_once([stock, final_answer])
    with pytest.raises(TypeError, match="a list of Tools"):
        at_once([])
    with pytest.raises(ValueError, match="threads is how many calls run at once"):
        at_once([stock], threads=0)


def test_a_run_with_at_once_keeps_the_rules_saves_and_replays_to_the_same_notebook():
    both = calls(("look_up_order", {"order_id": "A1234"}), ("stock", {"item": "headphones"}))
    tools = [look_up_order, stock, at_once([look_up_order, stock]), final_answer]
    agent = Agent(scripted(Action("at_once", both, "both at once"),
                           Action("final_answer", {"answer": "in stock"})), tools)
    ctx = run_checked(agent, "Where is A1234, and is it in stock?")
    # question, decision (at_once), result (two calls inside), decision, result
    assert [m.kind for m in ctx] == ["question", "decision", "result", "decision", "result"]
    assert from_json(to_json(ctx)) == ctx
    assert Agent(replay(ctx), tools).run("Where is A1234, and is it in stock?") == ctx


# --- a call that needs a human's approval, among others ---------------------------------

def refund_office(ran: list, *script: Action):
    @as_tool
    def look(order_id: str) -> str:
        """Look up an order."""
        ran.append(f"look {order_id}")
        return f"{order_id}: $79"

    @as_tool(needs_approval=True)
    def refund(order_id: str, amount: float) -> str:
        """Refund an order, once a human says yes."""
        ran.append(f"refund {order_id}")
        return f"refunded ${amount:g} for {order_id}"
    tools = [look, refund, at_once([look, refund]), final_answer]
    return Agent(left_first(scripted(*script)), tools, name="clerk"), refund


MIXED = calls(("look", {"order_id": "A1"}), ("refund", {"order_id": "A1", "amount": 79}),
              ("look", {"order_id": "B2"}))


def test_a_call_that_needs_approval_is_left_then_waits_for_its_human_and_each_runs_once():
    ran = []
    agent, refund = refund_office(
        ran, Action("at_once", MIXED, "all three"),
        Action("refund", {"order_id": "A1", "amount": 79}),  # the move left_first makes
        Action("final_answer", {"answer": "refunded"}))
    ctx = run_checked(agent, "Refund A1, and look up B2")
    assert agent.why_stop(ctx) == PAUSED and sorted(ran) == ["look A1", "look B2"]
    batch = ctx[2]
    assert batch.content.split("\n") == ["look: A1: $79", f"refund: {LEFT}", "look: B2: $79"]
    assert [m.kind for m in batch.notes] == ["decision", "result", "decision",
                                             "decision", "result"]
    # the run waits on the refund the batch left: saved, loaded, approved, resumed
    assert ctx.last() == Message(ASSISTANT, "at_once left this call for a human", "clerk",
                                 "refund", '{"order_id": "A1", "amount": 79}')
    paused = ctx
    ctx = approve(from_json(to_json(ctx)), refund, by="alice")
    ctx = run_checked(agent, ctx)
    assert agent.why_stop(ctx) == DONE
    assert sorted(ran) == ["look A1", "look B2", "refund A1"]  # each once
    # the saved run replays its moves, the at_once and the refund it left, to the pause
    assert Agent(replay(ctx), list(agent.tools.values()), name="clerk").run(
        "Refund A1, and look up B2") == paused


def test_a_denied_call_left_by_at_once_does_not_run_and_the_run_goes_on():
    ran = []
    agent, refund = refund_office(
        ran, Action("at_once", MIXED), Action("refund", {"order_id": "A1", "amount": 79}),
        Action("final_answer", {"answer": "not refunded"}))
    ctx = deny(run_checked(agent, "Refund A1"), refund, "send it back first", by="bob")
    ctx = run_checked(agent, ctx)
    assert agent.why_stop(ctx) == DONE and "refund A1" not in ran
    assert ctx[-3] == Message(TOOL, "denied by bob: send it back first", "refund",
                              error=True)


def test_two_calls_left_for_a_human_wait_one_after_the_other():
    ran = []
    two = calls(("refund", {"order_id": "A1", "amount": 79}),
                ("refund", {"order_id": "B2", "amount": 5}))
    agent, refund = refund_office(ran, Action("at_once", two),
                                  Action("refund", {"order_id": "A1", "amount": 79}),
                                  Action("refund", {"order_id": "B2", "amount": 5}),
                                  Action("final_answer", {"answer": "both"}))
    ctx = run_checked(agent, "Refund A1 and B2")
    # the first is made (the run waits on it); the second is still left
    assert left_calls(ctx) == [Action("refund", '{"order_id": "B2", "amount": 5}',
                                      "at_once left this call for a human")]
    ctx = run_checked(agent, approve(ctx, refund))
    assert agent.why_stop(ctx) == PAUSED and ctx.last().args == '{"order_id": "B2", ' \
                                                               '"amount": 5}'
    ctx = run_checked(agent, approve(ctx, refund))
    assert agent.why_stop(ctx) == DONE and ran == ["refund A1", "refund B2"]
    assert left_calls(ctx) == []


def test_left_first_asks_its_policy_when_nothing_is_left():
    ctx = Context((Message(USER, "hi"),))
    assert left_first(scripted(Action("stock", {"item": "x"})))(ctx, {}) == Action(
        "stock", {"item": "x"})
    with pytest.raises(TypeError, match="left_first takes a policy"):
        left_first("a brain")


# --- a cancel ----------------------------------------------------------------------------

def test_a_cancel_stops_the_calls_that_have_not_started():
    cancel, started, go_on, ran = (threading.Event(), threading.Event(),
                                   threading.Event(), [])

    @as_tool
    def slow(n: int) -> str:
        """A call that takes a while."""
        ran.append(n)
        started.set()
        assert go_on.wait(WAIT)
        return f"call {n} done"

    batch = at_once([slow], threads=1, cancel=cancel)  # one thread: one call at a time
    args = to_json_args(calls(("slow", {"n": 1}), ("slow", {"n": 2}), ("slow", {"n": 3})))
    out = []
    worker = threading.Thread(target=lambda: out.append(batch.run(args)))
    worker.start()
    assert started.wait(WAIT)
    cancel.set()
    go_on.set()
    worker.join(WAIT)
    assert ran == [1] and out[0].content.split("\n") == [
        "slow: call 1 done", "slow: error: cancelled: it did not start",
        "slow: error: cancelled: it did not start"]


# --- a model's reply with several calls -------------------------------------------------

def reply(*made: tuple[str, str]) -> dict:
    return {"role": "assistant", "content": None,
            "tool_calls": [{"id": f"call_{i}", "type": "function",
                            "function": {"name": name, "arguments": args}}
                           for i, (name, args) in enumerate(made)]}


def test_a_reply_with_several_calls_is_one_call_to_at_once():
    tools = {t.name: t for t in (stock, at_once([stock]), final_answer)}
    action = at_once_action(reply(("stock", '{"item": "a"}'), ("stock", '{"item": "b"}')),
                            tools)
    assert action == Action("at_once", calls(("stock", {"item": "a"}),
                                             ("stock", {"item": "b"})))
    assert tools["at_once"].run(action.args).content == "stock: a: 3 in stock\n" \
                                                        "stock: b: 3 in stock"


def test_a_reply_with_one_call_or_no_at_once_tool_is_read_as_chat_reads_it():
    one = reply(("stock", '{"item": "a"}'))
    two = reply(("stock", '{"item": "a"}'), ("stock", '{"item": "b"}'))
    tools = {"stock": stock, "at_once": at_once([stock])}
    assert at_once_action(one, tools) == Action("stock", '{"item": "a"}')
    assert at_once_action(two, {"stock": stock}) == Action("stock", '{"item": "a"}')


def test_broken_arguments_in_one_call_of_a_reply_are_that_calls_error_and_the_others_run():
    tools = {"stock": stock, "at_once": at_once([stock])}
    action = at_once_action(reply(("stock", '{"item": "a"}'), ("stock", '{"item": '),
                                  ("stock", '{"item": "c", "item": "d"}')), tools)
    note = tools["at_once"].run(action.args)
    assert note.name == "at_once" and note.error
    assert note.content.split("\n") == [
        "stock: a: 3 in stock",
        "stock: error: bad arguments for stock: the text is not valid JSON "
        "(Expecting value: line 1 column 10 (char 9))",
        'stock: error: bad arguments for stock: "item" is given twice: say each once']


def test_a_reply_of_several_calls_one_of_them_unreadable_is_no_move_saying_why():
    tools = {"stock": stock, "at_once": at_once([stock])}
    broken = reply(("stock", '{"item": "a"}'), ("stock", '{"item": "b"}'))
    broken["tool_calls"][1] = None  # a server's reader let a null through
    action = at_once_action(broken, tools)
    assert action == Action(None, reasoning="your tool call could not be read (it was "
                                            "null): call one of stock, at_once by its name")
    assert at_once_action("not a message", tools).tool is None


# --- the order of the results -----------------------------------------------------------

@settings(max_examples=15, deadline=None)
@given(st.permutations(range(4)))
def test_results_come_back_in_the_calls_order_whatever_order_they_finish_in(order):
    # call i may finish only once the calls before it in `order` have: so they finish
    # in `order`, which they can only do if all four run at once
    finished, turn = [], threading.Condition()

    @as_tool
    def step(i: int) -> str:
        """Finish in turn."""
        with turn:
            assert turn.wait_for(lambda: len(finished) == order.index(i), WAIT)
            finished.append(i)
            turn.notify_all()
        return f"step {i}"

    note = at_once([step], threads=4).run(to_json_args(calls(*[("step", {"i": i})
                                                                for i in range(4)])))
    assert finished == list(order)
    assert note.content.split("\n") == [f"step: step {i}" for i in range(4)]
    assert [m.args for m in note.notes if m.kind == "decision"] == [
        f'{{"i": {i}}}' for i in range(4)]
