"""Memory: a long notebook in, a short one out, so the brain can still read it.

A run that goes on for hundreds of turns writes hundreds of notes, and a
language model can only read so many. `compact(ctx, keep)` folds the older
notes into one summary note and keeps the rest whole:

    [system note] first question, summary of the middle, the last `keep` notes

It keeps the notebook's rules (microagent.invariants): the system note stays
first and single, so the summary is the assistant's own note (role assistant,
no tool, name "memory"), like a page where it wrote down what happened so far;
the first question stays as it was asked, and so does the latest one (in a
conversation, the one being worked on now);
and a decision is never cut off from its result (or from a verdict between
them), so the recent notes always start at a whole turn.

Who writes the summary is up to you: `digest`, the default, counts what
happened with no model, so the same notes always give the same summary; any
function `(notes) -> str` will do; and `summary_by(policy)` asks a brain.

`remembering(policy, keep)` is a brain that reads the compacted notebook. Hand
it to an Agent, and the brain sees a short notebook every turn while the agent
keeps the full one, every note, for the record. Nothing in the loop changes.

It does not count tokens (it counts notes; measure text yourself if you need
to), and a summary loses detail by design: the full notebook still has it.
"""

from collections import Counter

from microagent.agent import DONE, Agent
from microagent.context import Context
from microagent.message import ASSISTANT, SYSTEM, TOOL, USER, Message
from microagent.tool import final_answer


def compact(ctx: Context, keep: int = 20, summarise=None) -> Context:
    """The notebook with its middle folded into one summary note; the head and the last `keep` notes stay.

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
    said = (summarise or digest)(notes[head:start])
    if not isinstance(said, str):
        raise TypeError(f"a summariser takes the notes and returns a string, not {said!r}")
    summary = Message(ASSISTANT, said, name="memory")
    # subtle: in a conversation the question being worked on now may be among the folded
    # notes; it stays whole too, right after the summary, so the brain knows what it is doing
    asked = [m for m in notes[head:start] if m.role == USER and m.tool is None][-1:]
    return Context(notes[:head] + (summary, *asked) + notes[start:])


def digest(notes: tuple[Message, ...]) -> str:
    """A summary with no model and a bounded length: calls per tool, errors, the last result.

    >>> call = Message("assistant", "", name="a", tool="add", args='{"n": 1}')
    >>> failed = Message("tool", "error: add failed", name="add", error=True)
    >>> digest((call, Message("tool", "2", name="add"), call, failed))
    'earlier, in 4 notes: 2 calls (add 2), 1 error; the last result: add returned "error: add failed"'
    """
    calls = Counter(m.tool for m in notes if m.role == ASSISTANT and m.tool is not None)
    errors = sum(m.error for m in notes)
    said = f"earlier, in {_count(len(notes), 'note')}: {_count(sum(calls.values()), 'call')}"
    if calls:  # the five busiest tools, so the summary stays short however many there are
        said += " (" + ", ".join(f"{tool} {n}" for tool, n in calls.most_common(5)) + ")"
    said += f", {_count(errors, 'error')}"
    asked = [m for m in notes if m.role == USER and m.tool is None]
    if asked:
        said += f"; {_count(len(asked), 'more question')}, the last: {_short(asked[-1].content)}"
    results = [m for m in notes if m.role == TOOL]
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
    # subtle: the brain now counts only what it sees. A scripted brain, which counts
    # the decisions in its notebook to know its next move, would lose its place; a
    # brain that reads the latest notes (as a language model does) is what fits here.
    def policy_on_less(ctx: Context, tools):
        return policy(compact(ctx, keep, summarise), tools)
    return policy_on_less


def _check_keep(keep) -> None:
    if not (type(keep) is int and keep >= 1):  # subtle: True is an int in Python
        raise ValueError(f"keep is how many recent notes stay whole: a whole number from 1 up, not {keep!r}")


def _head(notes: tuple[Message, ...]) -> int:
    """How many notes at the front stay whole: the system note, and the first question."""
    for i, m in enumerate(notes):
        if m.role == USER and m.tool is None:
            return i + 1
    return 1 if notes and notes[0].role == SYSTEM else 0


def _ends_a_turn(m: Message) -> bool:
    """A result, or a verdict: a note that belongs with the decision before it."""
    return m.role == TOOL or (m.role == USER and m.tool is not None)


def _count(n: int, thing: str) -> str:
    return f"no {thing}s" if n == 0 else f"1 {thing}" if n == 1 else f"{n} {thing}s"


def _short(text: str, limit: int = 60) -> str:
    return '"' + (text if len(text) <= limit else text[:limit - 3] + "...") + '"'
