"""Memory that does not blow up: the brain reads a short view, the agent keeps every note.

    python examples/memory.py

A clerk counts to 200, one tool call at a time: 201 turns, 403 notes. Its brain
is wrapped in `remembering(policy, keep=4)`, so every turn it is shown a view:
the question, one summary remark for everything older, and the last few notes.
The agent's own notebook is never compacted: it keeps every note, for the
record, for saving and for the step budget, which counts every move.

The brain here reads only the last note (where the count stands), so the view
is all it needs. A scripted brain would not do: it counts the moves it is shown,
and a view hides most of them.
"""

from microagent import Action, Agent, Context, final_answer
from microagent.memory import compact, remembering
from microagent.schema import as_tool
from microagent.trace import show

GOAL = 200


@as_tool
def step(n: int) -> str:
    """Count one up from n."""
    return str(n + 1)


def policy(ctx: Context, tools) -> Action:
    """Read where the count stands (the last result) and take one more step, or stop."""
    last = ctx.last()
    n = int(last.content) if last.kind == "result" else 0
    if n >= GOAL:
        return Action("final_answer", {"answer": f"I counted to {n}."}, "that's the goal")
    return Action("step", {"n": n}, "one more")


shown = []  # what the brain was shown, turn by turn


def watched_policy(ctx: Context, tools) -> Action:
    shown.append(ctx)
    return policy(ctx, tools)


agent = Agent(remembering(watched_policy, keep=4), [step, final_answer], GOAL + 1, name="clerk")

if __name__ == "__main__":
    full = agent.run(f"Count to {GOAL}, please.")
    print(f"the agent's notebook: {len(full)} notes, every one kept")
    print(f"the most the brain was ever shown: {max(len(ctx) for ctx in shown)} notes\n")
    print("what the brain read on its last turn:")
    show(shown[-1])
    print("\nthe view of the whole run with keep=2, as compact makes it:")
    show(compact(full, keep=2))
