"""A Tool is a coworker the assistant can call.

It has a name so the brain can ask for it, a description so the brain knows
what it is for, the function that does the work, the JSON Schema of that
function's arguments, and two flags: whether calling it ends the job (the final
answer is such a tool) and whether a human must approve each call first.

The schema is what a language model is shown, and what every call is checked
against before the function runs: arguments that don't fit never reach it.
`as_tool` (microagent.schema) reads the schema off a function's type hints, so
a tool is usually one decorated function.

The one rule: a tool is called with keyword arguments and hands back a string
(or a whole tool note, when it has more to report, like an agent used as a tool).

It checks the schema's types, required and unexpected names, enums and the items
of arrays; not the rest of JSON Schema. It does not coerce ("3" is not an int).
"""

import json
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from microagent.message import Message


@dataclass(eq=False)  # two tools are the same coworker only if they are the same object
class Tool:
    """A coworker: its name, what it is for (`description`), the function `fn`, and two flags.

    `schema` is the JSON Schema of fn's arguments, what a model is shown; `check(args)`
    says what is wrong with arguments for it. `terminal`: calling the tool ends the run
    (the final answer). `needs_approval`: the run pauses before each call for a human.
    """

    name: str
    description: str
    fn: Callable[..., object]
    schema: dict                  # {"type": "object", "properties": {name: schema}, "required": [name]}
    terminal: bool = False        # calling it ends the run (the final answer)
    needs_approval: bool = False  # the run pauses before it until a human decides

    def __post_init__(self):
        if not (isinstance(self.name, str) and self.name.isidentifier()):
            raise ValueError(f"a tool's name must be a word like look_up_order, not {self.name!r}")

    def __call__(self, **kwargs) -> str | Message:
        out = self.fn(**kwargs)
        return out if isinstance(out, Message) else str(out)

    def check(self, args: dict) -> str | None:
        """What is wrong with these arguments for this tool, or None if they fit."""
        return _mismatch(args, self.schema, "the arguments")


def read_args(text: str) -> dict:
    """A decision's arguments, from JSON text to a dict; a ValueError says what is wrong.

    >>> read_args('{"amount": 1, "amount": 9999}')
    Traceback (most recent call last):
    ...
    ValueError: the arguments give "amount" twice: say each once
    """
    try:
        args = _STRICT.decode(text)
    except RecursionError:  # "[" * 100000: no tool takes that, and no reader should crash on it
        raise ValueError("the arguments are nested too deeply to read") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"the arguments are not valid JSON ({e})") from None
    if not isinstance(args, dict):
        raise ValueError("the arguments must be a JSON object")
    return args


def _once_each(pairs: list[tuple[str, object]]) -> dict:
    # subtle: for a key given twice JSON keeps the last, so a human shown the first
    # would approve one amount while another is paid. Refuse the doubt instead.
    args = dict(pairs)
    if len(args) < len(pairs):
        twice = next(key for key, n in Counter(key for key, _ in pairs).items() if n > 1)
        raise ValueError(f'the arguments give "{twice}" twice: say each once')
    return args


_STRICT = json.JSONDecoder(object_pairs_hook=_once_each)  # made once: json.loads(text, hook) makes one a call


def _mismatch(value, schema: dict, where: str) -> str | None:
    """What is wrong with a JSON value for a schema, in words, or None if it fits."""
    # subtle: True == 1 == 1.0 in Python, so an enum compares the type too
    if "enum" in schema and (type(value), value) not in [(type(v), v) for v in schema["enum"]]:
        return f"{where} must be one of {schema['enum']}, not {value!r}"
    kinds = schema.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if kinds and not any(type(value) in _PY[k] for k in kinds):  # subtle: True is an int in Python, not in JSON
        return f"{where} must be {' or '.join(kinds)}, not {type(value).__name__} {value!r}"
    if isinstance(value, float) and not math.isfinite(value):  # JSON's 1e999 reads as inf: no amount is that
        return f"{where} must be a finite number, not {value!r}"
    if isinstance(value, dict) and "properties" in schema:  # the arguments themselves
        props = schema["properties"]
        missing = [n for n in schema.get("required", []) if n not in value]
        unexpected = [n for n in value if n not in props]
        takes = f"(it takes: {', '.join(props) or 'nothing'})"
        if missing:
            return f"missing {', '.join(missing)} {takes}"
        if unexpected:
            return f"unexpected {', '.join(unexpected)} {takes}"
        return next(filter(None, (_mismatch(v, props[n], n) for n, v in value.items())), None)  # the first, if any
    if isinstance(value, list) and "items" in schema:
        return next(filter(None, (_mismatch(v, schema["items"], f"{where}[{i}]") for i, v in enumerate(value))), None)
    return None


_PY = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,), "object": (dict,),
       "array": (list,), "null": (type(None),)}  # JSON type -> the exact Python types it reads as

final_answer = Tool(
    "final_answer", "Give the final answer to the person who asked; this ends the run.", lambda answer: answer,
    {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}, terminal=True)
