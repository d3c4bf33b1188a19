"""The chat completions wire format, alone: a notebook as a request, a reply as an Action. No HTTP."""

import json
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from microagent.agent import Agent
from microagent.approval import approve, deny
from microagent.chat import encoded, json_rules, move_schema, read_move, to_action, to_messages, to_request, tool_spec
from microagent.context import Context
from microagent.message import SYSTEM, USER, Message
from microagent.policy import Action
from microagent.saving import from_json, to_json
from microagent.schema import as_tool, described
from microagent.script import scripted
from microagent.team import agent_tool
from microagent.tool import Tool, final_answer

GOLDEN = Path(__file__).resolve().parent / "golden"


@as_tool
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@as_tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay an amount in dollars."""
    return f"paid ${amount}"


@as_tool
def refund(order_id: str, amount: float, note: str = "") -> str:
    """Refund an order to the card it was paid with.

    Args:
        order_id: The order's id,
            like A1234.
        amount (float): How much, in dollars.

    Returns:
        What was refunded.
    """
    return f"${amount:g} refunded"


submit = Tool("submit", "Hand in the finished report; this ends the run.", lambda report: report, terminal=True)
escalate = Tool("escalate", "Hand the case to a human; this ends the run.", lambda why: why, terminal=True)
TOOLS = {"add": add, "final_answer": final_answer}
HI = Context((Message(USER, "hi"),))


def run(*moves, tools=(add, final_answer), question="2 + 3?", **settings) -> Context:
    return Agent(scripted(*moves), list(tools), **settings).run(question)


# --- a notebook as a request ----------------------------------------------------------------

def test_the_request_is_the_notebook_as_chat_messages_and_the_tools_as_function_specs():
    ctx = run(Action("add", {"a": 2, "b": 3}, "Adding."), Action("final_answer", {"answer": "It is 5."}))
    assert to_request(ctx, TOOLS, "tiny", system="You add.") == {
        "model": "tiny",
        "tools": [  # not final_answer: with native tool calls, a reply in words is the final answer
            {"type": "function", "function": {"name": "add", "description": "Add two whole numbers.", "parameters": {
                "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"]}}}],
        # nothing else: no temperature, no "stream": false (the server's defaults), and the notebook last
        "messages": [
            {"role": "system", "content": "You add."},
            {"role": "user", "content": "2 + 3?"},
            {"role": "assistant", "content": "Adding.", "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "5"},
            {"role": "assistant", "content": "It is 5."}]}  # the answer goes back as the words it was
    assert list(to_request(ctx, TOOLS, "tiny", stream=True, temperature=0))[-4:] == [
        "temperature", "stream", "stream_options", "messages"]


def test_a_request_for_a_known_notebook_is_exactly_the_golden_one():
    ctx = Agent(scripted(Action("refund", {"order_id": "A1234", "amount": 79}, "it qualifies"),
                         Action(None, reasoning="your reply was empty: call one of the tools, or answer in words"),
                         Action("final_answer", {"answer": "Refunded ½ of it ✓"})),
                [refund, final_answer]).run("Refund A1234?")
    tools = {"refund": refund, "final_answer": final_answer}
    for native, name in [(True, "request_native.json"), (False, "request_json_mode.json")]:
        sent = encoded(to_request(ctx, tools, "tiny", native=native, system="You are a support agent."))
        assert sent == (GOLDEN / name).read_bytes(), name  # compact, UTF-8, the notebook last


def test_the_same_notebook_always_gives_the_same_request_even_after_a_save_and_load():
    ctx = run(Action("add", {"a": 1, "b": 2}), Action("add", {"a": 3, "b": 3}), Action("final_answer", {"answer": "6"}))
    request = to_request(ctx, TOOLS, "tiny")
    assert request == to_request(from_json(to_json(ctx)), TOOLS, "tiny")
    ids = [(m.get("tool_calls") or [{}])[0].get("id") or m.get("tool_call_id") for m in request["messages"]]
    assert ids == [None, "call_1", "call_1", "call_2", "call_2", None]  # the n-th call is call_n; words have none


def test_a_humans_approval_travels_inside_the_tool_result_with_the_arguments_approved():
    agent = Agent(scripted(Action("pay", {"amount": 90}, "pay it"), Action("final_answer", {"answer": "ok"})),
                  [pay, final_answer])
    paused = agent.run("pay the plumber")
    messages = to_messages(agent.run(approve(paused, pay, by="alice", args={"amount": 80})))
    # user, assistant (asked for 90), tool (alice approved 80), assistant: no user note between
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == '{"amount": 90}'
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1",
                           "content": 'approved by alice with {"amount": 80}: paid $80'}
    denied = to_messages(agent.run(deny(paused, pay, "too much", by="bob")))
    assert denied[2] == {"role": "tool", "tool_call_id": "call_1", "content": "denied by bob: too much"}


def test_an_out_of_steps_remark_is_an_assistant_message_and_inner_notes_stay_home():
    helper = Agent(scripted(Action("add", {"a": 1, "b": 1}), Action("final_answer", {"answer": "2"})),
                   [add, final_answer], name="helper")
    boss = Agent(scripted(Action("helper", {"request": "1 + 1"})),
                 [agent_tool(helper, description="adds for you"), final_answer], max_steps=1)
    ctx = boss.run("ask the helper")
    assert len(ctx[2].notes) == 5  # the helper's whole run is in the notebook...
    assert to_messages(ctx)[2:] == [  # ...but only its answer goes over the wire
        {"role": "tool", "tool_call_id": "call_1", "content": "2"},
        {"role": "assistant", "content": "out of steps: stopped after 1 turn without an answer"}]


def test_a_reply_that_held_no_move_goes_back_as_the_problem_in_words_from_the_user():
    ctx = run(Action(None, reasoning="your reply was cut off at 200 tokens, before it was whole: write a shorter one"),
              Action("final_answer", {"answer": "5"}))
    assert ctx[1].kind == "no_move"  # not a call to tool "", and no error result for it
    said = {"role": "user", "content": "error: your reply was cut off at 200 tokens, before it was whole: "
                                       "write a shorter one"}
    assert to_request(ctx, TOOLS, "m")["messages"][1:] == [said, {"role": "assistant", "content": "5"}]
    assert to_request(ctx, TOOLS, "m", native=False)["messages"][2:] == [said, {"role": "assistant", "content": "5"}]


def test_an_answer_in_words_goes_back_as_the_words_and_a_follow_up_goes_after_it():
    first = run(Action("final_answer", {"answer": "It is 5."}, "done"))
    ctx = Agent(scripted(Action("final_answer", {"answer": "x"}), Action("final_answer", {"answer": "It is 7."})),
                [add, final_answer]).run(first.add(Message(USER, "and 3 + 4?")))
    assert to_request(ctx, TOOLS, "m")["messages"] == [
        {"role": "user", "content": "2 + 3?"}, {"role": "assistant", "content": "It is 5."},  # not its reasoning
        {"role": "user", "content": "and 3 + 4?"}, {"role": "assistant", "content": "It is 7."}]
    # in_words is what to_request passes: without it, every call goes back as a call
    assert to_messages(first)[1]["tool_calls"][0]["function"]["name"] == "final_answer"
    assert to_messages(first, in_words=("final_answer",))[1:] == [{"role": "assistant", "content": "It is 5."}]


def test_an_answer_in_words_that_failed_goes_back_as_the_error():
    ctx = run(Action("final_answer", {"reply": "oops"}), Action("final_answer", {"answer": "5"}))
    assert ctx[2].error
    assert to_request(ctx, TOOLS, "m")["messages"][1:3] == [
        {"role": "assistant", "content": "oops"},
        {"role": "user", "content": "error: bad arguments for final_answer: missing answer (it takes: answer)"}]


def test_the_terminal_tool_is_read_off_the_tool_not_its_name():
    # an agent whose only answer is `submit`: the brain used to refuse it (it looked for "final_answer")
    tools = {"add": add, "submit": submit}
    assert [s["function"]["name"] for s in to_request(HI, tools, "m")["tools"]] == ["add"]
    assert to_action({"content": "  All done.\n"}, tools) == Action("submit", {"report": "All done."})
    ctx = Agent(scripted(to_action({"content": "All done."}, tools)), list(tools.values())).run("report?")
    assert Agent(scripted(), list(tools.values())).why_stop(ctx) == "done"
    assert to_request(ctx, tools, "m")["messages"][1] == {"role": "assistant", "content": "All done."}
    assert "Call submit to give your answer." in json_rules(tools)
    # two terminal tools: words are the first; the other is shown, so the model can call it
    both = {"submit": submit, "escalate": escalate}
    assert [s["function"]["name"] for s in to_request(HI, both, "m")["tools"]] == ["escalate"]


def test_an_answer_that_takes_no_arguments_gets_the_words_as_its_reasoning():
    done = Tool("done", "Say you are done.", lambda: "ok", terminal=True)
    assert to_action({"content": "All set."}, {"done": done}) == Action("done", "{}", "All set.")
    ctx = Agent(scripted(Action("done", {}, "All set.")), [done]).run("?")
    assert to_request(ctx, {"done": done}, "m")["messages"][1] == {"role": "assistant", "content": "All set."}


def test_final_answer_goes_out_only_when_a_tool_choice_forces_a_call_every_turn():
    def names(**settings):
        return [s["function"]["name"] for s in to_request(HI, TOOLS, "m", **settings).get("tools", [])]
    assert names() == names(tool_choice="auto") == names(tool_choice="none") == ["add"]
    assert names(tool_choice="required") == ["add", "final_answer"]
    forced = {"type": "function", "function": {"name": "final_answer"}}
    assert names(tool_choice=forced) == ["add", "final_answer"]
    assert to_request(HI, TOOLS, "m", tool_choice=forced)["tool_choice"] == forced
    # forced, its calls go back as calls: the model was shown the tool
    ctx = run(Action("final_answer", {"answer": "5"}))
    assert "tool_calls" in to_request(ctx, TOOLS, "m", tool_choice="required")["messages"][1]
    only_final = to_request(HI, {"final_answer": final_answer}, "m", tool_choice="auto")
    assert "tools" not in only_final and "tool_choice" not in only_final  # nothing to choose from
    assert "tool_choice" not in to_request(HI, TOOLS, "m", native=False, tool_choice="required")
    sent = to_request(HI, TOOLS, "m", max_tokens=64, cache_prompt=True, temperature=None)
    assert (sent["max_tokens"], sent["cache_prompt"]) == (64, True) and "temperature" not in sent  # None: left out


def test_without_native_tools_the_tools_are_described_in_one_system_prompt():
    ctx = run(Action("add", {"a": 2, "b": 3}, "sum it"), Action("final_answer", {"answer": "5"}, "done"))
    noted = Context((Message(SYSTEM, "Be brief."),)).add(*ctx)
    for notebook, system, head in [(ctx, None, ""), (ctx, "You add.", "You add.\n\n"),
                                   (noted, "You add.", "You add.\n\nBe brief.\n\n")]:
        sent = to_request(notebook, TOOLS, "m", native=False, system=system)
        assert "tools" not in sent
        assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "user", "assistant"]
        assert sent["messages"][0]["content"] == head + json_rules(TOOLS)  # one system message, first
    assert '- add: Add two whole numbers. {"type":"object"' in json_rules(TOOLS)
    assert to_request(ctx, TOOLS, "m", native=False)["messages"][2:4] == [
        {"role": "assistant", "content": '{"tool":"add","args":{"a":2,"b":3},"reasoning":"sum it"}'},
        {"role": "user", "content": "add returned: 5"}]


@pytest.mark.parametrize("form", ["json_schema", "json_object"])
def test_json_mode_can_send_the_schema_of_a_move_in_the_form_the_server_takes(form):
    schema = {"anyOf": [
        {"type": "object", "properties": {"tool": {"const": "add"}, "args": add.schema, "reasoning": {"type": "string"}},
         "required": ["tool", "args", "reasoning"], "additionalProperties": False},
        {"type": "object", "properties": {"tool": {"const": "final_answer"}, "args": final_answer.schema,
                                          "reasoning": {"type": "string"}},
         "required": ["tool", "args", "reasoning"], "additionalProperties": False}]}
    assert move_schema(TOOLS) == schema
    expected = ({"type": "json_schema", "json_schema": {"name": "move", "schema": schema}} if form == "json_schema"
                else {"type": "json_object", "schema": schema})
    assert to_request(HI, TOOLS, "m", native=False, response_format=form)["response_format"] == expected
    with pytest.raises(ValueError, match="response_format describes a move as JSON text: it goes with native=False"):
        to_request(HI, TOOLS, "m", response_format=form)
    with pytest.raises(ValueError, match="response_format is json_schema, json_object or None, not 'json'"):
        to_request(HI, TOOLS, "m", native=False, response_format="json")


def test_tools_are_the_agents_tools_by_name():
    with pytest.raises(TypeError, match=r"tools are the agent's tools by name \(agent.tools\), not tuple"):
        to_request(HI, (add, final_answer), "m")
    agent = Agent(scripted(), [add, final_answer])
    assert to_request(HI, agent.tools, "m") == to_request(HI, TOOLS, "m")  # the read-only mapping itself


moves = st.one_of(
    st.builds(lambda a, b, why: Action("add", {"a": a, "b": b}, why), st.integers(-9, 99), st.integers(), st.text()),
    st.builds(lambda args: Action("add", args), st.text(max_size=12)),  # broken JSON, as a model may write it
    st.builds(lambda name: Action(name, {}), st.sampled_from(["nope", "final_answer"])),
    st.builds(lambda why: Action(None, reasoning=why), st.text(max_size=12)),  # no move
)


@given(script=st.lists(moves, max_size=6), last=st.sampled_from(["words", "call", "none"]),
       native=st.booleans(), system=st.sampled_from([None, "You add."]))
def test_each_request_starts_with_the_whole_request_before_byte_for_byte(script, last, native, system):
    ending = {"words": [Action("final_answer", {"answer": "done"})], "call": [Action("final_answer", {"answer": 7})],
              "none": []}[last]
    ctx = run(*script, *ending, max_steps=len(script) + len(ending), question="add things")
    # the notebook as it stood at each move: what each request of the run was made from
    asked = [Context(ctx.messages[:i]) for i, m in enumerate(ctx) if m.kind in ("decision", "no_move")]
    sent = [encoded(to_request(c, TOOLS, "m", native=native, system=system)) for c in asked]
    for before, now in zip(sent[:-1], sent[1:], strict=True):
        assert now.startswith(before[:-len(b"]}")])  # all but the closing brackets of its messages
    # and asked again with the same notebook, it sends the same bytes
    assert sent == [encoded(to_request(from_json(to_json(c)), TOOLS, "m", native=native, system=system))
                    for c in asked]


def test_a_docstring_without_args_is_the_description_whole_and_args_become_parameter_descriptions():
    assert described(add) == ("Add two whole numbers.", add.schema)  # no Args: as it was
    spec = tool_spec(refund)["function"]
    assert spec["description"] == "Refund an order to the card it was paid with."  # no Args:, no Returns:
    assert spec["parameters"]["properties"] == {
        "order_id": {"type": "string", "description": "The order's id, like A1234."},
        "amount": {"type": "number", "description": "How much, in dollars."},
        "note": {"type": "string"}}  # a parameter the docstring does not name has no description
    assert refund.schema["properties"]["amount"] == {"type": "number"}  # the tool's own schema is untouched

    @as_tool
    def odd(x: int) -> str:
        """Args:
        nothing here but a heading, and a name that is not a parameter:
            y: not x
        """
        return ""
    assert described(odd) == (odd.description, odd.schema)  # no summary before it: the docstring, whole


# --- a reply as an Action -------------------------------------------------------------------

def test_a_reply_with_several_calls_is_its_first_call_and_the_rest_are_dropped():
    reply = {"role": "assistant", "content": "Let me add both.", "tool_calls": [
        {"id": "x1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 1}'}},
        {"id": "x2", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'}}]}
    assert to_action(reply, TOOLS) == Action("add", '{"a": 1, "b": 1}', "Let me add both.")


@pytest.mark.parametrize("reply, problem", [
    ({"content": ""}, "your reply was empty: call one of the tools, or answer in words"),
    ({"content": None, "tool_calls": []}, "your reply was empty: call one of the tools, or answer in words"),
    ({"content": " \n"}, "your reply was empty: call one of the tools, or answer in words"),
    ({"tool_calls": [{"function": {"name": 7, "arguments": "{}"}}]},
     "your tool call named no tool: call one of add, final_answer by its name"),
    ({"tool_calls": [{"function": {"name": "", "arguments": "{}"}}]},
     "your tool call named no tool: call one of add, final_answer by its name"),
])
def test_a_reply_with_no_move_is_no_action_whose_reasoning_says_what_was_wrong(reply, problem):
    assert to_action(reply, TOOLS) == Action(None, reasoning=problem)


UNREADABLE = "your tool call could not be read ({}): call one of add, final_answer by its name"
NO_WORDS = "your reply held no words ({}): call one of the tools, or answer in words"


@pytest.mark.parametrize("reply, problem", [
    ({"tool_calls": [None]}, UNREADABLE.format("it was null")),
    ({"tool_calls": [None, {"function": {"name": "add", "arguments": "{}"}}]},
     UNREADABLE.format("it was null")),  # the first call is the move, and it can't be read
    ({"tool_calls": "add"}, UNREADABLE.format("the calls came as text, not a list")),
    ({"tool_calls": {"function": {"name": "add", "arguments": "{}"}}},
     UNREADABLE.format("the calls came as an object, not a list")),
    ({"tool_calls": [["add", "{}"]]}, UNREADABLE.format("it was a list")),
    ({"tool_calls": [{"function": "add"}]},
     UNREADABLE.format("its function was text, not an object with a name and arguments")),
    ({"tool_calls": [{"function": ["add", "{}"]}]},
     UNREADABLE.format("its function was a list, not an object with a name and arguments")),
    ({"tool_calls": [{"id": "call_1"}]},
     UNREADABLE.format("its function was null, not an object with a name and arguments")),
    ({"content": 5}, NO_WORDS.format("its content was a number, not text")),
    ({"content": {"text": "It is 5."}}, NO_WORDS.format("its content was an object, not text")),
    ({"content": [{"type": "image_url", "image_url": {"url": "http://127.0.0.1/receipt.png"}}]},
     NO_WORDS.format("no part of its content is text")),
    (["It is 5."], "your reply could not be read (it was a list, not a message): "
                   "call one of the tools, or answer in words"),
    (None, "your reply could not be read (it was null, not a message): "
           "call one of the tools, or answer in words"),
])
def test_a_reply_of_the_wrong_shape_is_no_move_whose_reasoning_says_what_was_wrong(reply, problem):
    assert to_action(reply, TOOLS) == Action(None, reasoning=problem)


def test_a_reply_of_the_wrong_shape_becomes_a_no_move_note_the_model_reads_next_turn():
    brain = scripted(to_action({"tool_calls": [None]}, TOOLS), Action("final_answer", {"answer": "5"}))
    ctx = Agent(brain, list(TOOLS.values())).run("2 + 3?")
    # question, no_move, decision (final_answer), result
    assert [m.kind for m in ctx] == ["question", "no_move", "decision", "result"]
    assert to_messages(ctx)[1] == {"role": "user", "content": "error: " + UNREADABLE.format("it was null")}


def test_words_sent_as_parts_are_joined_and_a_part_that_is_not_text_is_not_read():
    assert to_action({"content": [{"type": "text", "text": "It is 5."}]}, TOOLS) == \
        Action("final_answer", {"answer": "It is 5."})
    parts = [{"type": "text", "text": "It is "}, {"type": "image_url", "image_url": {"url": "http://127.0.0.1/x.png"}},
             {"type": "text", "text": "5."}]
    assert to_action({"content": parts}, TOOLS) == Action("final_answer", {"answer": "It is 5."})
    call = {"function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
    assert to_action({"content": [{"type": "text", "text": "Let me add."}], "tool_calls": [call]}, TOOLS) == \
        Action("add", {"a": 2, "b": 3}, "Let me add.")
    move = '{"tool": "add", "args": {"a": 2, "b": 3}, "reasoning": "sum"}'
    assert to_action({"content": [{"type": "text", "text": move}]}, TOOLS, native=False) == \
        Action("add", {"a": 2, "b": 3}, "sum")
    assert to_action({"content": [{"type": "text", "text": " "}]}, TOOLS).reasoning == \
        "your reply was empty: call one of the tools, or answer in words"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
    | st.sampled_from(["add", "final_answer", "text", '{"a": 1, "b": 2}']),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["content", "tool_calls", "function", "name", "arguments", "type", "text", "tool",
                         "args"]) | st.text(max_size=3), inner, max_size=4),
    max_leaves=12)


@given(reply=JSON, native=st.booleans())
def test_any_json_reply_whatever_its_shape_is_one_action_and_a_no_move_says_why(reply, native):
    action = to_action(reply, TOOLS, native)
    assert isinstance(action, Action)
    assert action.tool is not None or action.reasoning.startswith(("your ", "you "))


def test_words_with_no_answer_tool_are_no_move_that_quotes_them():
    assert to_action({"content": "It is 5, I think, but let me say much more about it than is needed here."},
                     {"add": add}) == Action(None, reasoning=(
                         "you answered in words (It is 5, I think, but let me say much more about it than is ...), "
                         "but no tool here takes an answer: call one of add"))


def test_arguments_stay_the_raw_text_and_an_object_is_written_out_as_json_text():
    assert to_action({"tool_calls": [{"function": {"name": "add", "arguments": '{"a": 2, "b": '}}]},
                     TOOLS).args == '{"a": 2, "b": '  # broken: the loop says so in an error note
    assert to_action({"tool_calls": [{"function": {"name": "add", "arguments": {"a": "½"}}}]},
                     TOOLS).args == '{"a": "½"}'  # JSON text, as Action writes it: no \u escapes
    assert to_action({"tool_calls": [{"function": {"name": "add"}}]}, TOOLS).args == "{}"
    nested = []
    for _ in range(5000):  # an object a server's own parser let through: too deep to write out
        nested = [nested]
    call = to_action({"tool_calls": [{"function": {"name": "add", "arguments": nested}}]}, TOOLS)
    assert call.args == "(arguments nested too deeply to write out)"  # not JSON: the loop's error note says so
    assert add.run(call.args).content.startswith("error: bad arguments for add: the text is not valid JSON")


def test_reading_a_json_move_is_forgiving_but_never_guesses():
    assert read_move('ok {"note": "not a move"} then {"tool": "add", "args": {"a": 1, "b": 2}}', TOOLS) == \
        Action("add", {"a": 1, "b": 2})  # the first object *with a tool*
    assert read_move('Sure!\n```json\n{"tool": "add", "args": {"a": 2}, "reasoning": "sum"}\n```', TOOLS) == \
        Action("add", {"a": 2}, "sum")
    assert read_move('{"tool": "add", "args": "{\\"a\\": 1}"}', TOOLS) == Action("add", '{"a": 1}')  # text: kept
    assert read_move('{"tool": "add", "reasoning": null}', TOOLS) == Action("add", {}, "")  # not "None"
    assert read_move("The answer is 5.", TOOLS) == Action("final_answer", {"answer": "The answer is 5."})
    assert read_move('{"tool": "add", "args": {"a": 1,}}', TOOLS) == Action(None, reasoning=(
        'your reply held no JSON object with a tool (it began: {"tool": "add", "args": {"a": 1,}}): '
        'reply with one JSON object: {"tool": ..., "args": {...}, "reasoning": ...}'))
    assert read_move("", TOOLS).reasoning == ('your reply was empty: reply with one JSON object: '
                                              '{"tool": ..., "args": {...}, "reasoning": ...}')
    assert to_action({"content": "It is 5."}, TOOLS, native=False) == read_move("It is 5.", TOOLS)


def test_reading_a_json_move_is_linear_in_the_length_of_the_reply(monkeypatch):
    tries = []
    real = json.JSONDecoder.raw_decode
    monkeypatch.setattr(json.JSONDecoder, "raw_decode", lambda self, s, idx=0: tries.append(idx) or real(self, s, idx))
    for text in ["{" * 400_000, '{"' * 200_000, '{"a": 1} ' * 50_000]:
        tries.clear()
        assert read_move(text, TOOLS).tool is None
        assert len(tries) <= (50_001 if text.startswith('{"a"') else 20)  # once per object, not per "{"
    deep = '{"tool": "add", "args": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert read_move(deep, TOOLS).tool is None  # too deep to read: no move, not a RecursionError


@given(text=st.text(max_size=40), name=st.sampled_from(["add", "nope", ""]), args=st.text(max_size=20))
def test_any_reply_is_exactly_one_action_and_a_no_move_always_says_why(text, name, args):
    for reply in ({"content": text}, {"content": text, "tool_calls": [{"function": {"name": name, "arguments": args}}]}):
        for native in (True, False):
            action = to_action(reply, TOOLS, native)
            assert isinstance(action, Action)
            assert action.tool is not None or action.reasoning.startswith(("your ", "you "))
