"""Prompt techniques (microagent.prompts): what each brain sends, against a stand-in model server on 127.0.0.1.

The stand-in answers from a script whatever it is sent, so the office runs the same with every technique, and what
these tests read is the request: the prompt each technique makes.
"""

import json
import re

import pytest
from hypothesis import given, settings, strategies as st

from microagent.agent import Agent
from microagent.chat import json_rules, move_schema, to_request
from microagent.context import Context
from microagent.demo import QUESTION, support_agent
from microagent.memory import remembering
from microagent.message import ASSISTANT, SYSTEM, TOOL, USER, Message
from microagent.policy import Action
from microagent.prompts import REACT, REACT_JSON, few_shot, react, with_examples, zero_shot
from microagent.schema import as_tool
from microagent.script import scripted
from microagent.tool import final_answer
from microagent.transport.stand_in import reply, serve

SYSTEM_PROMPT = "You are a calculator. Add with the add tool; answer with the sum alone."


@as_tool
def add(a: int, b: int) -> int:
    """Add two whole numbers.

    Args:
        a: The first number.
        b: The second.
    """
    return a + b


ADD_SPEC = {"type": "function", "function": {
    "name": "add", "description": "Add two whole numbers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer", "description": "The first number."},
                                                    "b": {"type": "integer", "description": "The second."}},
                   "required": ["a", "b"]}}}
TOOLS = {"add": add, "final_answer": final_answer}


def calculator(policy) -> Agent:
    return Agent(policy, [add, final_answer], name="calc")


# a worked run: the notebook of an earlier question, made by a scripted brain
EXAMPLE = calculator(scripted(Action("add", {"a": 1, "b": 1}, "one and one, by the tool"),
                              Action("final_answer", {"answer": "2"}))).run("What is 1 + 1?")
EXAMPLE_ON_THE_WIRE = [
    {"role": "user", "content": "What is 1 + 1?"},
    {"role": "assistant", "content": "one and one, by the tool",
     "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 1}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "2"},
    {"role": "assistant", "content": "2"},  # an answer goes back as the words it answered with
]


# --- zero-shot: the instructions and the tools ----------------------------------------------------

def test_zero_shot_sends_the_system_prompt_then_the_tools_descriptions_then_the_question(stand_in):
    server = stand_in(reply("5"))
    ctx = calculator(zero_shot("stand-in", server.url, system=SYSTEM_PROMPT, stream=False)).run("What is 2 + 3?")
    # the whole prompt: the instructions, each tool's description and schema, and the notebook (final_answer is
    # not shown: a reply in words is the answer)
    assert server.requests == [{"model": "stand-in", "tools": [ADD_SPEC], "messages": [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "What is 2 + 3?"}]}]
    assert ctx.last() == Message(TOOL, "5", "final_answer")


def test_a_tools_docstring_is_part_of_the_prompt_the_model_reads(stand_in):
    @as_tool
    def add(a: int, b: int) -> int:
        """Add two whole numbers; never add in your head."""
        return a + b

    server = stand_in(reply("5"))
    Agent(zero_shot("stand-in", server.url, system=SYSTEM_PROMPT), [add, final_answer]).run("2 + 3?")
    assert server.requests[0]["tools"][0]["function"]["description"] == "Add two whole numbers; never add in your head."


# --- few-shot: worked runs before the question ----------------------------------------------------

