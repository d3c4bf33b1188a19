"""The four data pieces: notes, the notebook, coworkers and decisions."""

import dataclasses
import json
from typing import Literal

import pytest
from hypothesis import given, strategies as st

from microagent import ASSISTANT, TOOL, USER, Action, Context, Message, Tool, as_tool, final_answer
from microagent.schema import schema_of


# --- Message: one note, written in pen -------------------------------------------------

def test_a_message_is_frozen_and_compares_by_value():
    note = Message(USER, "hello")
    with pytest.raises(dataclasses.FrozenInstanceError):
        note.content = "changed"
    assert note == Message(USER, "hello")
    assert len({note, Message(USER, "hello"), Message(USER, "bye")}) == 2  # it hashes


def test_a_message_refuses_what_it_cannot_hold():
    with pytest.raises(ValueError, match="role must be one of system, user, assistant, tool"):
        Message("boss", "hi")
    with pytest.raises(TypeError, match="content must be a string"):
        Message(USER, {"text": "hi"})
    with pytest.raises(TypeError, match="args must be a string"):
        Message(ASSISTANT, "", tool="t", args={"a": 1})  # a dict would be mutable
    with pytest.raises(TypeError, match="notes must be a tuple of Messages"):
        Message(TOOL, "x", name="t", notes=[Message(USER, "hi")])


# --- Context: the notebook you never erase ---------------------------------------------

def test_add_hands_back_a_new_notebook_and_leaves_the_old_one():
    empty = Context()
    one = empty.add(Message(USER, "hi"))
    two = one.add(Message(TOOL, "hello", name="final_answer"))
    assert (len(empty), len(one), len(two)) == (0, 1, 2)
    assert empty.last() is None and one.last().content == "hi" and two.last().content == "hello"
    assert [m.role for m in two] == [USER, TOOL]
    assert two[0] is one[0]  # the old notes are shared, never copied or changed
    with pytest.raises(dataclasses.FrozenInstanceError):
        two.messages = ()
    with pytest.raises(TypeError, match="takes Messages"):
        one.add("not a note")


def test_pending_is_the_decision_nobody_has_answered_yet():
    asked = Context().add(Message(USER, "refund me"))
    decided = asked.add(Message(ASSISTANT, "needs sign off", name="a", tool="refund", args="{}"))
    verdict = decided.add(Message(USER, "approved", name="alice", tool="refund", args="{}"))
    answered = verdict.add(Message(TOOL, "done", name="refund"))
    assert asked.pending is None
    assert decided.pending is decided.last()
    assert verdict.pending is decided.last()  # still pending: the verdict is in, the tool has not run
    assert answered.pending is None


notes = st.builds(
    Message,
    role=st.sampled_from([USER, ASSISTANT, TOOL, "system"]),
    content=st.text(),
    name=st.none() | st.text(),
    tool=st.none() | st.text(),
    args=st.none() | st.text(),
    error=st.booleans(),
)
nested = st.builds(lambda m, inner: dataclasses.replace(m, notes=tuple(inner)), notes, st.lists(notes, max_size=3))


@given(st.lists(nested, max_size=8))
def test_json_round_trips_any_notebook_exactly(messages):
    ctx = Context(tuple(messages))
    assert Context.from_json(ctx.to_json()) == ctx


def test_json_keeps_unicode_readable():
    ctx = Context().add(Message(USER, "Rückerstattung für 注文 A1234? 🎧"))
    assert "注文" in ctx.to_json()
    assert Context.from_json(ctx.to_json()) == ctx


