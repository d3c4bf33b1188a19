"""A Tool is a coworker the assistant can call.

It has a name so the brain can ask for it, a description so the brain knows
what it is for, the function that does the work, and a flag that says whether
calling it ends the job (the final answer is such a tool). It knows the JSON
Schema of its own arguments, read off the function's signature and type hints;
that schema is what a language model is shown, and what every call is checked
against before the function runs.

The one rule: a tool is called with keyword arguments and hands back a string
(or a whole tool note, when it has more to report, like an agent used as a tool).

It supports the hints str, int, float, bool, list[...], dict, Literal[...] and
`X | None`; anything else is refused when the tool is made. It does not coerce
("3" is not an int) and it does not describe single parameters to the model.
"""

import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from microagent.message import Message

JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


@dataclass(eq=False)  # two tools are the same coworker only if they are the same object
class Tool:
    name: str
    description: str
    fn: Callable[..., object]
    terminal: bool = False        # calling it ends the run (the final answer)
    needs_approval: bool = False  # the run pauses before it until a human decides
    schema: dict = field(init=False, repr=False)

    def __post_init__(self):
        if not (isinstance(self.name, str) and self.name.isidentifier()):
            raise ValueError(f"a tool's name must be a word like look_up_order, not {self.name!r}")
        if not (isinstance(self.description, str) and callable(self.fn)):
            raise TypeError(f"the tool {self.name}: its description is a string and its fn a function")
        self.schema = schema_of(self.fn)

    def __call__(self, **kwargs) -> str | Message:
        out = self.fn(**kwargs)
        return out if isinstance(out, Message) else str(out)

    def check(self, args: dict) -> str | None:
        """What is wrong with these arguments for this tool, or None if they fit."""
        if not isinstance(args, dict):
            return "the arguments must be a JSON object"
        props, required = self.schema["properties"], self.schema["required"]
        missing = [n for n in required if n not in args]
        unexpected = [n for n in args if n not in props]
        takes = f"(it takes: {', '.join(props) or 'nothing'})"
        if missing:
            return f"missing {', '.join(missing)} {takes}"
        if unexpected:
            return f"unexpected {', '.join(unexpected)} {takes}"
        for name, value in args.items():
            problem = _mismatch(value, props[name], name)
            if problem:
                return problem
        return None


def as_tool(fn=None, *, name=None, description=None, terminal=False, needs_approval=False):
    """Make a function a Tool: bare `@as_tool`, or `@as_tool(name=..., terminal=True)`."""
    def make(fn):
        if not inspect.isfunction(fn):
            raise TypeError(f"as_tool makes a Tool from a function, not {fn!r}: put @as_tool above a def "
                            "(and give a name with @as_tool(name=...))")
        about = description or inspect.getdoc(fn)
        if not about:
            raise ValueError(f"the tool {fn.__name__} needs a description: give it a docstring")
        return Tool(name or fn.__name__, about, fn, terminal, needs_approval)
    return make if fn is None else make(fn)


def schema_of(fn: Callable) -> dict:
    """The JSON Schema of fn's keyword arguments.

    >>> def refund(order_id: str, amount: float, notify: bool = True): ...
    >>> schema_of(refund)["properties"]["amount"], schema_of(refund)["required"]
    ({'type': 'number'}, ['order_id', 'amount'])
    """
    try:
        hints = typing.get_type_hints(fn)
    except Exception as e:  # a hint naming something not imported, or not a plain function
        raise TypeError(f"{fn!r}: its type hints can't be read ({e}); a tool's function is a plain def "
                        "with hints like str or int") from None
    props, required = {}, []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"{fn.__name__}: a tool takes named parameters only, not {p}")
        props[p.name] = _schema(hints.get(p.name), f"{fn.__name__}({p.name})")
        if p.default is p.empty:
            required.append(p.name)
    return {"type": "object", "properties": props, "required": required}


def _schema(hint, where: str) -> dict:
    origin, inner = typing.get_origin(hint), typing.get_args(hint)
    if hint is None:  # no annotation: anything goes
        return {}
    if origin is Literal:
        kinds = {JSON_TYPES.get(type(v)) for v in inner}
        if len(kinds) == 1 and None not in kinds:  # all values of one JSON type: say which
            return {"type": kinds.pop(), "enum": list(inner)}
        return {"enum": list(inner)}
    if origin in (typing.Union, types.UnionType) and type(None) in inner and len(inner) == 2:
        schema = _schema(next(h for h in inner if h is not type(None)), where)  # X | None: X, or null
        if "type" in schema:
            schema["type"] = [schema["type"], "null"]
        if "enum" in schema:
            schema["enum"].append(None)
        return schema
    if origin is list and len(inner) == 1:
        return {"type": "array", "items": _schema(inner[0], where)}
    if hint in JSON_TYPES or origin is dict:
        return {"type": JSON_TYPES[origin or hint]}
    raise TypeError(f"{where}: the hint {hint!r} is not one a tool supports "
                    "(str, int, float, bool, list[...], dict, Literal[...], X | None)")


def _mismatch(value, schema: dict, where: str) -> str | None:
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} must be one of {schema['enum']}, not {value!r}"
    kinds = schema.get("type", [])
    kinds = [kinds] if isinstance(kinds, str) else kinds
    if kinds and not any(_is(value, k) for k in kinds):
        return f"{where} must be {' or '.join(kinds)}, not {type(value).__name__} {value!r}"
    for i, item in enumerate(value if isinstance(value, list) else []):
        problem = _mismatch(item, schema.get("items", {}), f"{where}[{i}]")
        if problem:
            return problem
    return None


def _is(value, kind: str) -> bool:
    if isinstance(value, bool):  # subtle: True is an int in Python, but not in JSON
        return kind == "boolean"
    return isinstance(value, _PY[kind])


_PY = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list,
       "null": type(None)}


@as_tool(terminal=True)
def final_answer(answer: str) -> str:
    """Give the final answer to the person who asked; this ends the run."""
    return answer
