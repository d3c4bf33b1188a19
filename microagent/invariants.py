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
- what an agent used as a tool did (a note's `notes`) keeps the same rules

The loop always keeps them; a notebook loaded from a file might not. So load
untrusted JSON with `check(Context.from_json(text))`: it hands the notebook back
when it is sound and raises a ValueError naming the first bad note otherwise.

It checks the shape of a notebook, not its truth: it cannot tell whether a tool
really said what its note says, or who really approved (that would need signed
verdicts, which are left out here).
"""

import json

from microagent.context import Context
from microagent.message import ASSISTANT, SYSTEM, TOOL, USER, Message


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
    _check(ctx.messages, "message")
    return ctx


def _check(notes: tuple[Message, ...], where: str) -> None:
    for i, m in enumerate(notes):
        here = f"{where} {i} ({_kind(m)})"
        before = notes[i - 1] if i > 0 else None
        after = notes[i + 1:i + 3]  # the one or two notes that must answer a decision
        if m.role == SYSTEM and i > 0:
            raise ValueError(f"{here}: a system note may only be the first note")
        if i == (1 if notes[0].role == SYSTEM else 0) and not (m.role == USER and m.tool is None):
            raise ValueError(f"{here}: a run begins with a question, a user note with no tool")
        if _is_decision(m) and after and not _answers(after, m):
            raise ValueError(f"{here}: a decision must be answered right after it, "
                             f"by a result from {m.tool} (a verdict may sit between)")
        if _is_verdict(m):
            if not _is_decision(before):
                raise ValueError(f"{here}: a verdict must come right after the decision it rules on")
            if m.tool != before.tool:
                raise ValueError(f"{here}: a verdict on {m.tool} for a decision to call {before.tool}")
            if m.args is not None and not _is_object(m.args):
                raise ValueError(f"{here}: the approved arguments must be a JSON object, not {m.args!r}")
        if m.role == TOOL:
            asked = None  # the decision this result answers: right before it, or before its verdict
            if _is_decision(before):
                asked = before
            elif _is_verdict(before):
                asked = notes[i - 2]
            if asked is None:
                raise ValueError(f"{here}: a result with no decision before it")
            if m.name != asked.tool:
                raise ValueError(f"{here}: a result from {m.name} for a decision to call {asked.tool}")
        if m.notes:  # an inner agent's run: the same rules, one level down
            _check(m.notes, f"{where} {i}, note")


def _answers(after: tuple[Message, ...], decision: Message) -> bool:
    """Do the notes after a decision answer it (or leave it waiting, at the end)?"""
    if _is_verdict(after[0]):  # ruled on: the result comes next, unless the run resumes here
        after = after[1:]
    return not after or after[0].role == TOOL  # the result's own checks name a wrong tool


def _is_decision(m: Message | None) -> bool:
    return m is not None and m.role == ASSISTANT and m.tool is not None


def _is_verdict(m: Message | None) -> bool:
    return m is not None and m.role == USER and m.tool is not None


def _is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def _kind(m: Message) -> str:
    if _is_decision(m):
        return f"a decision to call {m.tool}"
    if _is_verdict(m):
        return f"a verdict on {m.tool}"
    if m.role == TOOL:
        return f"a result from {m.name}"
    return f"a {m.role} note"
