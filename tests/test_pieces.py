"""The four data pieces (notes, the notebook, coworkers, moves), and saving a notebook."""

import dataclasses
import functools
import json
from typing import Literal

import pytest
from hypothesis import given, strategies as st

from microagent.agent import DONE, Agent
from microagent.context import Context
from microagent.message import ASSISTANT, ROLES, SYSTEM, TOOL, USER, Message
from microagent.policy import Action
from microagent.saving import from_json, to_json
from microagent.schema import as_tool, schema_of
from microagent.script import actions, scripted
from microagent.tool import Tool, error_note, final_answer, read_json

KINDS = ("system", "question", "decision", "verdict", "result", "remark", "no_move")


# --- Message: one note, written in pen -------------------------------------------------

def test_a_message_is_frozen_and_compares_by_value():
    note = Message(USER, "hello")
    with pytest.raises(dataclasses.FrozenInstanceError):
        note.content = "changed"
    assert note == Message(USER, "hello")
    assert len({note, Message(USER, "hello"), Message(USER, "bye")}) == 2  # it hashes


def test_the_articles_three_field_note_is_a_message():
    assert Message("tool", "A1234, $79", name="look_up_order") == Message(TOOL, "A1234, $79", "look_up_order")


@pytest.mark.parametrize("make, error, says", [
    (lambda: Message("boss", "hi"), ValueError, "role must be one of system, user, assistant, tool"),
    (lambda: Message(USER, {"text": "hi"}), TypeError, "content must be a string"),
    (lambda: Message(USER, None), TypeError, "content must be a string"),
    (lambda: Message(ASSISTANT, "", tool="t", args={"a": 1}), TypeError, "args must be a string"),
    (lambda: Message(TOOL, "x", name=7), TypeError, "name must be a string"),
    (lambda: Message(TOOL, "x", notes=[Message(USER, "hi")]), TypeError, "notes must be a tuple of Messages"),
    (lambda: Message(TOOL, "x", notes=("hi",)), TypeError, "notes must be a tuple of Messages"),
    (lambda: Message(TOOL, "x", error=1), TypeError, "error must be True or False"),
    (lambda: Message(TOOL, "x", error=[]), TypeError, "error must be True or False"),
    (lambda: Message(TOOL, "x", error="yes"), TypeError, "error must be True or False"),
])
def test_a_message_refuses_what_it_cannot_hold(make, error, says):
    with pytest.raises(error, match=says):
        make()


@pytest.mark.parametrize("note, kind", [
    (Message(SYSTEM, "be kind"), "system"),
    (Message(USER, "refund A1234?"), "question"),
    (Message(ASSISTANT, "pull it up", "support", "look_up_order", '{"order_id": "A1234"}'), "decision"),
    (Message(USER, "approved", "alice", "issue_refund", '{"amount": 79}'), "verdict"),
    (Message(USER, "send it back first", "alice", "issue_refund"), "verdict"),
    (Message(TOOL, "A1234, $79", "look_up_order"), "result"),
    (error_note("look_up_order", "no order A9"), "result"),
    (Message(ASSISTANT, "out of steps: stopped after 3 turns", "support"), "remark"),
    (Message(ASSISTANT, "your reply was cut off at 200 tokens", "support", error=True), "no_move"),
])
def test_every_note_is_one_of_seven_kinds(note, kind):
    assert note.kind == kind


@given(st.sampled_from(ROLES), st.none() | st.text(max_size=3), st.booleans())
def test_every_possible_note_has_exactly_one_kind(role, tool, error):
    assert Message(role, "", tool=tool, error=error).kind in KINDS


# --- Context: the notebook you never erase ---------------------------------------------

