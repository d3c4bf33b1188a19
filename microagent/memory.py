"""Memory: a long notebook in, a short one out, so the brain can still read it.

A run that goes on for hundreds of turns writes hundreds of notes, and a
language model can only read so many. `compact(ctx, keep)` folds the older
notes into one summary note and keeps the rest whole:

    [system note] first question, summary of the middle, the last `keep` notes

It keeps the notebook's rules (microagent.invariants): the system note stays
first and single, so the summary is the assistant's own note (role assistant,
no tool, name "memory"), like a page where it wrote down what happened so far;
the first question stays as it was asked, and so does the latest one, in its
place (in a conversation, the one being worked on now: the turns before it
and after it are folded into a summary each);
and a decision is never cut off from its result (or from a verdict between
them), so the recent notes always start at a whole turn.

Folding loses nothing: a summary note keeps the notes it folded in its own
`notes`, so `compact(ctx).unfolded()` is every note of `ctx`, in order. A brain
is shown only the summary's words; the loop still counts the decisions folded
in it, so the step budget holds across a compaction, and `replay` and
`invariants.check` read them in place.

Who writes the summary is up to you: `digest`, the default, counts what
happened with no model, so the same notes always give the same summary; any
function `(notes) -> str` will do; and `summary_by(policy)` asks a brain.

`remembering(policy, keep)` is a brain that reads the compacted notebook. Hand
it to an Agent, and the brain sees a short notebook every turn while the agent
keeps the full one, every note, for the record. Nothing in the loop changes.

It does not count tokens (it counts notes; measure text yourself if you need
to), and a summary's words lose detail by design: its notes still have it.
"""

from collections import Counter

from microagent.agent import DONE, Agent
from microagent.context import Context
from microagent.message import ASSISTANT, SYSTEM, USER, Message
from microagent.tool import final_answer


def compact(ctx: Context, keep: int = 20, summarise=None) -> Context:
    """The notebook with its middle folded into a summary note; the head and the last `keep` notes stay.

    >>> ask = Message("user", "count to 3")
    >>> turn = (Message("assistant", "", name="a", tool="step", args="{}"), Message("tool", "1", name="step"))
    >>> for m in compact(Context((ask,) + turn * 3), keep=2):
    ...     print(m.role, m.content or m.tool)
    user count to 3
    assistant earlier, in 4 notes: 2 calls (step 2), no errors; the last result: step returned "1"
    assistant step
    tool 1
    """
    _check_keep(keep)
    if not isinstance(ctx, Context):
        raise TypeError(f"compact takes a Context, not {type(ctx).__name__}")
    notes = ctx.messages
    head = _head(notes)
    start = max(head, len(notes) - keep)
    while start > head and _ends_a_turn(notes[start]):  # never cut a decision from its result
        start -= 1
    if start - head < 2:  # folding fewer than two notes saves nothing
        return ctx
    # subtle: in a conversation the question being worked on now may fall in the middle;
    # it stays whole, in its place, so the brain knows what it is doing, and the turns
    # before it and after it are folded into a summary each
    asked = max((i for i in range(head, start) if notes[i].is_question), default=None)
    if asked is None:
        middle = _fold(notes[head:start], summarise)
    else:
        middle = _fold(notes[head:asked], summarise) + (notes[asked],) + _fold(notes[asked + 1:start], summarise)
    return Context(notes[:head] + middle + notes[start:])


def _fold(notes: tuple[Message, ...], summarise) -> tuple[Message, ...]:
    """One summary note that keeps `notes` (or the notes as they are, if there are too few to fold)."""
    if len(notes) < 2:
        return notes
    said = (summarise or digest)(notes)
    if not isinstance(said, str):
        raise TypeError(f"a summariser takes the notes and returns a string, not {said!r}")
    # subtle: the summary keeps the notes it folds, so nothing is lost: the brain reads only
    # the words, while the loop still counts the decisions folded in it (the step budget holds
    # across a compaction), and replay and invariants.check read them in place
    return (Message(ASSISTANT, said, name="memory", notes=notes),)


