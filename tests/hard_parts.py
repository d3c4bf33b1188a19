"""What the tests of the hard parts share: a step stream checked at every step, and a refund run that pauses.

Run as a script, it is the "other process" of the cross-process tests:

    python tests/hard_parts.py finish PLAN < saved.json      # print the finished run's JSON
    python tests/hard_parts.py start|approve|deny SAVED LEDGER   # the refund flow, one process per step
"""

import dataclasses
import pathlib
import sys

from microagent import SYSTEM, USER, Action, Agent, Context, Message, Tool, approve, as_tool, deny, final_answer, scripted
from microagent.demo import QUESTION, check_policy, issue_refund, look_up_order
from microagent.invariants import check


def checked(steps):
    """Pass a run's steps on, checking the notebook's invariants after every one."""
    for step in steps:
        check(step.context)
        yield step


def run_checked(agent: Agent, question: str | None = None, *, context: Context | None = None) -> Context:
    """agent.run, with the invariants checked after every step."""
    for step in checked(agent.steps(question, context=context)):
        pass
    return step.context


def verdicts(ctx: Context) -> int:
    """How many verdicts a notebook holds: the next one to give is plan[verdicts(ctx)]."""
    return sum(m.role == USER and m.tool is not None for m in ctx)


def finish(agent: Agent, ctx: Context, plan: list) -> Context:
    """Go on with a run to its end, answering each pause with the next verdict of `plan` (ctx -> ctx)."""
    while True:
        ctx = run_checked(agent, context=ctx)
        if ctx.pending is None or verdicts(ctx) == len(plan):  # done, out of steps, or no verdict left
            return ctx
        ctx = check(plan[verdicts(ctx)](ctx))


def stops(agent: Agent, question: str, plan: list) -> list[Context]:
    """Every state a run passes through: its start, each step, each verdict written."""
    ctx = Context((Message(SYSTEM, agent.system), Message(USER, question)))
    seen = [ctx]
    while True:
        for step in checked(agent.steps(context=ctx)):
            if step.context != seen[-1]:
                seen.append(step.context)
        ctx = seen[-1]
        if ctx.pending is None or verdicts(ctx) == len(plan):  # done, out of steps, or no verdict left
            return seen
        ctx = plan[verdicts(ctx)](ctx)
        seen.append(ctx)


# the refund office, with a refund that waits for a human instead of asking on the spot
refund = dataclasses.replace(issue_refund, needs_approval=True)

REFUND_SCRIPT = scripted(
    Action("look_up_order", {"order_id": "A1234"}, "let me pull up the order first"),
    Action("check_policy", {"order_id": "A1234"}, "now check if it qualifies"),
    Action("issue_refund", {"order_id": "A1234", "amount": 79}, "it qualifies, and a refund needs a human"),
    Action("final_answer", {"answer": "I have done what I could with your refund."}, "tell the customer"),
)

PLANS = {
    "approve": [lambda ctx: approve(ctx, by="alice")],
    "edit": [lambda ctx: approve(ctx, by="alice", args={"order_id": "A1234", "amount": 70}, tool=refund)],
    "deny": [lambda ctx: deny(ctx, "send the item back first", by="bob")],
}


def refund_agent(refund_tool: Tool = refund, policy=REFUND_SCRIPT) -> Agent:
    return Agent(policy, [look_up_order, check_policy, refund_tool, final_answer], name="support",
                 system="You help customers with refunds.")


def ledger_refund(ledger: pathlib.Path) -> Tool:
    """A refund that really does something: it appends a line to `ledger`, and waits for approval."""
    def issue_refund(order_id: str, amount: float) -> str:
        with ledger.open("a", encoding="utf-8") as f:
            f.write(f"{order_id} {amount:g}\n")
        return f"${amount:g} refunded to the original card"
    return as_tool(issue_refund, description="Refund an amount in dollars to the card.", needs_approval=True)


def reading_brain(ctx: Context, tools) -> Action:
    """The refund script, except that the reply tells the customer what really happened."""
    last = ctx.last()
    if last.name == "issue_refund":
        said = "Sorry, no refund: " + ctx[-2].content if last.content.startswith("denied") else last.content
        return Action("final_answer", {"answer": said}, "tell the customer what happened")
    return REFUND_SCRIPT(ctx, tools)


def main(argv: list[str]) -> None:
    if argv[0] == "finish":
        print(finish(refund_agent(), check(Context.from_json(sys.stdin.read())), PLANS[argv[1]]).to_json())
        return
    saved, ledger = pathlib.Path(argv[1]), pathlib.Path(argv[2])
    agent = refund_agent(ledger_refund(ledger), reading_brain)
    if argv[0] == "start":
        ctx = run_checked(agent, QUESTION)
    else:
        ctx = check(Context.from_json(saved.read_text(encoding="utf-8")))
        ctx = approve(ctx, by="alice") if argv[0] == "approve" else deny(ctx, "not today", by="bob")
        ctx = run_checked(agent, context=ctx)
    saved.write_text(ctx.to_json(), encoding="utf-8")
    print(ctx.last().content)


if __name__ == "__main__":
    main(sys.argv[1:])