@pytest.mark.parametrize("text, says", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", '"format"'),
    ('{"format": "something else", "messages": []}', '"format"'),
    ('{"format": "microagent.context/1", "messages": {}}', '"messages"'),
    ('{"format": "microagent.context/1", "messages": [{"role": "user"}]}', "message 0: .*missing 1 required positional argument: 'content'"),
    ('{"format": "microagent.context/1", "messages": [{"role": "user", "content": "x", "secret": 1}]}', "message 0: .*unexpected keyword argument 'secret'"),
    ('{"format": "microagent.context/1", "messages": [7]}', "message 0: .*not a mapping"),
    ('{"format": "microagent.context/1", "messages": [{"role": "tool", "content": "x", "notes": 7}]}', "message 0 has notes that are not a list"),
    ('{"format": "microagent.context/1", "messages": [{"role": "judge", "content": "x"}]}', "message 0: role must be one of"),
    ('{"format": "microagent.context/1", "messages": [{"role": "user", "content": 7}]}', "message 0: a message's content must be a string"),
    ('{"format": "microagent.context/1", "messages": [{"role": "tool", "content": "x", "notes": [{"role": "x", "content": ""}]}]}',
     "message 0, note 0: role must be"),
])
def test_tampered_json_is_a_value_error_that_says_what_is_wrong(text, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        Context.from_json(text)


# --- Tool: a coworker that knows its own arguments ---------------------------------------

def test_the_schema_is_read_off_the_signature_for_every_supported_hint():
    def everything(s: str, i: int, f: float, b: bool, names: list[str], table: dict,
                   mood: Literal["calm", "busy"], maybe: int | None = None, anything=None): ...
    schema = schema_of(everything)
    assert schema == {"type": "object", "required": ["s", "i", "f", "b", "names", "table", "mood"], "properties": {
        "s": {"type": "string"}, "i": {"type": "integer"}, "f": {"type": "number"}, "b": {"type": "boolean"},
        "names": {"type": "array", "items": {"type": "string"}}, "table": {"type": "object"},
        "mood": {"type": "string", "enum": ["calm", "busy"]}, "maybe": {"type": ["integer", "null"]},
        "anything": {}}}
    json.dumps(schema)  # it must be plain JSON, ready for a model


def test_unsupported_hints_and_star_args_are_refused_when_the_tool_is_made():
    def odd(when: complex): ...
    def star(*names: str): ...
    with pytest.raises(TypeError, match=r"odd\(when\): the hint .* is not one a tool supports"):
        schema_of(odd)
    with pytest.raises(TypeError, match="named parameters only"):
        schema_of(star)
    with pytest.raises(ValueError, match="a tool's name must be a word"):
        Tool("two words", "x", lambda: "", {})


def test_the_decorator_works_bare_and_with_arguments():
    @as_tool
    def look_up(order_id: str) -> str:
        """Look up an order."""
        return f"order {order_id}"

    @as_tool(name="done", description="Finish.", terminal=True)
    def finish(answer: str) -> str:
        return answer

    assert (look_up.name, look_up.description, look_up.terminal) == ("look_up", "Look up an order.", False)
    assert (finish.name, finish.description, finish.terminal) == ("done", "Finish.", True)
    assert look_up(order_id="A1") == "order A1"
    assert final_answer.terminal and final_answer(answer="42") == "42"
    with pytest.raises(ValueError, match="needs a description"):
        as_tool(lambda x: x)


def test_a_tool_hands_back_a_string_whatever_its_function_returns():
    count = Tool("count", "Count.", lambda n: n * 2, {"type": "object", "properties": {"n": {"type": "integer"}}})
    assert count(n=21) == "42"


@pytest.mark.parametrize("args, problem", [
    ({"order_id": "A1", "amount": 79}, None),
    ({"order_id": "A1", "amount": 79.5, "notify": False}, None),
    ({"amount": 79}, "missing order_id (it takes: order_id, amount, notify)"),
    ({"order_id": "A1", "amount": 79, "bonus": 1}, "unexpected bonus"),
    ({"order_id": 1234, "amount": 79}, "order_id must be string, not int 1234"),
    ({"order_id": "A1", "amount": "79"}, "amount must be number, not str '79'"),
    ({"order_id": "A1", "amount": 79, "notify": 1}, "notify must be boolean, not int 1"),
    ({"order_id": "A1", "amount": True}, "amount must be number, not bool True"),
])
def test_arguments_are_checked_against_the_schema(args, problem):
    @as_tool
    def refund(order_id: str, amount: float, notify: bool = True) -> str:
        """Refund an order."""
        return "ok"
    found = refund.check(args)
    assert found == problem if problem is None else problem in found


def test_nested_lists_and_literals_are_checked_item_by_item():
    @as_tool
    def tag(labels: list[int], level: Literal["low", "high"] = "low") -> str:
        """Tag something."""
        return "ok"
    assert tag.check({"labels": [1, 2]}) is None
    assert tag.check({"labels": [1, "2"]}) == "labels[1] must be integer, not str '2'"
    assert tag.check({"labels": [], "level": "mid"}) == "level must be one of ['low', 'high'], not 'mid'"


# --- Action: a decision, frozen -------------------------------------------------------

def test_an_action_keeps_its_arguments_as_json_text_so_it_stays_frozen():
    action = Action("refund", {"order_id": "A1", "amount": 79}, "it qualifies")
    assert action.args == '{"order_id": "A1", "amount": 79}'
    assert action == Action("refund", '{"order_id": "A1", "amount": 79}', "it qualifies")
    assert hash(action) == hash(Action("refund", {"order_id": "A1", "amount": 79}, "it qualifies"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        action.tool = "other"
    assert Action("refund", "{broken").args == "{broken"  # kept raw: the loop reports it


def test_in_jupyter_a_context_shows_as_its_story():
    pretty = pytest.importorskip("IPython.lib.pretty")
    ctx = Context().add(Message(USER, "hi"), Message(ASSISTANT, "say hello", name="bot", tool="final_answer",
                                                     args='{"answer": "hello"}'),
                        Message(TOOL, "hello", name="final_answer"))
    assert pretty.pretty(ctx) == 'you asked: "hi"\n  bot thought: say hello\n    -> final_answer returned: hello'


@pytest.mark.parametrize("make, says", [
    (lambda: Action(None), "tool and reasoning are strings"),
    (lambda: Action(5, {}), "tool and reasoning are strings"),
    (lambda: Action("t", {}, None), "tool and reasoning are strings"),
    (lambda: Action("t", {"when": object()}), "not JSON serializable"),
])
def test_a_malformed_action_is_refused_when_it_is_made(make, says):
    with pytest.raises(TypeError, match=says):
        make()


def test_an_optional_literal_takes_none_too():
    @as_tool
    def mood(level: Literal["low", "high"] | None = None) -> str:
        """Set a mood."""
        return "ok"
    assert mood.schema["properties"]["level"] == {"type": ["string", "null"], "enum": ["low", "high", None]}
    assert mood.check({"level": None}) is None and mood.check({"level": "mid"}) is not None


@pytest.mark.parametrize("make, says", [
    (lambda: as_tool("look_up"), r"as_tool makes a Tool from a function, not 'look_up'"),
    (lambda: as_tool(5), "as_tool makes a Tool from a function"),
])
def test_a_tool_made_wrongly_says_what_to_do(make, says):
    with pytest.raises(TypeError, match=says):
        make()


def test_hints_that_cannot_be_read_are_a_clear_error():
    def odd(x: "NotImported") -> str:  # noqa: F821
        return x
    with pytest.raises(TypeError, match="its type hints can't be read"):
        schema_of(odd)


def test_absurdly_deep_json_is_still_a_value_error():
    with pytest.raises(ValueError, match="not valid JSON"):
        Context.from_json("[" * 100_000 + "]" * 100_000)


def test_arguments_that_are_not_an_object_are_a_problem_not_a_crash():
    assert final_answer.check("x") == "the arguments must be object, not str 'x'"
