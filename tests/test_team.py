"""Agents as coworkers: an agent used as another agent's tool, its whole run kept in the result note."""

import threading

import pytest

from microagent.agent import DONE, Agent
from microagent.context import Context
from microagent.message import ASSISTANT, TOOL, USER, Message
from microagent.policy import Action
from microagent.schema import as_tool
from microagent.script import scripted
from microagent.team import agent_tool
from microagent.tool import Tool, final_answer
from microagent.trace import story
from hard_parts import run_checked



@as_tool
def look_up_order(order_id: str) -> str:
    """Look up an order."""
    return {"A1234": "Wireless Headphones, $79"}[order_id]


@as_tool(needs_approval=True)
def refund(order_id: str) -> str:
    """Refund an order, once a human says yes."""
    return f"refunded {order_id}"


def clerk(*script: Action, max_steps: int = 10) -> Agent:
    return Agent(scripted(*script), [look_up_order, refund, final_answer], max_steps,
                 name="clerk")


def manager(*asks: str, helper: Agent) -> Agent:
    script = [Action("clerk", {"request": a}, f"ask the clerk about {a}") for a in asks]
    return Agent(scripted(*script, Action("final_answer", {"answer": "done"}, "that's all")),
                 [agent_tool(helper, description="Looks up orders."), final_answer], name="boss")


def test_the_specialists_whole_run_is_nested_in_the_managers_result_note():
    helper = clerk(Action("look_up_order", {"order_id": "A1234"}, "look it up"),
                   Action("final_answer", {"answer": "headphones, $79"}, "report"))
    ctx = run_checked(manager("A1234", helper=helper), "what is A1234?")
    # question, boss asks the clerk, the clerk's answer (its notebook inside), boss answers
    assert [m.kind for m in ctx] == ["question", "decision", "result", "decision", "result"]
    heard = ctx[2]
    assert heard == Message(TOOL, "headphones, $79", "clerk", notes=helper.run("A1234").messages)
    assert story(ctx) == "\n".join([
        'you asked: "what is A1234?"',
        "  boss thought: ask the clerk about A1234",
        '      you asked: "A1234"',
        "        clerk thought: look it up",
        "          -> look_up_order returned: Wireless Headphones, $79",
        "        clerk thought: report",
        "          -> final_answer returned: headphones, $79",
        "    -> clerk returned: headphones, $79",
        "  boss thought: that's all",
        "    -> final_answer returned: done"])


def test_an_error_inside_a_specialist_stays_a_note_in_its_notebook():
    helper = clerk(Action("look_up_order", {"order_id": "Z9"}, "look it up"),
                   Action("final_answer", {"answer": "no such order"}, "it failed, say so"))
    ctx = run_checked(manager("Z9", helper=helper), "what is Z9?")
    inner = ctx[2].notes
    assert inner[2] == Message(TOOL, "error: look_up_order failed: KeyError: 'Z9'", "look_up_order",
                               error=True)
    assert ctx[2].content == "no such order" and not ctx[2].error  # the clerk did answer
    assert ctx.last().content == "done"  # the manager carried on


def test_a_specialist_whose_brain_crashes_is_an_error_note_that_keeps_its_run_so_far():
    helper = clerk(Action("look_up_order", {"order_id": "A1234"}, "look it up"))  # then no move left
    ctx = run_checked(manager("A1234", helper=helper), "what is A1234?")
    assert ctx[2] == Message(
        TOOL, "error: clerk failed: IndexError: the script is over: the run asked for move 2, "
              "and the script holds 1", "clerk", error=True,
        notes=(Message(USER, "A1234"),
               Message(ASSISTANT, "look it up", "clerk", "look_up_order", '{"order_id": "A1234"}'),
               Message(TOOL, "Wireless Headphones, $79", "look_up_order")))
    assert ctx.last().content == "done"


