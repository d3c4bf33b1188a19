"""Memory that does not blow up: the brain reads a short notebook, the agent keeps the whole one.

    python examples/memory.py

A clerk counts to 200, one tool call at a time: 200 turns, 400 notes and more.
Its brain is wrapped in `remembering(policy, keep=4)`, so every turn it is shown
only the question, one summary note of everything older, and the last few
notes. The agent's own notebook keeps every note, for the record; and a summary
keeps the notes it folded too, so `compact(full).unfolded()` is every note.
"""

from microagent import Action, Agent, Context, as_tool, final_answer, show
from microagent.memory import compact, remembering

GOAL = 200


@as_tool
def step(n: int) -> str:
    """Count one up from n."""
    return str(n + 1)


def policy(ctx: Context, tools) -> Action:
    """Read where the count stands (the last result) and take one more step, or stop."""
    last = ctx.last()
    n = int(last.content) if last.is_result else 0
    if n >= GOAL:
        return Action("final_answer", {"answer": f"I counted to {n}."}, "that's the goal")
    return Action("step", {"n": n}, "one more")


shown = []  # what the brain was shown, turn by turn


def watched_policy(ctx: Context, tools) -> Action:
    shown.append(ctx)
    return policy(ctx, tools)


agent = Agent(remembering(watched_policy, keep=4), [step, final_answer], name="clerk", max_steps=GOAL + 1)

if __name__ == "__main__":
    full = agent.run(f"Count to {GOAL}, please.").context
    print(f"the agent's notebook: {len(full)} notes, every one kept")
    print(f"the most the brain was ever shown: {max(len(ctx) for ctx in shown)} notes\n")
    print("what the brain read on its last turn:")
    show(shown[-1])
    print("\nthe same notebook compacted by hand, keeping only the last turn:")
    show(compact(full, keep=2))
