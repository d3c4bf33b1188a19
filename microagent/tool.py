"""A Tool is a coworker the assistant can call.

It has a name so the brain can ask for it, a description so the brain knows
what it is for, the function that does the work, and two flags: whether
calling it ends the job (the final answer is such a tool) and whether a human
must approve each call first. It also knows the JSON Schema of its arguments:
what a language model is shown, and what every call is checked against before
the function runs, so arguments that don't fit never reach it.

    Tool("look_up_order", "Look up an order by its id", look_up_order)

reads the schema off the function's parameters: their names, and which ones
must be given. `@as_tool` (microagent.schema) reads their types from the type
hints too, which a language model needs; or pass `schema=` yourself.

The one rule: a tool is called with keyword arguments and hands back a string
(or a whole tool note, when it has more to report, like an agent used as a tool).
`run(args)` is how the loop calls it: JSON text in, a tool note out, and every
failure (arguments that don't fit, an exception) an error note.

It checks the schema's types, required and unexpected names, enums and the items
of arrays; not the rest of JSON Schema. It does not coerce ("3" is not an int).
"""

import inspect
import json
import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from microagent.message import TOOL, Message


@dataclass(eq=False)  # two tools are the same coworker only if they are the same object
class Tool:
    """A coworker: its name, what it is for, the function `fn`, two flags and a schema."""

    name: str
    description: str
    fn: Callable[..., object]
    terminal: bool = False        # calling it ends the run (the final answer)
    needs_approval: bool = False  # the run pauses before each call until a human decides
    schema: dict | None = None    # JSON Schema of fn's arguments (None: read off fn)

    def __post_init__(self):
        if not (isinstance(self.name, str) and self.name.replace("-", "").isidentifier()):
            raise ValueError(f"a tool's name is a word like look_up_order (letters, "
                             f"digits, _ or -), not {self.name!r}")
        if self.schema is None:  # any value for a parameter; required if no default
            params = inspect.signature(self.fn).parameters.values()
            self.schema = {"type": "object", "properties": {p.name: {} for p in params},
                           "required": [p.name for p in params if p.default is p.empty]}

    def __call__(self, **kwargs) -> str | Message:
        out = self.fn(**kwargs)
        return out if isinstance(out, Message) else str(out)

    def run(self, args: str) -> Message:
        """Call the tool with a decision's arguments (JSON text): its note."""
        kwargs = self.read(args)
        if isinstance(kwargs, Message):  # they don't fit: the note says why
            return kwargs
        try:
            out = self.fn(**kwargs)
        except Exception as e:  # the tool's failure is news for the brain, not a crash
            failed = f"{self.name} failed: {type(e).__name__}: {said_by(e)}"
            return error_note(self.name, failed)
        if isinstance(out, Message):  # a whole note (from an agent used as a tool): kept
            return replace(out, role=TOOL, name=self.name)
        return Message(TOOL, str(out), self.name)

    def read(self, args: str) -> dict | Message:
        """The arguments (JSON text) as a dict, or the note saying why they don't fit."""
        try:
            kwargs = read_json(args)
            problem = _mismatch(kwargs, self.schema, "the arguments")
        except ValueError as e:
            problem = str(e)
        if problem:
            return error_note(self.name, f"bad arguments for {self.name}: {problem}")
        return kwargs


def error_note(tool_name: str, problem: str) -> Message:
    """A tool note that says what went wrong, flagged so that code can tell."""
    return Message(TOOL, "error: " + problem, tool_name, error=True)


def said_by(e: Exception) -> str:
    """What an exception says, even one whose own words raise."""
    try:
        return str(e)
    except Exception:  # an exception that can't even say what it is
        return "(it could not say why)"


def read_json(text: str):
    """JSON from outside, read strictly: each key once, finite numbers, sane nesting.

    A reader that kept the last of two keys would let a human be shown one amount
    while another is paid, so a key given twice is a ValueError, never a guess.

    >>> read_json('{"amount": 1, "amount": 9999}')
    Traceback (most recent call last):
    ...
    ValueError: "amount" is given twice: say each once
    """
    try:
        return _STRICT.decode(text)
    except RecursionError:  # "[" * 100000: nothing we read is that deep
        raise ValueError("the JSON is nested too deeply to read") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"the text is not valid JSON ({e})") from None


def _once_each(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f'"{key}" is given twice: say each once')
        seen[key] = value
    return seen


def _finite(text):
    if not math.isfinite(number := float(text)):  # NaN, Infinity, and 1e999 (read as inf)
        raise ValueError(f"{text} is not a number JSON can hold")
    return number


# made once: json.loads(text, hooks) would make a new decoder on every call
_STRICT = json.JSONDecoder(object_pairs_hook=_once_each, parse_float=_finite,
                           parse_constant=_finite)


def _mismatch(value, schema, where):
    """What is wrong with a JSON value for a schema, in words, or None if it fits."""
    kinds = schema.get("type", ())
    kinds = (kinds,) if isinstance(kinds, str) else kinds
    is_a = JSON_TYPES.get(type(value))  # type(), not isinstance(): True is an int here
    if kinds and is_a not in kinds and not (is_a == "integer" and "number" in kinds):
        return (f"{where} must be {' or '.join(kinds)}, "
                f"not {type(value).__name__} {value!r}")
    # True == 1 == 1.0 in Python, so an enum compares the types too
    if "enum" in schema and not any(type(v) is type(value) and v == value
                                    for v in schema["enum"]):
        return f"{where} must be one of {schema['enum']}, not {value!r}"
    if is_a == "object" and "properties" in schema:  # the arguments themselves
        props = schema["properties"]
        missing = [n for n in schema.get("required", ()) if n not in value]
        if missing or value.keys() - props.keys():
            odd = missing or [n for n in value if n not in props]
            return (f"{'missing' if missing else 'unexpected'} {', '.join(odd)} "
                    f"(it takes: {', '.join(props) or 'nothing'})")
        for n, v in value.items():  # the first problem inside, if any
            if problem := _mismatch(v, props[n], n):
                return problem
    elif is_a == "array" and "items" in schema:
        for i, v in enumerate(value):
            if problem := _mismatch(v, schema["items"], f"{where}[{i}]"):
                return problem
    return None


JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean",
              dict: "object", list: "array", type(None): "null"}  # Python -> JSON type

final_answer = Tool("final_answer",
                    "Give the final answer to the person who asked; this ends the run.",
                    lambda answer: answer, terminal=True,
                    schema={"type": "object", "required": ["answer"],
                            "properties": {"answer": {"type": "string"}}})