def test_add_hands_back_a_new_notebook_and_leaves_the_old_one():
    empty = Context()
    one = empty.add(Message(USER, "hi"))
    two = one.add(Message(TOOL, "hello", name="final_answer"))
    assert (len(empty), len(one), len(two)) == (0, 1, 2)
    assert empty.last() is None and one.last().content == "hi" and two.last().content == "hello"
    assert [m.role for m in two] == [USER, TOOL] and [m.role for m in two.messages] == [USER, TOOL]
    assert two[0] is one[0]  # the old notes are shared, never copied or changed
    with pytest.raises(dataclasses.FrozenInstanceError):
        two.messages = ()
    with pytest.raises(TypeError, match="takes Messages"):
        one.add("not a note")
    with pytest.raises(TypeError, match="holds a tuple of Messages"):
        Context([Message(USER, "hi")])


# --- saving: the notebook as JSON, and back ----------------------------------------------

notes = st.builds(
    Message,
    role=st.sampled_from(ROLES),
    content=st.text(),
    name=st.none() | st.text(),
    tool=st.none() | st.text(),
    args=st.none() | st.text(),
    error=st.booleans(),
)
nested = st.builds(lambda m, inner: dataclasses.replace(m, notes=tuple(inner)), notes, st.lists(notes, max_size=3))


@given(st.lists(nested, max_size=8))
def test_saving_round_trips_any_notebook_exactly_and_always_encodes_as_utf8(messages):
    ctx = Context(tuple(messages))
    text = to_json(ctx)
    text.encode("utf-8")  # even a lone surrogate in a note is written as an escape
    assert from_json(text) == ctx and from_json(text.encode("utf-8")) == ctx


def test_saving_keeps_unicode_readable():
    ctx = Context().add(Message(USER, "Rückerstattung für 注文 A1234? 🎧"))
    assert "注文" in to_json(ctx) and from_json(to_json(ctx)) == ctx


def test_a_saved_file_that_an_editor_began_with_a_byte_order_mark_loads_as_it_was(tmp_path):
    ctx = Context().add(Message(USER, "refund A1234?"))
    path = tmp_path / "notebook.json"
    path.write_text(to_json(ctx), encoding="utf-8-sig")  # as Notepad saves "UTF-8 with BOM"
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    assert from_json(path.read_bytes()) == ctx
    assert from_json(path.read_text(encoding="utf-8")) == ctx  # the mark read as the text's first character
    # only the mark is skipped: a second one, or one inside, is not JSON
    with pytest.raises(ValueError, match="not a saved Context: the text is not valid JSON"):
        from_json("\ufeff\ufeff" + to_json(ctx))


FORMAT = '{"format": "microagent.context/1", "messages": '


@pytest.mark.parametrize("text, says", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", '"format"'),
    ('{"format": "something else", "messages": []}', '"format"'),
    (FORMAT + '{}}', '"messages"'),
    (FORMAT + '[{"role": "user"}]}', "message 0: .*missing 1 required positional argument: 'content'"),
    (FORMAT + '[{"role": "user", "content": "x", "secret": 1}]}', "message 0: .*unexpected keyword argument 'secret'"),
    (FORMAT + '[7]}', "message 0: .*not a mapping"),
    (FORMAT + '[{"role": "tool", "content": "x", "notes": 7}]}', "message 0 has notes that are not a list"),
    (FORMAT + '[{"role": "judge", "content": "x"}]}', "message 0: role must be one of"),
    (FORMAT + '[{"role": "user", "content": 7}]}', "message 0: a message's content must be a string"),
    (FORMAT + '[{"role": "tool", "content": "x", "error": []}]}', "message 0: a message's error must be True or False"),
    (FORMAT + '[{"role": "tool", "content": "x", "error": 1}]}', "message 0: a message's error must be True or False"),
    (FORMAT + '[{"role": "tool", "content": "x", "notes": [{"role": "x", "content": ""}]}]}',
     "message 0, note 0: role must be"),
    # a verdict file that shows one amount and approves another: the key given twice is refused
    (FORMAT + '[{"role": "user", "content": "approved", "args": "{}", "args": "{\\"amount\\": 7000}"}]}',
     '"args" is given twice'),
    ('{"format": "microagent.context/1", "format": "x", "messages": []}', '"format" is given twice'),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    (b"\xff\xfe", "can't decode"),
])
def test_a_tampered_file_is_a_value_error_that_says_what_is_wrong(text, says):
    with pytest.raises(ValueError, match="not a saved Context: .*" + says.replace("(", r"\(")):
        from_json(text)


