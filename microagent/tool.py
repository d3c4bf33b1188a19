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
(or a whole tool note, when it has more to report, like an agent used as a tool),
so a function no call by keyword can fit is refused when the Tool is made.
`run(args)` is how the loop calls it: JSON text in, a tool note out, and every
failure (arguments that don't fit, an exception, a result that can't become text)
an error note; `problem(args)` says in words what is wrong with the arguments.

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
    fn: Callable
    terminal: bool = False        # calling it ends the run (the final answer)
    needs_approval: bool = False  # the run pauses before each call until a human decides
    schema: dict | None = None    # JSON Schema of fn's arguments (None: read off fn)

    def __post_init__(self):
        """Refuse a tool no call can reach; read the schema off fn if none is given."""
        if not (type(self.name) is str and self.name.replace("-", "").isidentifier()):
            raise ValueError(f"a tool's name is a word like look_up_order (letters, "
                             f"digits, _ or -), not {self.name!r}")
        if inspect.iscoroutinefunction(self.fn):  # a call would hand back a coroutine
            raise TypeError(f"{self.name}: a Tool can't await an async def; wrap it "
                            "with microagent.parallel.async_tool, which runs it for you")
        params = inspect.signature(self.fn).parameters.values()
        for p in params:  # a call is by keyword: *args and (x, /) can't be given one
            if "KEYWORD" not in p.kind.name:  # POSITIONAL_ONLY or VAR_POSITIONAL
                raise TypeError(f"{self.name}: a tool takes named parameters, not {p}")
        if self.schema is None:  # any value for a parameter; required if no default
            self.schema = {"type": "object", "properties": {p.name: {} for p in params},
                           "required": [p.name for p in params if p.default is p.empty]}

    def __call__(self, **kwargs) -> str | Message:
        """fn's result as text (None: "None"; the Tool adds no words), or its note."""
        out = self.fn(**kwargs)
        return out if isinstance(out, Message) else str(out)

    def run(self, args: str) -> Message:
        """Call the tool with a decision's arguments (JSON text): its note."""
        if isinstance(kwargs := self.read(args), Message):  # they don't fit: it says why
            return kwargs
        try:  # subtle: str(out) too, as a result may not become text (10**5000 can't)
            out = self(**kwargs)
        except Exception as e:  # the tool's failure is news for the brain, not a crash
            return error_note(self.name, f"{self.name} failed: {type(e).__name__}: "
                                         f"{said_by(e)}")
        note = out if isinstance(out, Message) else Message(TOOL, out)
        return replace(note, role=TOOL, name=self.name)  # a whole note (an agent's) kept

    def problem(self, args: str) -> str | None:
        """What is wrong with a call's arguments (JSON text), in words; None: they fit."""
        try:
            return _mismatch(read_json(args), self.schema, "the arguments")
        except ValueError as e:  # not JSON we read
            return str(e)

    def read(self, args: str) -> dict | Message:
        """The arguments (JSON text) as a dict, or the note saying why they don't fit."""
        if problem := self.problem(args):
            return error_note(self.name, f"bad arguments for {self.name}: {problem}")
        return read_json(args)


def error_note(tool_name: str, problem: str) -> Message:
    """A tool note that says what went wrong, flagged so that code can tell."""
    return Message(TOOL, f"error: {problem}", tool_name, error=True)


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
    if math.isfinite(number := float(text)):  # not NaN, Infinity, or 1e999 (read as inf)
        return number
    raise ValueError(f"{text} is not a number JSON can hold")


# made once: json.loads(text, hooks) would make a new decoder on every call
_STRICT = json.JSONDecoder(object_pairs_hook=_once_each, parse_float=_finite,
                           parse_constant=_finite)


def _mismatch(value, schema, at):
    """What is wrong with a JSON value (`at` names it) for a schema; None if it fits."""
    is_a = JSON_TYPES.get(type(value), "null")  # type(), not isinstance(): True is an int
    kinds = schema.get("type", is_a)  # no type given: any type
    if isinstance(kinds, str):
        kinds = [kinds]
    if is_a not in kinds and not (is_a == "integer" and "number" in kinds):
        return f"{at} must be {' or '.join(kinds)}, not {type(value).__name__} {value!r}"
    # True == 1 == 1.0 in Python, so an enum compares reprs, which tell them apart
    if "enum" in schema and repr(value) not in map(repr, schema["enum"]):
        return f"{at} must be one of {schema['enum']}, not {value!r}"
    if is_a == "object" and "properties" in schema:  # the arguments themselves
        props = schema["properties"]
        missing = [n for n in schema.get("required", ()) if n not in value]
        if odd := missing or [n for n in value if n not in props]:
            return (f"{'missing' if missing else 'unexpected'} {', '.join(odd)} "
                    f"(it takes: {', '.join(props) or 'nothing'})")
        for n, v in value.items():  # the first problem inside, if any
            if problem := _mismatch(v, props[n], n):
                return problem
    elif is_a == "array" and "items" in schema:
        for i, v in enumerate(value):
            if problem := _mismatch(v, schema["items"], f"{at}[{i}]"):
                return problem


JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean",
              dict: "object", list: "array"}  # Python -> JSON type, None: null

final_answer = Tool("final_answer",
                    "Give the final answer to the person who asked; this ends the run.",
                    lambda answer: answer, terminal=True,
                    schema={"type": "object", "required": ["answer"],
                            "properties": {"answer": {"type": "string"}}})