def test_few_shot_sends_a_worked_run_as_turns_before_the_question_its_calls_numbered_first(stand_in):
    server = stand_in(reply("", calls=[("add", '{"a": 2, "b": 3}')]), reply("5"))
    brain = few_shot(zero_shot("stand-in", server.url, system=SYSTEM_PROMPT, stream=False), EXAMPLE)
    calculator(brain).run("What is 2 + 3?")
    # system, the example's four messages, then the notebook; the run's own first call is call_2
    assert server.requests[1] == {"model": "stand-in", "tools": [ADD_SPEC], "messages": [
        {"role": "system", "content": SYSTEM_PROMPT},
        *EXAMPLE_ON_THE_WIRE,
        {"role": "user", "content": "What is 2 + 3?"},
        {"role": "assistant", "content": "",
         "tool_calls": [{"id": "call_2", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
        {"role": "tool", "tool_call_id": "call_2", "content": "5"}]}


def test_few_shot_keeps_the_runs_own_system_note_first_then_the_examples(stand_in):
    server = stand_in(reply("5"))
    told = Context((Message(SYSTEM, "Be brief."), Message(USER, "What is 2 + 3?")))
    calculator(few_shot(zero_shot("stand-in", server.url, system=SYSTEM_PROMPT), EXAMPLE)).run(told)
    # one system message, first: the brain's prompt, then the run's note
    assert server.requests[0]["messages"] == [{"role": "system", "content": SYSTEM_PROMPT + "\n\nBe brief."},
                                              *EXAMPLE_ON_THE_WIRE, {"role": "user", "content": "What is 2 + 3?"}]


def test_few_shot_examples_never_reach_the_notebook_the_refund_office_keeps(stand_in):
    def replies():
        return [reply("", calls=[("look_up_order", '{"order_id": "A1234"}')]),
                reply("", calls=[("check_policy", '{"order_id": "A1234"}')]),
                reply("", calls=[("issue_refund", '{"order_id": "A1234", "amount": 79}')]),
                reply("Refunded: $79, to your card.")]

    def yes(tool_name, args):
        return True

    kettle = support_agent(orders={"B5678": ("Electric Kettle", 35, "delivered")}, approver=yes)
    example = kettle.run("Can I return order B5678? I changed my mind.")  # the rules brain's run: a polite no
    plain, shown = stand_in(*replies()), stand_in(*replies())
    without = support_agent(zero_shot("stand-in", plain.url, system=SYSTEM_PROMPT), approver=yes).run(QUESTION)
    with_one = support_agent(few_shot(zero_shot("stand-in", shown.url, system=SYSTEM_PROMPT), example),
                             approver=yes).run(QUESTION)
    assert with_one == without
    assert [m.kind for m in with_one] == ["question"] + ["decision", "result"] * 4
    assert all("B5678" not in m.content for m in with_one)
    # ... while each request showed the example's 6 messages: its question, 2 calls, 2 results, the answer
    assert [len(r["messages"]) - len(p["messages"]) for r, p in zip(shown.requests, plain.requests, strict=True)] == [6] * 4


def test_under_memory_the_examples_stay_whole_when_few_shot_is_inside(stand_in):
    script = [reply("", calls=[("add", '{"a": 2, "b": 3}')]), reply("", calls=[("add", '{"a": 5, "b": 4}')]), reply("9")]
    inside, outside = stand_in(*script), stand_in(*script)
    calculator(remembering(few_shot(zero_shot("stand-in", inside.url, system=SYSTEM_PROMPT), EXAMPLE), keep=2)).run("2 + 3 + 4?")
    calculator(few_shot(remembering(zero_shot("stand-in", outside.url, system=SYSTEM_PROMPT), keep=2), EXAMPLE)).run("2 + 3 + 4?")
    # the third request: inside, the examples whole, then the run's notebook compacted; outside, the example is summed up
    assert inside.requests[2]["messages"][1:5] == EXAMPLE_ON_THE_WIRE
    assert inside.requests[2]["messages"][6]["content"].startswith("earlier, in 2 notes: 1 call (add 1)")
    assert outside.requests[2]["messages"][1:4] == [
        {"role": "user", "content": "What is 1 + 1?"},
        {"role": "assistant", "content": 'earlier, in 4 notes: 2 calls (add 1, final_answer 1), no errors; the last '
                                         'result: final_answer returned "2"'},
        {"role": "user", "content": "2 + 3 + 4?"}]


# --- ReAct: a thought before each call ------------------------------------------------------------

def test_react_asks_for_a_thought_and_the_thought_is_the_decisions_reasoning_read_again_next_turn(stand_in):
    server = stand_in(reply("I can't add in my head, so the tool adds.", calls=[("add", '{"a": 2, "b": 3}')]),
                      reply("5"))
    ctx = calculator(react("stand-in", server.url, system=SYSTEM_PROMPT)).run("What is 2 + 3?")
    assert server.requests[0]["messages"][0] == {"role": "system", "content": SYSTEM_PROMPT + "\n\n" + REACT}
    # Thought -> the decision's content; Action -> its call; Observation -> the result
    assert ctx[1] == Message(ASSISTANT, "I can't add in my head, so the tool adds.", "calc", "add", '{"a": 2, "b": 3}')
    assert ctx[2] == Message(TOOL, "5", "add")
    assert server.requests[1]["messages"][2]["content"] == "I can't add in my head, so the tool adds."


def test_react_in_json_mode_asks_for_the_reasoning_first_and_reads_it_from_the_move(stand_in):
    move = '{"reasoning": "the tool adds", "tool": "add", "args": {"a": 2, "b": 3}}'
    server = stand_in(reply(move), reply('{"reasoning": "it said 5", "tool": "final_answer", "args": {"answer": "5"}}'))
    ctx = calculator(react("stand-in", server.url, system=SYSTEM_PROMPT, native=False)).run("What is 2 + 3?")
    assert "tools" not in server.requests[0]
    assert server.requests[0]["messages"][0] == {
        "role": "system", "content": f"{SYSTEM_PROMPT}\n\n{REACT} {REACT_JSON}\n\n{json_rules(TOOLS)}"}
    assert ctx[1] == Message(ASSISTANT, "the tool adds", "calc", "add", '{"a": 2, "b": 3}')
    # the move goes back as JSON text (chat.py writes its own key order), the result as a user's words
    assert server.requests[1]["messages"][2:] == [
        {"role": "assistant", "content": '{"tool":"add","args":{"a":2,"b":3},"reasoning":"the tool adds"}'},
        {"role": "user", "content": "add returned: 5"}]


def test_react_refuses_a_grammar_that_makes_the_model_pick_its_tool_before_it_thinks():
    assert list(move_schema(TOOLS)["anyOf"][0]["properties"]) == ["tool", "args", "reasoning"]
    for form in ("json_schema", "json_object"):
        with pytest.raises(ValueError, match="choose before it thinks: leave response_format out, or use native"):
            react("stand-in", system=SYSTEM_PROMPT, native=False, response_format=form)


# --- JSON mode: what it changes -------------------------------------------------------------------

def test_json_mode_sends_no_tools_but_their_rules_in_the_prompt_and_the_moves_schema_as_a_grammar(stand_in):
    server = stand_in(reply('{"tool": "final_answer", "args": {"answer": "5"}, "reasoning": "easy"}'))
    native = to_request(Context((Message(USER, "What is 2 + 3?"),)), TOOLS, "stand-in", system=SYSTEM_PROMPT)
    brain = zero_shot("stand-in", server.url, system=SYSTEM_PROMPT, native=False, response_format="json_schema",
                      stream=False)
    ctx = calculator(brain).run("What is 2 + 3?")
    assert native["tools"] == [ADD_SPEC]
    assert server.requests == [{
        "model": "stand-in",
        "response_format": {"type": "json_schema", "json_schema": {"name": "move", "schema": move_schema(TOOLS)}},
        "messages": [{"role": "system", "content": SYSTEM_PROMPT + "\n\n" + json_rules(TOOLS)},
                     {"role": "user", "content": "What is 2 + 3?"}]}]
    assert ctx[1] == Message(ASSISTANT, "easy", "calc", "final_answer", '{"answer": "5"}')


# --- bad input --------------------------------------------------------------------------------------

@pytest.mark.parametrize("system", ["", "   \n", None, 7])
def test_a_brain_with_no_instructions_is_refused_with_what_to_write(system):
    for technique in (zero_shot, react):
        with pytest.raises(ValueError) as e:
            technique("stand-in", system=system)
        assert str(e.value) == ("system is the model's instructions: a prompt that says what the assistant is for "
                                f"and how it works, not {system!r}")


def test_an_example_that_calls_a_tool_the_agent_lacks_is_refused_before_anything_is_sent(stand_in):
    server = stand_in(reply("5"))
    subtract = Context((Message(USER, "3 - 1?"), Message(ASSISTANT, "", "calc", "subtract", '{"a": 3, "b": 1}'),
                        Message(TOOL, "2", "subtract")))
    brain = few_shot(zero_shot("stand-in", server.url, system=SYSTEM_PROMPT), EXAMPLE, subtract)
    with pytest.raises(ValueError) as e:
        calculator(brain).run("What is 2 + 3?")
    assert str(e.value) == ("example 2 calls subtract, which is not one of this agent's tools (add, final_answer): "
                            "fix the example, or give the agent that tool")
    assert server.requests == []


@pytest.mark.parametrize("example, said", [
    ([Message(USER, "1 + 1?")], "example 1 is a Context, the notebook of a worked run (agent.run(question)), not list"),
    (Context(), "example 1 is empty: an example is a run from its question on"),
    (Context((Message(SYSTEM, "Add."), *EXAMPLE)), "example 1 begins with a system note: an example is a run from its "
                                                   "question on (the run's own system note is the one the model reads)"),
    (Context(EXAMPLE[:2]), "example 1 ends with a call nothing answered (a run paused for a human?): settle it with "
                           "approve or deny, or cut it off"),
    (Context((EXAMPLE[0], EXAMPLE[2])), "example 1 is not a sound notebook: message 1 (a result from add): a result "
                                        "with no decision before it"),
])
def test_an_example_that_is_not_a_whole_run_is_refused_when_the_brain_is_made(example, said):
    with pytest.raises((TypeError, ValueError)) as e:
        few_shot(scripted(), example)
    assert str(e.value).startswith(said)


def test_few_shot_needs_a_brain_and_at_least_one_example():
    with pytest.raises(TypeError, match="few_shot takes a policy, a function .context, tools. -> Action, then the "
                                        "examples, not Context"):
        few_shot(EXAMPLE)
    with pytest.raises(ValueError, match="few_shot shows the model at least one worked run: with none, it is zero-shot"):
        few_shot(scripted())


# --- the invariants -------------------------------------------------------------------------------

def renumbered(messages: list[dict], by: int) -> list[dict]:
    """Messages with each id call_n made call_(n + by): as they stand after `by` calls before them."""
    return json.loads(re.sub(r'"call_(\d+)"', lambda m: f'"call_{int(m.group(1)) + by}"', json.dumps(messages)))


def on_the_wire(examples: list[Context]) -> list[dict]:
    """The examples as a few-shot request holds them: one after another, their calls numbered on."""
    out, calls = [], 0
    for e in examples:
        out += renumbered(to_request(e, TOOLS, "stand-in")["messages"], calls)
        calls += sum(m.kind == "decision" and m.tool == "add" for m in e)  # an answer in words has no id
    return out


def added(pairs) -> list[Action]:
    return [Action("add", {"a": a, "b": b}, why) for a, b, why in pairs] + [Action("final_answer", {"answer": "ok"})]


turns = st.lists(st.tuples(st.integers(-9, 9), st.integers(-9, 9), st.sampled_from(["", "add them"])), max_size=3)


@settings(max_examples=15, deadline=None)
@given(sums=turns, worked=st.lists(turns, min_size=1, max_size=2), told=st.sampled_from([None, "Be brief."]))
def test_a_few_shot_request_is_the_prompt_then_the_examples_then_the_notebooks_own_messages(sums, worked, told):
    examples = [calculator(scripted(*added(pairs))).run(f"example {n}") for n, pairs in enumerate(worked)]
    start = Context((Message(SYSTEM, told),) if told else ()).add(Message(USER, "2 + 3?"))
    script = [reply(why, calls=[("add", json.dumps({"a": a, "b": b}))]) for a, b, why in sums] + [reply("ok")]
    with serve(script) as plain, serve(script) as shown:
        without = calculator(zero_shot("stand-in", plain.url, system=SYSTEM_PROMPT, stream=False)).run(start)
        with_them = calculator(few_shot(zero_shot("stand-in", shown.url, system=SYSTEM_PROMPT, stream=False),
                                        *examples)).run(start)
    assert with_them == without  # the examples never change the notebook
    calls = sum(m.kind == "decision" and m.tool == "add" for e in examples for m in e)
    for request, plain_request in zip(shown.requests, plain.requests, strict=True):
        head, *own = plain_request["messages"]  # the system message, then the notebook's own
        assert request["messages"] == [head, *on_the_wire(examples), *renumbered(own, calls)]
    # the notebook the brain reads: the system note, the examples, then the rest of the notebook whole
    head = 1 if told else 0
    assert with_examples(without, *examples).messages == (
        without[:head] + tuple(m for e in examples for m in e) + without[head:])