def test_to_json_saves_only_a_context():
    with pytest.raises(TypeError, match="saves a Context"):
        to_json([Message(USER, "hi")])


# --- the strict reader ---------------------------------------------------------------------

@pytest.mark.parametrize("text, says", [
    ('{"amount": 1, "amount": 9999}', '"amount" is given twice: say each once'),
    ('{"a": {"b": 1, "b": 2}}', '"b" is given twice'),
    ('{"amount": NaN}', "NaN is not a number JSON can hold"),
    ('{"amount": Infinity}', "Infinity is not a number JSON can hold"),
    ('{"amount": [-Infinity]}', "-Infinity is not a number JSON can hold"),
    ('{"amount": 1e999}', "1e999 is not a number JSON can hold"),
    ('{"amount": ', "not valid JSON"),
    ("[" * 50_000, "nested too deeply"),
])
def test_json_from_outside_is_read_strictly(text, says):
    with pytest.raises(ValueError, match=says):
        read_json(text)


# --- Tool: a coworker that knows its own arguments ---------------------------------------

def test_the_articles_tool_reads_its_schema_off_the_functions_parameters():
    def look_up_order(order_id, verbose=False):
        return f"{order_id}, Wireless Headphones, $79"
    tool = Tool("look_up_order", "Look up an order", look_up_order)
    assert tool.schema == {"type": "object", "properties": {"order_id": {}, "verbose": {}}, "required": ["order_id"]}
    assert (tool.terminal, tool.needs_approval) == (False, False)
    assert Tool("final_answer", "Done.", lambda answer: answer, terminal=True).terminal
    assert tool.run('{"order_id": "A1"}') == Message(TOOL, "A1, Wireless Headphones, $79", "look_up_order")
    assert tool.run('{"verbose": true}').content == \
        "error: bad arguments for look_up_order: missing order_id (it takes: order_id, verbose)"


def test_the_schema_is_read_off_the_type_hints_for_every_supported_hint():
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


@pytest.mark.parametrize("name", ["two words", "", "a.b", 7, None, "1abc", "a\nb"])
def test_a_tools_name_is_a_word(name):
    with pytest.raises(ValueError, match="a tool's name is a word"):
        Tool(name, "x", lambda: "")


def test_a_tools_name_may_hold_a_hyphen_as_mcp_tools_do():
    assert Tool("get-sum", "Add.", lambda a, b: a + b).name == "get-sum"


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
    count = Tool("count", "Count.", lambda n: n * 2)
    assert count(n=21) == "42" and count.run('{"n": 21}').content == "42"


class Mute:
    def __str__(self):
        raise RuntimeError("no words")


@pytest.mark.parametrize("result, says", [
    (lambda: 10**5000, "ValueError: Exceeds the limit (4300 digits) for integer string conversion"),
    (Mute, "RuntimeError: no words"),
    (lambda: b"bytes", None),  # a str() that works is the text, whatever it looks like
])
def test_a_result_that_cannot_become_text_is_an_error_note_not_a_crash(result, says):
    odd = Tool("odd", "Hand back something odd.", result)
    note = odd.run("{}")
    if says is None:
        assert note == Message(TOOL, "b'bytes'", "odd")
    else:
        assert note.error and note.name == "odd" and note.content.startswith(f"error: odd failed: {says}")
        agent = Agent(scripted(Action("odd", {}), Action("final_answer", {"answer": "sorry"})), [odd, final_answer])
        ctx = agent.run("go")  # the loop carries on: the brain reads the note and answers
        assert [m.kind for m in ctx] == ["question", "decision", "result", "decision", "result"]
        assert ctx[2] == note and agent.why_stop(ctx) == DONE


def test_a_tool_whose_function_returns_nothing_writes_the_note_none():
    # the Tool adds no words to a result: None, Python's own word for nothing, is its text
    sent = []
    send = Tool("send", "Send a message.", lambda text: sent.append(text))
    assert send(text="hi") == "None" and send.run('{"text": "hi"}') == Message(TOOL, "None", "send")
    assert sent == ["hi", "hi"]


