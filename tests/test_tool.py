"""Tool: a coworker that knows its own arguments, checks every call against its schema, and
reads JSON from outside strictly."""

import functools
import json
from typing import Literal

import pytest

from microagent.agent import DONE, Agent
from microagent.message import TOOL, USER, Message
from microagent.policy import Action
from microagent.schema import as_tool
from microagent.script import scripted
from microagent.tool import Tool, final_answer, read_json

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


@pytest.mark.parametrize("name", ["two words", "", "a.b", 7, None, "1abc", "a\nb"])
def test_a_tools_name_is_a_word(name):
    with pytest.raises(ValueError, match="a tool's name is a word"):
        Tool(name, "x", lambda: "")


def test_a_tools_name_may_hold_a_hyphen_as_mcp_tools_do():
    assert Tool("get-sum", "Add.", lambda a, b: a + b).name == "get-sum"


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


def test_a_tool_that_returns_a_whole_note_keeps_its_notes_and_its_flag_under_its_own_name():
    inner = (Message(USER, "what is A1?"), Message(TOOL, "no such order", "look_up", error=True))
    helper = Tool("helper", "Ask the helper.", lambda request: Message(TOOL, "gave up", notes=inner, error=True))
    assert helper.run('{"request": "A1?"}') == Message(TOOL, "gave up", "helper", notes=inner, error=True)
