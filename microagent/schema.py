"""A Python function as a Tool: the JSON Schema of its arguments, read off its hints.

    @as_tool
    def issue_refund(order_id: str, amount: float) -> str:
        '''Refund an amount in dollars to the card the order was paid with.'''

makes a Tool named issue_refund, described by its docstring, whose schema (what a
language model is shown, and what the loop checks every call against) says it takes
a string order_id and a number amount. This is the magic behind every framework's
`@tool` decorator, in one page; `described(tool)` reads a description of each
argument out of the docstring's `Args:`, for a model to be shown. The one rule: a
hint is read when the tool is made, or refused then. What it leaves out: the fields
of a dict (any JSON object passes), defaults, and the rest of JSON Schema; give
`Tool(..., schema=...)` yourself.
"""

import inspect
import re
import types
import typing
from collections.abc import Callable
from typing import Literal

from microagent.tool import JSON_TYPES, Tool

ARGS = ("Args:", "Arguments:", "Parameters:")  # docstring sections that name parameters
SECTIONS = ARGS + ("Returns:", "Raises:", "Examples:", "Example:", "Note:")


def as_tool(fn=None, *, name=None, description=None, terminal=False,
            needs_approval=False):
    """A function as a Tool: `@as_tool`, or `@as_tool(name=..., needs_approval=True)`.

    The docstring is the tool's description, whole (`described` reads a Google-style
    `Args:` section out of it).
    """
    def make(fn):
        if not inspect.isfunction(fn):
            raise TypeError(f"as_tool makes a Tool from a function, not {fn!r}: "
                            "put @as_tool above a def")
        about = description or inspect.getdoc(fn)
        if not about:
            raise ValueError(f"the tool {fn.__name__} needs a description: "
                             "give it a docstring")
        return Tool(name or fn.__name__, about, fn, terminal, needs_approval,
                    schema_of(fn))
    return make if fn is None else make(fn)


def schema_of(fn: Callable) -> dict:
    """The JSON Schema of fn's keyword arguments; those with no default are required.

    It reads str, int, float, bool, list[...], dict, Literal[...] and `X | None` (no
    hint: any value); any other hint (a class of your own, a Callable) is a TypeError
    at the def, never a guess when a model calls.

    >>> def refund(order_id: str, amount: float, notify: bool = True): ...
    >>> schema_of(refund)["properties"]["amount"], schema_of(refund)["required"]
    ({'type': 'number'}, ['order_id', 'amount'])
    """
    try:
        hints = typing.get_type_hints(fn)
    except Exception as e:  # a hint naming something not imported, or not a function
        raise TypeError(f"{fn!r}: its type hints can't be read ({e}); a tool's function "
                        "is a plain def with hints like str or int") from None
    props, required = {}, []
    for p in inspect.signature(fn).parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"{fn.__name__}: a tool takes named parameters only, "
                            f"not {p}")
        props[p.name] = _schema(hints.get(p.name), f"{fn.__name__}({p.name})")
        if p.default is p.empty:
            required.append(p.name)
    return {"type": "object", "properties": props, "required": required}


def described(tool: Tool) -> tuple[str, dict]:
    """A tool's summary, and its schema with a description for each parameter in `Args:`.

    A docstring with no `Args:` (or `Returns:`, ...) section is the summary, whole.
    (The chat wire format, microagent.chat, shows a model what this says.)

    >>> @as_tool
    ... def refund(order_id: str, amount: float) -> str:
    ...     '''Refund an order.
    ...
    ...     Args:
    ...         order_id: The order's id,
    ...             like A1234.
    ...         amount (float): In dollars.
    ...     '''
    >>> summary, schema = described(refund)
    >>> summary, schema["properties"]["order_id"]["description"]
    ('Refund an order.', "The order's id, like A1234.")
    """
    lines = tool.description.splitlines()
    heads = [i for i, line in enumerate(lines) if line.strip() in SECTIONS]
    heads.append(len(lines))
    if len(heads) == 1:
        return tool.description, tool.schema
    props, said, name = tool.schema["properties"], {}, None  # said: parameter -> words
    for head, end in zip(heads[:-1], heads[1:], strict=True):
        if lines[head].strip() not in ARGS:
            continue
        for line in lines[head + 1:end]:
            # "name: what it is", or "name (type): what it is"
            found = re.match(r"\s+(\w+)\s*(?:\([^)]*\))?:\s*(.*)", line)
            if found and found.group(1) in props:
                name = found.group(1)
                said[name] = found.group(2)
            elif name is not None and line.strip():  # a description goes on below
                said[name] += " " + line.strip()
    summary = "\n".join(lines[:heads[0]]).strip() or tool.description
    props = {n: {**s, "description": said[n]} if n in said else s
             for n, s in props.items()}
    return summary, {**tool.schema, "properties": props}


def _schema(hint, where: str) -> dict:
    origin, inner = typing.get_origin(hint), typing.get_args(hint)
    if hint is None:  # no annotation: anything goes
        return {}
    if origin is Literal:
        kinds = {JSON_TYPES.get(type(v)) for v in inner}
        if len(kinds) == 1 and None not in kinds:  # values of one JSON type: say which
            return {"type": kinds.pop(), "enum": list(inner)}
        return {"enum": list(inner)}
    optional = type(None) in inner and len(inner) == 2
    if origin in (typing.Union, types.UnionType) and optional:
        # X | None: X, or null
        schema = _schema(next(h for h in inner if h is not type(None)), where)
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
