"""Memory: a brain reads a short view of a long notebook, which keeps every note.

A run of hundreds of turns writes hundreds of notes, and a language model can only
read so many. `compact(ctx, keep)` makes the short view a brain reads:

    [system note] first question, summary of the middle, the last `keep` notes

The one rule: compacting makes a view, never the record. `remembering(policy)` is
the only way a brain reads less, while the agent writes every note into its own
notebook, so the step budget, saving, resuming and `replay` read the full notebook,
and nothing in the loop changes. What it leaves out: it counts notes, not tokens,
and a summary loses detail by design. Don't hand a view to an agent or save it as
the run: its middle is gone.
"""

from collections import Counter

from microagent.agent import DONE, Agent
from microagent.context import Context
from microagent.message import ASSISTANT, SYSTEM, USER, Message
from microagent.tool import final_answer


def compact(ctx: Context, keep: int = 20, summarise=None) -> Context:
    """A short view of `ctx`: its head, a summary of the middle, the last `keep` notes.

    The view keeps the notebook's rules (microagent.invariants): the system note stays
    first; the summary is the assistant's own remark (name "memory"), like a page where
    it wrote down what happened so far; the latest question stays whole in its place
    (in a conversation, it is the one being worked on now, and the turns before and
    after it are summed up apart); and a decision is never cut from its verdict or its
    result, so the recent notes start at a whole turn. A summary folds nothing: it
    holds words only (what it sums up is still in the full notebook), so a view of a
    view stays flat. `summarise` writes it: `plain_summary` (the default, so the same
    notes always give the same summary), any function `(notes) -> str`, or
    `summary_by(policy)`, which asks a brain.

    >>> ask = Message("user", "count to 3")
    >>> call = Message("assistant", "", "me", "step", "{}")
    >>> turn = (call, Message("tool", "1", "step"))
    >>> [m.kind for m in compact(Context((ask,) + turn * 3), keep=2)]
    ['question', 'remark', 'decision', 'result']
    >>> compact(Context((ask,) + turn * 3), keep=2)[1].content[:37]
    'earlier, in 4 notes: 2 calls (step 2)'
    """
    _check_keep(keep)
    if not isinstance(ctx, Context):
        raise TypeError(f"compact takes a Context, not {type(ctx).__name__}")
    notes = ctx.messages
    head = _head(notes)
    start = max(head, len(notes) - keep)
    while start > head and notes[start].kind in ("result", "verdict"):
        start -= 1  # never cut a decision from what answers it
    if start - head < 2:  # summing up fewer than two notes saves nothing
        return ctx
    # the question being worked on now may fall in the middle: it stays, in its place
    asked = max((i for i in range(head, start) if notes[i].kind == "question"),
                default=None)
    if asked is None:
        middle = _summed(notes[head:start], summarise)
    else:
        middle = (_summed(notes[head:asked], summarise) + (notes[asked],)
                  + _summed(notes[asked + 1:start], summarise))
    return Context(notes[:head] + middle + notes[start:])


def _summed(notes: tuple[Message, ...], summarise) -> tuple[Message, ...]:
    """One summary remark in place of `notes` (or the notes as they are, if too few)."""
    if len(notes) < 2:
        return notes
    said = (summarise or plain_summary)(notes)
    if not isinstance(said, str):
        raise TypeError(f"a summariser takes the notes and returns a string, "
                        f"not {said!r}")
    return (Message(ASSISTANT, said, "memory"),)


def plain_summary(notes: tuple[Message, ...]) -> str:
    """A bounded summary with no model: calls per tool, errors, the last result.

    >>> call = Message("assistant", "", "a", "add", '{"n": 1}')
    >>> failed = Message("tool", "no", "add", error=True)
    >>> print(plain_summary((call, Message("tool", "2", "add"), call, failed)))
    earlier, in 4 notes: 2 calls (add 2), 1 error; the last result: add returned "no"
    """
    calls = Counter(m.tool for m in notes if m.kind == "decision")
    said = f"earlier, in {_count(len(notes), 'note')}: {_count(calls.total(), 'call')}"
    if calls:  # the five busiest tools, so the summary stays short however many
        said += " (" + ", ".join(f"{tool} {n}" for tool, n in calls.most_common(5)) + ")"
    said += f", {_count(sum(m.error for m in notes), 'error')}"
    asked = [m for m in notes if m.kind == "question"]
    if asked:
        said += (f"; {_count(len(asked), 'more question')}, "
                 f"the last: {_short(asked[-1].content)}")
    results = [m for m in notes if m.kind == "result"]
    if results:
        last = results[-1]
        said += f"; the last result: {last.name} returned {_short(last.content)}"
    return said


def summary_by(policy):
    """A summariser that asks a brain: it reads the notes, and answers with the summary.

    A brain that gives no answer in three turns gets `plain_summary`'s words, said so.
    """
    if not callable(policy):
        raise TypeError("summary_by takes a policy: a function (context, tools) "
                        "-> Action")

    def summarise(notes: tuple[Message, ...]) -> str:
        ask = Message(USER, "Summarise the notes above in a few lines, for your own "
                            "later use.")
        scribe = Agent(policy, [final_answer], max_steps=3, name="memory")
        ctx = scribe.run(Context(tuple(notes) + (ask,)))
        if scribe.why_stop(ctx) == DONE:
            return ctx.last().content
        return "(the summariser gave no answer) " + plain_summary(notes)
    return summarise


def remembering(policy, keep: int = 20, summarise=None):
    """A brain that is `policy` reading `compact(ctx, keep, summarise)`, not `ctx`.

    A brain that counts notes counts those in view: `scripted` under `remembering`
    counts only the moves it can see and loses its place, so a brain that remembers
    reads the last notes (what the latest tool said), as a language model does.
    """
    _check_keep(keep)
    if not callable(policy) or not (summarise is None or callable(summarise)):
        raise TypeError("remembering takes a policy (a function: context, tools -> "
                        "Action) and, if any, a summarise function (notes -> text)")

    def policy_on_less(ctx: Context, tools):
        return policy(compact(ctx, keep, summarise), tools)
    return policy_on_less


def _check_keep(keep) -> None:
    if not (type(keep) is int and keep >= 1):  # (why type(): see agent.py)
        raise ValueError("keep is how many recent notes stay whole: a whole number "
                         f"from 1 up, not {keep!r}")


def _head(notes: tuple[Message, ...]) -> int:
    """How many notes at the front stay whole: the system note and the first question."""
    for i, m in enumerate(notes):
        if m.kind == "question":
            return i + 1
    return 1 if notes and notes[0].role == SYSTEM else 0


def _count(n: int, thing: str) -> str:
    return f"no {thing}s" if n == 0 else f"1 {thing}" if n == 1 else f"{n} {thing}s"


def _short(text: str, limit: int = 60) -> str:
    return '"' + (text if len(text) <= limit else text[:limit - 3] + "...") + '"'
