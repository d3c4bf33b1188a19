"""Saving a notebook: JSON text out, and the same notebook back in.

    text = to_json(ctx)          # str; write it to a file, a database, a queue
    ctx = from_json(text)        # another process, next week: the run goes on

The one rule: it loads back equal, note for note, `from_json(to_json(ctx)) == ctx`.
That is rule one made real: the notebook is the whole state of a run, and nothing
else needs saving. A saved notebook is a file from outside, so it is read strictly.
It checks the format, not the story: a notebook that breaks the rules of a run
loads, and `microagent.invariants.check` says so.
"""

import json
import re
from dataclasses import fields

from microagent.context import Context
from microagent.message import Message
from microagent.tool import read_json

FORMAT = "microagent.context/1"  # written into every saved notebook, checked on load


def to_json(ctx: Context) -> str:
    """The notebook as JSON text, which always saves as UTF-8; from_json loads it back.

    A note holds only plain values (strings, None, a flag, a tuple of notes), so the
    notebook saves as one JSON object with a list of notes, each written with only the
    fields that differ from their defaults. One thing does not come back exactly as it
    went: the two halves of one character (a lone high and low surrogate side by side)
    load back as the character they spell.

    >>> to_json(Context((Message("user", "hi"),)))
    '{"format": "microagent.context/1", "messages": [{"role": "user", "content": "hi"}]}'
    """
    if not isinstance(ctx, Context):
        raise TypeError(f"to_json saves a Context, not {type(ctx).__name__}")
    text = json.dumps({"format": FORMAT, "messages": [_dump(m) for m in ctx]},
                      ensure_ascii=False)
    # a lone surrogate (half an emoji, a file name read with surrogateescape) can't be
    # UTF-8; as a \u escape it can
    return re.sub("[\ud800-\udfff]", lambda c: f"\\u{ord(c.group()):04x}", text)


def from_json(text: str | bytes) -> Context:
    """Load a saved notebook; anything malformed is a ValueError that says where.

    Read strictly: a key given twice, a number JSON cannot hold, absurd nesting, an
    unknown field, each is a ValueError.

    A byte order mark before the JSON (some editors start a UTF-8 file with one) is
    skipped, in text or in bytes.
    """
    try:
        text = text.decode() if isinstance(text, bytes) else text
        data = read_json(text.removeprefix("\ufeff") if isinstance(text, str) else text)
        if not (isinstance(data, dict) and data.get("format") == FORMAT
                and isinstance(data.get("messages"), list)):
            raise ValueError(f'expected {{"format": "{FORMAT}", "messages": [...]}}')
        return Context(tuple(_load(d, f"message {i}")
                             for i, d in enumerate(data["messages"])))
    except (TypeError, ValueError) as e:  # UnicodeDecodeError is a ValueError too
        raise ValueError(f"not a saved Context: {e}") from None


def _dump(m: Message) -> dict:
    # only the fields that differ from their defaults, so a saved notebook reads easily
    d = {f.name: getattr(m, f.name) for f in fields(m) if getattr(m, f.name) != f.default}
    return {**d, "notes": [_dump(n) for n in m.notes]} if m.notes else d


def _load(d, where: str) -> Message:
    notes = d.get("notes", ()) if isinstance(d, dict) else ()
    if not isinstance(notes, (list, tuple)):
        raise ValueError(f"{where} has notes that are not a list")
    inner = tuple(_load(n, f"{where}, note {j}") for j, n in enumerate(notes))
    try:
        return Message(**{**d, "notes": inner})
    except (TypeError, ValueError) as e:  # not an object, a missing or bad field or role
        raise ValueError(f"{where}: {e}") from None