def first(x, /):
    return x


@pytest.mark.parametrize("fn, says", [
    (lambda *numbers: sum(numbers), r"add: a tool takes named parameters, not \*numbers"),
    (first, "add: a tool takes named parameters, not x"),
    (lambda x, /, *rest: x, "add: a tool takes named parameters, not x"),
    (len, "add: a tool takes named parameters, not obj"),
])
def test_a_function_no_call_by_name_can_fit_is_refused_when_the_tool_is_made(fn, says):
    with pytest.raises(TypeError, match=says):
        Tool("add", "Add numbers.", fn)
    with pytest.raises(TypeError, match=says):  # a schema given by hand can't name them either
        Tool("add", "Add numbers.", fn, schema={"type": "object", "properties": {"x": {}}})


def test_keyword_only_parameters_and_keywords_taken_whole_are_fine():
    assert Tool("t", "d", lambda a, *, b=1: a).schema["required"] == ["a"]
    schema = {"type": "object", "properties": {"q": {"type": "string"}}}
    assert Tool("t", "d", lambda **kw: kw["q"], schema=schema).run('{"q": "hi"}').content == "hi"


async def slow_lookup(order_id: str) -> str:
    """Look up an order, slowly."""
    return order_id


@pytest.mark.parametrize("make", [
    lambda: Tool("slow_lookup", "Look up an order, slowly.", slow_lookup),
    lambda: as_tool(slow_lookup),
    lambda: Tool("slow", "d", functools.partial(slow_lookup, "A1"), schema={"type": "object"}),
])
def test_an_async_def_is_refused_when_the_tool_is_made_and_told_what_to_do(make):
    with pytest.raises(TypeError, match=r"a Tool can't await an async def; wrap it with "
                                        r"microagent\.parallel\.async_tool"):
        make()


def test_a_tools_problem_is_the_words_its_error_note_is_built_from():
    @as_tool
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        return "ok"
    for text, problem in [('{"order_id": "A1", "amount": 79}', None),
                          ('{"order_id": "A1"}', "missing amount (it takes: order_id, amount)"),
                          ('{"order_id": "A1", "amount": 1, "amount": 2}', '"amount" is given twice: say each once'),
                          ('{"order_id": "A1', "the text is not valid JSON (Unterminated string starting at: "
                                               "line 1 column 14 (char 13))")]:
        assert refund.problem(text) == problem
        assert refund.read(text) == ({"order_id": "A1", "amount": 79} if problem is None else
                                     Message(TOOL, f"error: bad arguments for refund: {problem}", "refund", error=True))


@pytest.mark.parametrize("args, problem", [
    ({"order_id": "A1", "amount": 79}, None),
    ({"order_id": "A1", "amount": 79.5, "notify": False}, None),
    ({"amount": 79}, "missing order_id (it takes: order_id, amount, notify)"),
    ({"order_id": "A1", "amount": 79, "bonus": 1}, "unexpected bonus (it takes: order_id, amount, notify)"),
    ({"order_id": 1234, "amount": 79}, "order_id must be string, not int 1234"),
    ({"order_id": "A1", "amount": "79"}, "amount must be number, not str '79'"),
    ({"order_id": "A1", "amount": 79, "notify": 1}, "notify must be boolean, not int 1"),
    ({"order_id": "A1", "amount": True}, "amount must be number, not bool True"),
    ([1, 2], "the arguments must be object, not list [1, 2]"),
    ("x", "the arguments must be object, not str 'x'"),
])
def test_arguments_are_checked_against_the_schema(args, problem):
    @as_tool
    def refund(order_id: str, amount: float, notify: bool = True) -> str:
        """Refund an order."""
        return "ok"
    read = refund.read(json.dumps(args))
    if problem is None:
        assert read == args and refund.run(json.dumps(args)) == Message(TOOL, "ok", "refund")
    else:
        assert read == Message(TOOL, f"error: bad arguments for refund: {problem}", "refund", error=True)
        assert refund.run(json.dumps(args)) == read


