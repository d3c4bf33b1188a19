"""What the tests of the hard parts share: a run checked at every step, a refund run that pauses,
and a tool that waits for a verdict before each call and writes down what it paid.

Run as a script, it is the "other process" of the cross-process tests:

    python tests/hard_parts.py finish PLAN < saved.json          # print the finished run's JSON
    python tests/hard_parts.py start|approve|deny SAVED LEDGER   # the refund flow, a process a step
"""

import dataclasses
import pathlib
import sys

from microagent.agent import Agent
from microagent.approval import approve, deny, settle, verdict, waiting
from microagent.context import Context
from microagent.demo import QUESTION, check_policy, issue_refund, look_up_order
from microagent.invariants import check
from microagent.message import SYSTEM, USER, Message
from microagent.policy import Action
from microagent.saving import from_json, to_json
from microagent.schema import as_tool
from microagent.script import scripted
from microagent.tool import Tool, final_answer


def checked(steps):
    """Pass a run's steps on, checking the notebook's invariants after every one."""
    for step in steps:
        check(step.context)
        yield step


def run_checked(agent: Agent, task: str | Context) -> Context:
    """agent.run(task), with the invariants checked after every step."""
    for step in checked(agent.steps(task)):
        pass
    return step.context


def verdicts(ctx: Context) -> int:
    """How many verdicts a notebook holds: the next one to give is plan[verdicts(ctx)]."""
    return sum(m.kind == "verdict" for m in ctx)


def carry_out(agent: Agent, ctx: Context) -> Context:
    """Settle the verdict a notebook ends with (if it does), with the agent's own tool."""
    last = ctx.last()
    return settle(ctx, agent.tools[last.tool]) if last.kind == "verdict" else ctx


def finish(agent: Agent, ctx: Context, plan: list) -> Context:
    """Go on with a run to its end, answering each pause with the next verdict of `plan`.

    A verdict of the plan only writes the human's note (ctx -> ctx); it is carried out
    when the run goes on, as a program that saved the verdict first would.
    """
    while True:
        ctx = run_checked(agent, carry_out(agent, ctx))
        if waiting(ctx) is None or verdicts(ctx) == len(plan):  # done, or no verdict left
            return ctx
        ctx = check(plan[verdicts(ctx)](ctx))


def stops(agent: Agent, question: str, plan: list) -> list[Context]:
    """Every state a run passes through: its start, each step, each verdict, each carried out."""
    ctx = Context((Message(SYSTEM, SYSTEM_NOTE), Message(USER, question)))
    seen = [ctx]
    while True:
        ctx = carry_out(agent, ctx)
        for now in [ctx] + [step.context for step in checked(agent.steps(ctx))]:
            if now != seen[-1]:
                seen.append(now)
        ctx = seen[-1]
        if waiting(ctx) is None or verdicts(ctx) == len(plan):  # done, or no verdict left
            return seen
        ctx = check(plan[verdicts(ctx)](ctx))
        seen.append(ctx)


# the refund office, with a refund that waits for a human instead of asking on the spot
refund = dataclasses.replace(issue_refund, needs_approval=True)
SYSTEM_NOTE = "You help customers with refunds."

REFUND_SCRIPT = scripted(
    Action("look_up_order", {"order_id": "A1234"}, "let me pull up the order first"),
    Action("check_policy", {"order_id": "A1234"}, "now check if it qualifies"),
    Action("issue_refund", {"order_id": "A1234", "amount": 79}, "it qualifies, and a refund needs a human"),
    Action("final_answer", {"answer": "I have done what I could with your refund."}, "tell the customer"),
)

# each plan is the verdicts a run gets, in turn; each only writes the human's note
PLANS = {
    "approve": [lambda ctx: verdict(ctx, refund, True, by="alice")],
    "edit": [lambda ctx: verdict(ctx, refund, True, by="alice", args={"order_id": "A1234", "amount": 70})],
    "deny": [lambda ctx: verdict(ctx, refund, False, by="bob", reason="send the item back first")],
}


def refund_agent(refund_tool: Tool = refund, policy=REFUND_SCRIPT) -> Agent:
    return Agent(policy, [look_up_order, check_policy, refund_tool, final_answer], name="support")


def ledger_refund(ledger: pathlib.Path) -> Tool:
    """A refund that really does something: it appends a line to `ledger`, and waits for approval."""
    def issue_refund(order_id: str, amount: float) -> str:
        with ledger.open("a", encoding="utf-8") as f:
            f.write(f"{order_id} {amount:g}\n")
        return f"${amount:g} refunded to the original card"
    return as_tool(issue_refund, description="Refund an amount in dollars to the card.", needs_approval=True)


def payer(paid: list) -> Tool:
    """`pay(amount: int)`, a tool that needs approval, appending each amount it pays to `paid`."""
    @as_tool(needs_approval=True)
    def pay(amount: int) -> str:
        """Pay an amount."""
        paid.append(amount)
        return f"paid {amount}"
    return pay


def reading_brain(ctx: Context, tools) -> Action:
    """The refund script, except that the reply tells the customer what really happened."""
    last = ctx.last()
    if last.name == "issue_refund":
        said = "Sorry, no refund: " + ctx[-2].content if last.content.startswith("denied") else last.content
        return Action("final_answer", {"answer": said}, "tell the customer what happened")
    return REFUND_SCRIPT(ctx, tools)


def main(argv: list[str]) -> None:
    if argv[0] == "finish":
        print(to_json(finish(refund_agent(), check(from_json(sys.stdin.read())), PLANS[argv[1]])))
        return
    saved, ledger = pathlib.Path(argv[1]), pathlib.Path(argv[2])
    agent = refund_agent(ledger_refund(ledger), reading_brain)
    if argv[0] == "start":
        ctx = run_checked(agent, QUESTION)
    else:
        ctx = check(from_json(saved.read_text(encoding="utf-8")))
        paying = agent.tools["issue_refund"]
        ctx = approve(ctx, paying, by="alice") if argv[0] == "approve" else deny(ctx, paying, "not today", by="bob")
        ctx = run_checked(agent, ctx)
    saved.write_text(to_json(ctx), encoding="utf-8")
    print(ctx.last().content)


if __name__ == "__main__":
    main(sys.argv[1:])
