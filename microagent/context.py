"""A Context is the office notebook: every note of a run, in order.

The one rule: you never erase a page. Context is frozen; `add` hands back a new
notebook with the notes appended and leaves the old one untouched. Because the
notebook is the whole state of a run, it saves to JSON and loads back exactly,
in another process or next week, and the run goes on from there.

It does not decide anything or run anything, and it does not check that the
notes make a sensible story (a run's rules are checked on top, in
microagent.invariants).
"""

import json
import re
from dataclasses import dataclass, fields

from microagent.message import ASSISTANT, Message

FORMAT = "microagent.context/1"  # written into every saved notebook, checked on load


@dataclass(frozen=True)
class Context:
    """The notebook: a tuple of Messages. `add` returns a new notebook; `to_json` saves it."""

    messages: tuple[Message, ...] = ()

    def __post_init__(self):
        # subtle: only the tuple is checked here, not each note, or every add would cost a
        # pass over the whole notebook; add() checks the notes it is given
        if not isinstance(self.messages, tuple):
            raise TypeError("a Context holds a tuple of Messages: Context((note, ...)), or Context().add(note)")

    def add(self, *msgs: Message) -> "Context":
        """A new notebook with `msgs` appended; this one is left as it was."""
        if not all(isinstance(m, Message) for m in msgs):
            raise TypeError("Context.add takes Messages, one per argument: ctx.add(note) or ctx.add(*notes)")
        return Context(self.messages + msgs)

    def last(self) -> Message | None:
        return self.messages[-1] if self.messages else None

    @property
    def pending(self) -> Message | None:
        """The last decision if nothing has answered it yet: a run paused for approval."""
        for m in reversed(self.messages):
            if m.is_decision:
                return m
            if not m.is_verdict:  # only a verdict may sit between
                return None
        return None

    def unfolded(self) -> list[Message]:
        """Every note in order, with the notes a summary folded away (microagent.memory) back in place."""
        return _unfold(self.messages)

    def __iter__(self):
        return iter(self.messages)

    def __len__(self) -> int:
        return len(self.messages)

    def __getitem__(self, i):
        return self.messages[i]

    def to_json(self) -> str:
        """The notebook as JSON text, which always saves as UTF-8 and loads back with from_json.

        One thing does not come back as it went: a high and a low surrogate side by side
        (two halves of one character, kept apart) load back as the one character they spell.
        """
        text = json.dumps({"format": FORMAT, "messages": [_dump(m) for m in self]}, ensure_ascii=False)
        # subtle: a lone surrogate (a file name read with surrogateescape, say) can't be written
        # as UTF-8; as a \u escape it can, and it loads back as the same character
        return re.sub("[\ud800-\udfff]", lambda c: f"\\u{ord(c.group()):04x}", text)

    @classmethod
    def from_json(cls, text: str | bytes) -> "Context":
        """Load a saved notebook; anything malformed is a ValueError that says where."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError, RecursionError) as e:  # RecursionError: absurdly deep nesting
            raise ValueError(f"not a saved Context: the text is not valid JSON ({e})") from None
        if not (isinstance(data, dict) and data.get("format") == FORMAT and isinstance(data.get("messages"), list)):
            raise ValueError(f'not a saved Context: expected {{"format": "{FORMAT}", "messages": [...]}}')
        return cls(tuple(_load(d, f"message {i}") for i, d in enumerate(data["messages"])))

    def _repr_pretty_(self, printer, cycle):
        # subtle: Jupyter shows a Context as its story. The story printer sits on
        # top of the core, so it is imported only here, when a notebook asks.
        from microagent.trace import story

        printer.text(story(self))


def _unfold(notes: tuple[Message, ...]) -> list[Message]:
    # an assistant's note that holds notes is a summary: read the notes it folded instead
    return [n for m in notes for n in (_unfold(m.notes) if m.role == ASSISTANT and m.notes else [m])]


def _dump(m: Message) -> dict:
    # only the fields that differ from their defaults, so a saved notebook reads easily
    d = {f.name: getattr(m, f.name) for f in fields(m) if getattr(m, f.name) != f.default}
    if m.notes:
        d["notes"] = [_dump(n) for n in m.notes]
    return d


def _load(d: dict, where: str) -> Message:
    notes = d.get("notes", []) if isinstance(d, dict) else []
    if not isinstance(notes, list):
        raise ValueError(f"not a saved Context: {where} has notes that are not a list")
    inner = tuple(_load(n, f"{where}, note {j}") for j, n in enumerate(notes))
    try:
        return Message(**{**d, "notes": inner})
    except (TypeError, ValueError) as e:  # not an object, a field missing or unknown, a role that does not exist
        raise ValueError(f"not a saved Context: {where}: {e}") from None