def digest(notes: tuple[Message, ...]) -> str:
    """A summary with no model and a bounded length: calls per tool, errors, the last result.

    >>> call = Message("assistant", "", name="a", tool="add", args='{"n": 1}')
    >>> failed = Message("tool", "error: add failed", name="add", error=True)
    >>> digest((call, Message("tool", "2", name="add"), call, failed))
    'earlier, in 4 notes: 2 calls (add 2), 1 error; the last result: add returned "error: add failed"'
    """
    notes = Context(tuple(notes)).unfolded()  # what earlier summaries folded counts too
    calls = Counter(m.tool for m in notes if m.is_decision)
    errors = sum(m.error for m in notes)
    said = f"earlier, in {_count(len(notes), 'note')}: {_count(sum(calls.values()), 'call')}"
    if calls:  # the five busiest tools, so the summary stays short however many there are
        said += " (" + ", ".join(f"{tool} {n}" for tool, n in calls.most_common(5)) + ")"
    said += f", {_count(errors, 'error')}"
    asked = [m for m in notes if m.is_question]
    if asked:
        said += f"; {_count(len(asked), 'more question')}, the last: {_short(asked[-1].content)}"
    results = [m for m in notes if m.is_result]
    if results:
        said += f"; the last result: {results[-1].name} returned {_short(results[-1].content)}"
    return said


def summary_by(policy):
    """A summariser that asks a brain: it reads the notes and calls final_answer with the summary.

    A brain that gives no answer in three turns gets `digest`'s summary instead, said so.
    """
    if not callable(policy):
        raise TypeError("summary_by takes a policy: a function (context, tools) -> Action")

    def summarise(notes: tuple[Message, ...]) -> str:
        ask = Message(USER, "Summarise the notes above in a few lines, for your own later use.")
        scribe = Agent(policy, [final_answer], name="memory", max_steps=3)
        for step in scribe.steps(context=Context(notes + (ask,))):
            pass
        if step.stop == DONE:
            return step.context.last().content
        return "(the summariser gave no answer) " + digest(notes)
    return summarise


def remembering(policy, keep: int = 20, summarise=None):
    """A brain that is `policy` reading the compacted notebook: the summary and the last `keep` notes."""
    _check_keep(keep)
    if not callable(policy) or not (summarise is None or callable(summarise)):
        raise TypeError("remembering takes a policy (a function: context, tools -> Action) and, if any, "
                        "a summarise function (notes -> text)")
    # subtle: the brain reads the summary's words, not the notes it folded (a language
    # model is sent only the words); a scripted brain, which counts decisions, still
    # finds the folded ones and keeps its place.
    def policy_on_less(ctx: Context, tools):
        return policy(compact(ctx, keep, summarise), tools)
    return policy_on_less


def _check_keep(keep) -> None:
    if not (type(keep) is int and keep >= 1):  # subtle: True is an int in Python
        raise ValueError(f"keep is how many recent notes stay whole: a whole number from 1 up, not {keep!r}")


def _head(notes: tuple[Message, ...]) -> int:
    """How many notes at the front stay whole: the system note, and the first question."""
    for i, m in enumerate(notes):
        if m.is_question:
            return i + 1
    return 1 if notes and notes[0].role == SYSTEM else 0


def _ends_a_turn(m: Message) -> bool:
    """A result, or a verdict: a note that belongs with the decision before it."""
    return m.is_result or m.is_verdict


def _count(n: int, thing: str) -> str:
    return f"no {thing}s" if n == 0 else f"1 {thing}" if n == 1 else f"{n} {thing}s"


def _short(text: str, limit: int = 60) -> str:
    return '"' + (text if len(text) <= limit else text[:limit - 3] + "...") + '"'