def test_a_specialist_out_of_steps_is_an_error_note_that_says_so_and_keeps_its_notes():
    helper = clerk(*[Action("look_up_order", {"order_id": "A1234"})] * 3, max_steps=2)
    ctx = run_checked(manager("A1234", helper=helper), "what is A1234?")
    assert ctx[2].error and ctx[2].content == "error: clerk gave no answer: it ran out of steps"
    assert [m.kind for m in ctx[2].notes] == ["question"] + ["decision", "result"] * 2 + ["remark"]
    assert ctx[2].notes[-1] == Message(ASSISTANT, "out of steps: stopped after 2 turns without "
                                                  "an answer", "clerk")


def test_a_specialist_that_pauses_for_a_human_is_an_error_note_and_its_run_ends_there():
    helper = clerk(Action("refund", {"order_id": "A1234"}, "refund it"))
    ctx = run_checked(manager("A1234", helper=helper), "refund A1234")
    assert ctx[2].content == ("error: clerk gave no answer: it paused for a human's verdict on "
                              "refund, and a run inside a tool cannot wait")
    assert ctx[2].notes[-1].kind == "decision"  # the call it waited on, kept for the record


def test_each_call_is_a_fresh_run_of_the_specialist():
    helper = clerk(Action("final_answer", {"answer": "hello"}, "greet"))
    ctx = run_checked(manager("first", "second", helper=helper), "ask twice")
    first, second = ctx[2].notes, ctx[4].notes
    assert [m.content for m in first if m.kind == "question"] == ["first"]
    assert [m.content for m in second if m.kind == "question"] == ["second"]  # no memory of the first


def test_a_specialist_is_offered_to_the_manager_like_any_tool():
    tool = agent_tool(clerk())
    assert (tool.name, tool.description) == ("clerk", "Ask clerk, an agent, to do something for you.")
    assert tool.schema == {"type": "object", "properties": {"request": {"type": "string"}},
                           "required": ["request"]}
    renamed = agent_tool(clerk(), name="orders_desk", description="Ask about an order.")
    assert (renamed.name, renamed.description) == ("orders_desk", "Ask about an order.")
    assert tool.run('{"request": 5}') == Message(
        TOOL, "error: bad arguments for clerk: request must be string, not int 5", "clerk", error=True)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_max_depth_is_a_whole_number_from_one_up(bad):
    with pytest.raises(ValueError, match="max_depth is how deep agents may ask agents: a whole number"):
        agent_tool(clerk(), max_depth=bad)


# --- the bound on delegation holds across threads (issue 16) ---------------------------------

def in_a_thread(tool: Tool, seconds: float = 30.0) -> Tool:
    """`tool`, run in a thread of its own and given up on after `seconds`: a timeout wrapper."""
    def timed(**args):
        out = []
        worker = threading.Thread(target=lambda: out.append(tool(**args)), daemon=True)
        worker.start()
        worker.join(seconds)
        if not out:
            raise TimeoutError(f"{tool.name} took longer than {seconds} s")
        return out[0]
    return Tool(tool.name, tool.description, timed, schema=tool.schema)


def test_an_agent_that_asks_itself_through_a_thread_stops_at_max_depth():
    calls = []

    def delegate_again(ctx, tools):
        calls.append(len(ctx))
        if ctx.last().kind == "result" or len(calls) > 100:  # the bound failed: stop anyway
            return Action("final_answer", {"answer": ctx.last().content})
        return Action("me", {"request": "and again"})

    def ask_me(request: str) -> Message:  # the agent is its own coworker, made below
        return myself(request=request)
    me = Agent(delegate_again, [in_a_thread(Tool("me", "Ask me.", ask_me)), final_answer],
               max_steps=2, name="me")
    myself = agent_tool(me, max_depth=2)
    ctx = me.run("go")
    assert me.why_stop(ctx) == DONE
    # the outer run, then two levels of inner runs: two brain calls each, 6 in all
    # (before the fix each new thread started at depth 0: 201 calls, stopped by the cap above)
    assert len(calls) == 6
    deepest = Context(Context(ctx[2].notes)[2].notes)
    assert deepest[2] == Message(TOOL, "error: me was not asked: 2 runs of it are under way already, "
                                       "in any thread, and max_depth is 2", "me", error=True)


