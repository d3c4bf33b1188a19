"""The rules every notebook keeps, and `check`, which says where one is broken.

A run writes its notes in a steady rhythm: the system note (if there is one)
first; then a question; then, turn after turn, a decision and its result. A
human's verdict on a decision (see microagent.approval) sits between the two.
So a sound notebook keeps these rules:

- at most one system note, and only as the very first note
- a run begins with a question: the first note after the system note is one
- every decision is answered by exactly one result from the tool it called,
  right after it (or right after the verdict on it)
- only the last decision may be unanswered: that is a run paused for a human
- no result without the decision it answers
- a verdict comes only right after a decision, names the same tool, and
  approves arguments that are a JSON object (or none at all: a denial)
- a summary (microagent.memory) is read as the notes it folded, in its place

The loop always keeps them; a notebook loaded from a file might not. So load
untrusted JSON with `check(Context.from_json(text))`: it hands the notebook back
when it is sound and raises a ValueError naming the first bad note otherwise.
Approved arguments are read as strictly as the loop reads them: JSON text of
one object, each key once, not nested absurdly deep.

It checks the shape of a notebook, not its truth: it cannot tell whether a tool
really said what its note says, or who really approved (that would need signed
verdicts, which are left out here). In the same way, what an agent used as a
tool did (a result's `notes`) is that tool's report, kept for the record and
never acted on; it is not held to these rules.
"""

from microagent.context import Context
from microagent.message import ASSISTANT, SYSTEM, Message
from microagent.tool import read_args


def check(ctx: Context) -> Context:
    """`ctx` itself if its notes keep the rules above; else a ValueError naming the first bad note.

    >>> ask = Message("user", "refund A1234?")
    >>> asked = Message("assistant", "", name="support", tool="issue_refund", args='{"amount": 79}')
    >>> check(Context((ask, asked))).pending.tool   # paused: fine
    'issue_refund'
    >>> check(Context((ask, Message("tool", "$79 refunded", name="issue_refund"))))
    Traceback (most recent call last):
    ...
    ValueError: message 1 (a result from issue_refund): a result with no decision before it
    """
    if not isinstance(ctx, Context):
        raise TypeError(f"check takes a Context, not {type(ctx).__name__}: "
                        "load saved text with Context.from_json(text)")
    for i, m in enumerate(ctx):  # a summary folds whole turns: what it folded never ends waiting for a human
        folded = Context(m.notes).unfolded() if m.role == ASSISTANT and m.notes else []
        if folded and (folded[-1].is_decision or folded[-1].is_verdict):
            raise ValueError(f"message {i} (a summary): it folds a decision that is still waiting")
    notes = ctx.unfolded()
    for i, m in enumerate(notes):
        problem = _broken(notes, i)
        if problem:
            raise ValueError(f"message {i} ({_kind(m)}): {problem}")
    return ctx


def _broken(notes: list[Message], i: int) -> str | None:
    """The rule note i breaks, in words, or None."""
    m, before = notes[i], notes[i - 1] if i > 0 else None
    after = notes[i + 1:i + 3]  # the one or two notes that must answer a decision
    if not isinstance(m.error, bool):  # a file's "error": "yes" would read as a flag
        return f"its error flag must be true or false, not {m.error!r}"
    if m.role == SYSTEM and i > 0:
        return "a system note may only be the first note"
    if i == (1 if notes[0].role == SYSTEM else 0) and not m.is_question:
        return "a run begins with a question, a user note with no tool"
    if m.is_decision and after and not _answers(after):
        return f"a decision must be answered right after it, by a result from {m.tool} (a verdict may sit between)"
    if m.is_verdict:
        if not (before and before.is_decision):
            return "a verdict must come right after the decision it rules on"
        if m.tool != before.tool:
            return f"a verdict on {m.tool} for a decision to call {before.tool}"
        if m.args is not None:
            try:
                read_args(m.args)
            except ValueError as e:
                return f"bad approved arguments: {e}"
    if m.is_result:
        asked = None  # the decision this result answers: right before it, or before its verdict
        if before and before.is_decision:
            asked = before
        elif before and before.is_verdict:
            asked = notes[i - 2]
        if asked is None:
            return "a result with no decision before it"
        if m.name != asked.tool:
            return f"a result from {m.name} for a decision to call {asked.tool}"
    return None


def _answers(after: list[Message]) -> bool:
    """Do the notes after a decision answer it (or leave it waiting, at the end)?"""
    if after[0].is_verdict:  # ruled on: the result comes next, unless the run resumes here
        after = after[1:]
    return not after or after[0].is_result  # the result's own checks name a wrong tool


def _kind(m: Message) -> str:
    if m.is_decision:
        return f"a decision to call {m.tool}"
    if m.is_verdict:
        return f"a verdict on {m.tool}"
    if m.is_result:
        return f"a result from {m.name}"
    return f"a {m.role} note"
