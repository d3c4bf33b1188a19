"""Agents as coworkers: an agent used as another agent's tool, its whole run kept in the result note."""

from hard_parts import run_checked
from microagent import (agent_tool, ASSISTANT, DONE, TOOL, USER, Action, Agent, Message, as_tool, final_answer, scripted,
                        story)


@as_tool
def look_up_order(order_id: str) -> str:
    """Look up an order."""
    return {"A1234": "Wireless Headphones, $79"}[order_id]


def clerk(script) -> Agent:
    return Agent(scripted(*script), [look_up_order, final_answer], name="clerk", description="Looks up orders.")


def manager(*asks: str, helper: Agent) -> Agent:
    script = [Action("clerk", {"request": a}, f"ask the clerk about {a}") for a in asks]
    return Agent(scripted(*script, Action("final_answer", {"answer": "done"}, "that's all")),
                 [agent_tool(helper), final_answer], name="boss")


def test_the_specialists_whole_run_is_nested_in_the_managers_result_note():
    helper = clerk([Action("look_up_order", {"order_id": "A1234"}, "look it up"),
                    Action("final_answer", {"answer": "headphones, $79"}, "report")])
    ctx = run_checked(manager("A1234", helper=helper), "what is A1234?")
    # user, boss asks the clerk, the clerk's answer (with its notebook inside), boss answers
    assert [m.role for m in ctx] == [USER, ASSISTANT, TOOL, ASSISTANT, TOOL]
    heard = ctx[2]
    assert heard.name == "clerk" and heard.content == "headphones, $79"
    assert heard.notes == helper.run("A1234").context.messages  # exactly the run the clerk would make on its own
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
    helper = clerk([Action("look_up_order", {"order_id": "Z9"}, "look it up"),
                    Action("final_answer", {"answer": "no such order"}, "it failed, say so")])
    ctx = run_checked(manager("Z9", helper=helper), "what is Z9?")
    inner = ctx[2].notes
    assert inner[2] == Message(TOOL, "error: look_up_order failed: KeyError: 'Z9'", name="look_up_order", error=True)
    assert ctx[2].content == "no such order"
    assert ctx.last().content == "done"  # the manager carried on


def test_a_specialist_that_crashes_comes_back_as_an_error_note():
    helper = clerk([])  # its script is empty: its brain raises on the first turn
    ctx = run_checked(manager("A1234", helper=helper), "what is A1234?")
    assert ctx[2].role == TOOL and ctx[2].name == "clerk"
    assert ctx[2].content == ("error: clerk failed: IndexError: "
                              "the script is over: the run asked for decision 1, and the script holds 0")
    assert ctx.last().content == "done"


def test_a_specialist_out_of_steps_says_so_and_keeps_its_notes():
    helper = Agent(scripted(*[Action("look_up_order", {"order_id": "A1234"})] * 3), [look_up_order, final_answer],
                   name="clerk", max_steps=2)
    ctx = run_checked(manager("A1234", helper=helper), "what is A1234?")
    assert ctx[2].content == "(no answer: out of steps)"
    assert ctx[2].notes[-1] == Message(ASSISTANT, "out of steps: stopped after 2 turns without an answer",
                                       name="clerk")


def test_each_call_is_a_fresh_run_of_the_specialist():
    helper = clerk([Action("final_answer", {"answer": "hello"}, "greet")])
    ctx = run_checked(manager("first", "second", helper=helper), "ask twice")
    first, second = ctx[2].notes, ctx[4].notes
    assert [m.content for m in first if m.role == USER] == ["first"]
    assert [m.content for m in second if m.role == USER] == ["second"]  # it does not remember the first


def test_a_specialist_is_offered_to_the_manager_like_any_tool():
    tool = agent_tool(clerk([]))
    assert (tool.name, tool.description) == ("clerk", "Looks up orders.")
    assert tool.schema == {"type": "object", "properties": {"request": {"type": "string"}}, "required": ["request"]}
    renamed = agent_tool(clerk([]), name="orders_desk", description="Ask about an order.")
    assert (renamed.name, renamed.description) == ("orders_desk", "Ask about an order.")
    steps = list(Agent(scripted(Action("final_answer", {"answer": "ok"})), [tool, final_answer]).steps("hi"))
    assert steps[-1].stop == DONE
