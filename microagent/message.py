"""A Message is one note in the office notebook.

Who wrote it (role), what it says (content), and the name of whoever wrote it
(name: the agent, the tool, or the human who ruled). A note that records a
decision also says which tool was called and with which arguments, so a run can
be replayed from its notes alone. A note that says something went wrong is
marked `error=True`. A run writes seven kinds of note, each named once, by `kind`.

The one rule: a note is written in pen. Message is frozen and holds only
immutable values (strings, None, a flag, a tuple of other notes), so it hashes and
compares by value and can never change behind anyone's back. It does not know about
notebooks, tools or brains; those are built on top.
"""

from dataclasses import dataclass

SYSTEM, USER, ASSISTANT, TOOL = "system", "user", "assistant", "tool"
ROLES = (SYSTEM, USER, ASSISTANT, TOOL)


@dataclass(frozen=True, slots=True)
class Message:
    """One note: who wrote it (role, name), what it says, and for a decision, its call."""

    role: str                # one of ROLES
    content: str
    name: str | None = None  # who wrote it: the agent, the tool, or the human who ruled
    tool: str | None = None  # a decision: the tool it calls (a verdict: what it rules on)
    args: str | None = None  # ... and its arguments, as JSON text (a dict is mutable)
    notes: tuple["Message", ...] = ()  # a result from an agent used as a tool: its run
    error: bool = False      # something went wrong; content says what

    def __post_init__(self):
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}, not {self.role!r}")
        for field in ("content", "name", "tool", "args"):
            value = getattr(self, field)
            if not (isinstance(value, str) or (value is None and field != "content")):
                raise TypeError(f"a message's {field} must be a string, "
                                f"not {type(value).__name__}")
        if type(self.notes) is not tuple or (
                self.notes and any(type(m) is not Message for m in self.notes)):
            raise TypeError("a message's notes must be a tuple of Messages")
        if type(self.error) is not bool:  # 1 or "yes" would pass for a flag, and is none
            raise TypeError(f"a message's error must be True or False, "
                            f"not {self.error!r}")

    @property
    def kind(self) -> str:
        """Which of the seven kinds of note this is, read off its fields.

            system     what the assistant was told before it started
            question   someone asked the assistant something
            decision   the brain chose a move: a tool to call, with arguments
            verdict    a human ruled on a waiting decision (no arguments: a no)
            result     what a tool handed back (error=True: what went wrong)
            remark     the assistant's own note: out of steps, a summary of earlier notes
            no_move    the brain's reply held no move; the note says what was wrong

        >>> notes = [Message(SYSTEM, "You are a refund office."),
        ...          Message(USER, "Refund A1234?"),
        ...          Message(ASSISTANT, "", tool="issue_refund", args='{"amount": 79}'),
        ...          Message(USER, "approved", "alice", "issue_refund", '{"amount": 79}'),
        ...          Message(TOOL, "$79 refunded", "issue_refund"),
        ...          Message(ASSISTANT, "out of steps: stopped after 1 turn"),
        ...          Message(ASSISTANT, "your reply was empty", error=True)]
        >>> [m.kind for m in notes]
        ['system', 'question', 'decision', 'verdict', 'result', 'remark', 'no_move']
        """
        if self.role == USER:
            return "question" if self.tool is None else "verdict"
        if self.role != ASSISTANT:
            return "system" if self.role == SYSTEM else "result"
        if self.tool is not None:
            return "decision"
        return "no_move" if self.error else "remark"
