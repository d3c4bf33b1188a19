"""The rules every notebook keeps, and `check`, which says where one is broken.

All of it is one rule: a call and what came of it stand together, in order (the
decision, the verdict if there is one, the result), so a notebook read top to
bottom says what happened and what waits. The loop always keeps it; a notebook
loaded from a file might not, so load untrusted JSON with `check(from_json(text))`
(microagent.saving).

It checks the shape of a notebook, not its truth: it cannot tell whether a tool
really said what its note says, or who really approved (that needs signed
verdicts, which are left out here). What an agent used as a tool did (a result's
`notes`) is that tool's report, kept for the record and never acted on; it is not
held to these rules.
"""

from microagent.context import Context
from microagent.message import Message
from microagent.tool import read_json


def check(ctx: Context) -> Context:
    """`ctx` if it keeps the rules; else a ValueError naming the first bad note.

    A run writes its notes in a steady rhythm: the system note (if there is one)
    first; then a question; then, turn after turn, a decision and its result, with a
    human's verdict on a decision (microagent.approval) between the two. So, read off
    each note's kind:

    - at most one system note, and only as the very first note
    - a run begins with a question: the first note after the system note is one
    - every decision carries its arguments, as JSON text ("{}" for none), as the
      loop writes them: what is approved and run is read from there
    - every decision is answered by exactly one result from the tool it called,
      right after it (or right after the verdict on it); nothing else comes
      between, not a remark, a no_move or another question
    - only the last decision may be unanswered (a run paused for a human), or have
      a verdict not carried out yet
    - no result without the decision it answers; after a no, the result is the
      error note that says so (a denied call never ran)
    - a verdict comes only right after a decision, names the same tool, and
      approves arguments that are a JSON object (or none at all: a no), read as
      strictly as the loop reads them (microagent.tool.read_json)

    Remarks and no_moves may come after a question, a result, a remark or a no_move:
    anywhere a decision could.

    >>> ask = Message("user", "refund A1234?")
    >>> asked = Message("assistant", "", "support", "issue_refund", '{"amount": 79}')
    >>> check(Context((ask, asked))).last().kind   # paused: fine
    'decision'
    >>> check(Context((ask, Message("tool", "$79 refunded", "refund"))))
    Traceback (most recent call last):
    ...
    ValueError: message 1 (a result from refund): a result with no decision before it
    """
    if not isinstance(ctx, Context):
        raise TypeError(f"check takes a Context, not {type(ctx).__name__}: "
                        "load saved text with microagent.saving.from_json(text)")
    notes = ctx.messages
    for i, m in enumerate(notes):
        problem = _broken(notes, i)
        if problem:
            raise ValueError(f"message {i} ({_about(m)}): {problem}")
    return ctx


def _broken(notes: tuple[Message, ...], i: int) -> str | None:
    """The rule note i breaks, in words, or None."""
    m, before = notes[i], notes[i - 1] if i > 0 else None
    if m.kind == "system" and i > 0:
        return "a system note may only be the first note"
    first = 1 if notes[0].kind == "system" else 0
    if i == first and m.kind != "question":
        return "a run begins with a question, a user note with no tool"
    if m.kind == "decision" and m.args is None:
        return ('a decision carries its arguments as JSON text: give it "args": "{}" '
                "if the call takes none")
    if m.kind == "decision" and not _answered(notes[i + 1:i + 3]):
        return (f"a decision must be answered right after it, by a result from {m.tool} "
                "(a verdict may sit between)")
    if m.kind == "verdict":
        return _bad_verdict(m, before)
    if m.kind == "result":
        ruled = before if before and before.kind == "verdict" else None
        asked = notes[i - 2] if ruled and i > 1 else before
        if not (asked and asked.kind == "decision"):
            return "a result with no decision before it"
        if m.name != asked.tool:
            return f"a result from {m.name} for a decision to call {asked.tool}"
        if ruled and ruled.args is None and not m.error:
            return f"{m.name} ran after a no: a denied call's result is an error note"
    return None


def _answered(after: tuple[Message, ...]) -> bool:
    """Do the notes after a decision answer it (or leave it waiting, at the end)?"""
    if after and after[0].kind == "verdict":  # ruled on: its result comes next, if any
        after = after[1:]
    return not after or after[0].kind == "result"  # (a result's rules name a wrong tool)


def _bad_verdict(m: Message, before: Message | None) -> str | None:
    if not (before and before.kind == "decision"):
        return "a verdict must come right after the decision it rules on"
    if m.tool != before.tool:
        return f"a verdict on {m.tool} for a decision to call {before.tool}"
    if m.args is None:  # a no
        return None
    try:
        approved = read_json(m.args)
    except ValueError as e:
        return f"bad approved arguments: {e}"
    if not isinstance(approved, dict):
        return "bad approved arguments: they must be a JSON object"
    return None


def _about(m: Message) -> str:
    """The note, in a few words, for an error message."""
    if m.kind == "decision":
        return f"a decision to call {m.tool}"
    if m.kind == "verdict":
        return f"a verdict on {m.tool}"
    if m.kind == "result":
        return f"a result from {m.name}"
    if m.kind in ("system", "no_move"):
        return f"a {m.kind} note"
    return f"a {m.kind}"  # a question, a remark
