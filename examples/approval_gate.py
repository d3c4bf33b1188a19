"""A risky coworker behind a gate: a human says yes or no before it runs.

    python examples/approval_gate.py

The gate is a Tool wrapping a Tool. Here the "human" is a function with a rule
(refunds up to $50 are fine); in a terminal it could just as well ask
`input("approve? ") == "y"`.
The same brain runs twice: the small refund goes through, the big one does not,
and the brain reads the denial and tells the customer.
"""

from microagent import Action, Agent, final_answer
from microagent.approval import gate
from microagent.schema import as_tool
from microagent.trace import show


@as_tool
def refund(order_id: str, amount: float) -> str:
    """Refund an amount in dollars to the customer's card."""
    return f"${amount:g} refunded for {order_id}"


def manager(tool_name: str, args: dict) -> bool:
    """The human who signs off: yes to refunds up to $50."""
    return args["amount"] <= 50


def policy(ctx, tools):
    """Ask for the refund once; then say what happened."""
    last = ctx.last()
    if last.kind == "question":
        amount = float(last.content.split("$")[1])
        return Action("refund", {"order_id": "A1234", "amount": amount},
                      "the customer asked for a refund")
    if not last.error:  # the refund went through (a "no" is an error note)
        return Action("final_answer", {"answer": "Your refund is on its way."},
                      "it went through")
    sorry = "A teammate needs to look at this refund first."
    return Action("final_answer", {"answer": sorry}, "it was refused")


agent = Agent(policy, [gate(refund, manager, by="the manager"), final_answer],
              name="support")
show(agent.run("Please refund $30"))
print()
show(agent.run("Please refund $300"))