def test_runs_side_by_side_in_threads_count_toward_max_depth_too():
    # the price of a bound that holds across threads: two runs at once use it up
    inside, release = threading.Semaphore(0), threading.Event()

    def waits(ctx, tools):
        inside.release()
        assert release.wait(30), "the test never released the inner runs"
        return Action("final_answer", {"answer": "ok"})
    tool = agent_tool(Agent(waits, [final_answer], name="slow"), max_depth=2)
    heard = []
    runners = [threading.Thread(target=lambda: heard.append(tool.run('{"request": "hi"}')))
               for _ in range(2)]
    for runner in runners:
        runner.start()
    assert inside.acquire(timeout=30) and inside.acquire(timeout=30)  # both are under way
    assert tool.run('{"request": "a third"}') == Message(
        TOOL, "error: slow was not asked: 2 runs of it are under way already, in any thread, "
              "and max_depth is 2", "slow", error=True)
    release.set()
    for runner in runners:
        runner.join(30)
    assert [m.content for m in heard] == ["ok", "ok"]
    assert tool.run('{"request": "now"}').content == "ok"  # the runs are over: the count is back to 0


def test_a_crash_inside_gives_back_its_place_in_the_count():
    tool = agent_tool(Agent(scripted(), [final_answer], name="broken"), max_depth=1)
    notes = [tool.run('{"request": "try"}') for _ in range(3)]
    assert [m.content for m in notes] == ["error: broken failed: IndexError: the script is over: "
                                          "the run asked for move 1, and the script holds 0"] * 3


def test_out_of_steps_inside_is_a_remark_the_outer_story_shows_under_the_call():
    helper = clerk(Action("look_up_order", {"order_id": "A1234"}, "look"), max_steps=1)
    ctx = run_checked(manager("A1234", helper=helper), "what is A1234?")
    assert story(ctx).splitlines()[2:7] == [
        '      you asked: "A1234"',
        "        clerk thought: look",
        "          -> look_up_order returned: Wireless Headphones, $79",
        "        clerk: out of steps: stopped after 1 turn without an answer",
        "    -> clerk returned: error: clerk gave no answer: it ran out of steps"]


def test_a_chain_of_different_agents_is_refused_at_max_depth_and_the_refusal_says_how_deep():
    # front asks orders, orders asks stock, stock asks supplier, supplier asks factory; each its own
    # agent_tool, so no tool's count of runs under way stops the chain: only the depth does
    names, thought = ["front", "orders", "stock", "supplier", "factory"], []

    def brain(name: str, below: str | None):
        def decide(ctx, tools):
            thought.append(name)
            if below is None:
                return Action("final_answer", {"answer": "made"})
            if ctx.last().kind == "result":  # pass on what it heard
                return Action("final_answer", {"answer": f"{name} heard: {ctx.last().content}"})
            return Action(below, {"request": f"{name} asks {below}"})
        return decide

    agent = None
    for name, below in reversed(list(zip(names, names[1:] + [None], strict=True))):
        tools = [final_answer] if agent is None else [agent_tool(agent, max_depth=2), final_answer]
        agent = Agent(brain(name, below), tools, name=name)
    ctx = run_checked(agent, "make it")
    # front at depth 0 asks orders (1), orders asks stock (2), and stock may not ask supplier (3 > 2)
    refused = "error: supplier was not asked: agents are already asking agents 2 deep, and max_depth is 2"
    assert ctx.last().content == f"front heard: orders heard: stock heard: {refused}"
    assert thought == ["front", "orders", "stock", "stock", "orders", "front"]  # supplier, factory: never
    stock = Context(Context(ctx[2].notes)[2].notes)
    assert stock[2] == Message(TOOL, refused, "supplier", error=True)
