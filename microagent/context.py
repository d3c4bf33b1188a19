"""A Context is the office notebook: every note of a run, in order.

The one rule: you never erase a page. Context is frozen; `add` hands back a new
notebook with the notes appended and leaves the old one untouched. Because it
holds only Messages, which hold only plain values, the notebook is the whole
state of a run: save it (microagent.saving), load it in another process next
week, hand it to the same agent, and the run goes on from there.

It does not decide anything or run anything, and it does not check that the
notes make a sensible story (that is microagent.invariants).
"""

from dataclasses import dataclass

from microagent.message import Message


@dataclass(frozen=True)
class Context:
    """The notebook: a tuple of Messages. `add` returns a new notebook with more notes."""

    messages: tuple[Message, ...] = ()

    def __post_init__(self):
        # only the tuple is checked here, not each note, or every add would cost a pass
        # over the whole notebook; add() checks the notes it is given
        if not isinstance(self.messages, tuple):
            raise TypeError("a Context holds a tuple of Messages: Context((note, ...)), "
                            "or Context().add(note)")

    def add(self, *msgs: Message) -> "Context":
        """A new notebook with `msgs` appended; this one is left as it was."""
        for m in msgs:
            if not isinstance(m, Message):
                raise TypeError("Context.add takes Messages, one per argument: "
                                "ctx.add(note), or ctx.add(*notes)")
        return Context(self.messages + msgs)

    def last(self) -> Message | None:
        return self.messages[-1] if self.messages else None

    def __iter__(self):
        return iter(self.messages)

    def __len__(self):
        return len(self.messages)

    def __getitem__(self, i):
        return self.messages[i]

    def _repr_pretty_(self, printer, cycle):
        # Jupyter shows a Context as its story. The story printer sits on top of the
        # core, so it is imported only here, when a notebook asks.
        from microagent.trace import story

        printer.text(story(self))
