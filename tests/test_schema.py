"""schema: a tool's arguments read off a function's type hints, and the @as_tool decorator."""

import json
from typing import Literal

import pytest

from microagent.schema import as_tool, schema_of
from microagent.tool import final_answer

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


def test_an_optional_literal_takes_none_too():
    @as_tool
    def mood(level: Literal["low", "high"] | None = None) -> str:
        """Set a mood."""
        return "ok"
    assert mood.schema["properties"]["level"] == {"type": ["string", "null"], "enum": ["low", "high", None]}
    assert mood.read('{"level": null}') == {"level": None} and mood.read('{"level": "mid"}').error


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
