"""A Message is one note in the office notebook.

Who wrote it (role), what it says (content), and which coworker or agent it
belongs to (name). A note that records a decision also says which tool was
called and with which arguments, so a run can be replayed from its notes alone.
A tool note that says something went wrong (an unknown tool, bad arguments, a
tool that raised, a denied approval) is marked `error=True`.

The one rule: a note is written in pen. Message is frozen and holds only
immutable values (strings, None, a flag, a tuple of other notes), so it hashes and
compares by value and can never change behind anyone's back.

It does not know about notebooks, tools or brains; those are built on top.
"""

from dataclasses import dataclass

SYSTEM, USER, ASSISTANT, TOOL = "system", "user", "assistant", "tool"
ROLES = (SYSTEM, USER, ASSISTANT, TOOL)


@dataclass(frozen=True)
class Message:
    """One note: who wrote it (role), what it says (content), and for a decision, the call it made.

    A run is made of four kinds of note, each named by a property below: a question,
    a decision, a human's verdict on a decision, and a tool's result. The system note
    and the assistant's own remarks (out of steps, a memory summary) are the others.
    """

    role: str                # one of ROLES
    content: str             # what the note says
    name: str | None = None  # a tool note: the tool; an assistant note: the agent; an approval: who
    tool: str | None = None  # a decision (or a human's verdict on one): the tool called
    args: str | None = None  # ... and its arguments, as JSON text (a dict would be mutable)
    notes: tuple["Message", ...] = ()  # a result: what an inner agent did; a summary: the notes it folded
    error: bool = False      # a tool note saying something went wrong: the brain reads why in content

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {self.role!r}")
        for field in ("content", "name", "tool", "args"):
            value = getattr(self, field)
            if not (isinstance(value, str) or (value is None and field != "content")):
                raise TypeError(f"a message's {field} must be a string, not {type(value).__name__}")
        if not isinstance(self.notes, tuple) or not all(isinstance(m, Message) for m in self.notes):
            raise TypeError("a message's notes must be a tuple of Messages")

    # the four kinds of note a run is made of, each named once and used everywhere
    @property
    def is_question(self) -> bool:
        """Someone asked the assistant something: a user note that is not a verdict."""
        return self.role == USER and self.tool is None

    @property
    def is_decision(self) -> bool:
        """The brain chose a move: an assistant note naming the tool it calls."""
        return self.role == ASSISTANT and self.tool is not None

    @property
    def is_verdict(self) -> bool:
        """A human ruled on the waiting decision: a user note naming its tool (args None: a no)."""
        return self.role == USER and self.tool is not None

    @property
    def is_result(self) -> bool:
        """What a tool handed back: a tool note."""
        return self.role == TOOL