def test_nested_lists_and_literals_are_checked_item_by_item():
    @as_tool
    def tag(labels: list[int], level: Literal["low", "high"] = "low") -> str:
        """Tag something."""
        return "ok"
    assert tag.read('{"labels": [1, 2]}') == {"labels": [1, 2]}
    assert tag.read('{"labels": [1, "2"]}').content.endswith("labels[1] must be integer, not str '2'")
    assert tag.read('{"labels": [], "level": "mid"}').content.endswith(
        "level must be one of ['low', 'high'], not 'mid'")
    assert tag.read('{"labels": [true]}').content.endswith("labels[0] must be integer, not bool True")


def test_an_optional_literal_takes_none_too():
    @as_tool
    def mood(level: Literal["low", "high"] | None = None) -> str:
        """Set a mood."""
        return "ok"
    assert mood.schema["properties"]["level"] == {"type": ["string", "null"], "enum": ["low", "high", None]}
    assert mood.read('{"level": null}') == {"level": None} and mood.read('{"level": "mid"}').error


def test_a_tool_that_returns_a_whole_note_keeps_its_notes_and_its_flag_under_its_own_name():
    inner = (Message(USER, "what is A1?"), Message(TOOL, "no such order", "look_up", error=True))
    helper = Tool("helper", "Ask the helper.", lambda request: Message(TOOL, "gave up", notes=inner, error=True))
    assert helper.run('{"request": "A1?"}') == Message(TOOL, "gave up", "helper", notes=inner, error=True)


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


# --- Action: a move, frozen ----------------------------------------------------------------

def test_an_action_keeps_its_arguments_as_json_text_so_it_stays_frozen():
    action = Action("refund", {"order_id": "A1", "amount": 79}, "it qualifies")
    assert action.args == '{"order_id": "A1", "amount": 79}'
    assert action == Action("refund", '{"order_id": "A1", "amount": 79}', "it qualifies")
    assert hash(action) == hash(Action("refund", {"order_id": "A1", "amount": 79}, "it qualifies"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        action.tool = "other"
    assert Action("refund", "{broken").args == "{broken"  # kept raw: the loop reports it


def test_an_action_with_no_tool_is_a_brain_saying_it_has_no_move():
    assert Action(None, reasoning="cut off").tool is None


@pytest.mark.parametrize("make, says", [
    (lambda: Action(5, {}), "an Action's tool is a string"),
    (lambda: Action("t", {}, None), "an Action's tool is a string"),
    (lambda: Action("t", {"when": object()}), "not JSON serializable"),
])
def test_a_malformed_action_is_refused_when_it_is_made(make, says):
    with pytest.raises(TypeError, match=says):
        make()


# --- brains that need no model ---------------------------------------------------------------

def test_a_script_counts_the_moves_in_the_notebook_so_it_resumes_in_place():
    brain = scripted(Action("a"), Action(None, reasoning="?"), Action("b"))
    ctx = Context((Message(USER, "go"), Message(ASSISTANT, "", "x", "a", "{}"), Message(TOOL, "1", "a"),
                   Message(ASSISTANT, "?", "x", error=True)))
    assert brain(ctx, {}) == Action("b")
    assert actions(ctx) == [Action("a"), Action(None, reasoning="?")]
    with pytest.raises(IndexError, match="the script is over: the run asked for move 4"):
        brain(ctx.add(Message(ASSISTANT, "", "x", "b", "{}"), Message(TOOL, "2", "b")), {})
    with pytest.raises(TypeError, match="scripted takes Actions"):
        scripted("look_up_order")


def test_in_jupyter_a_context_shows_as_its_story():
    pretty = pytest.importorskip("IPython.lib.pretty")
    ctx = Context().add(Message(USER, "hi"), Message(ASSISTANT, "say hello", name="bot", tool="final_answer",
                                                     args='{"answer": "hello"}'),
                        Message(TOOL, "hello", name="final_answer"))
    assert pretty.pretty(ctx) == 'you asked: "hi"\n  bot thought: say hello\n    -> final_answer returned: hello'
