"""Agents as coworkers: a manager that hands work to two specialists.

    python examples/multi_agent.py

A specialist is an ordinary Agent, with its own brain, tools and notebook.
`agent_tool(agent, description=...)` makes it a coworker that another agent can
call with a request in plain words: the specialist makes a run of its own, and
its answer comes back as the result note, with its whole notebook kept inside
that note. So the manager's story shows what each specialist did, nested under
the call.

When something goes wrong inside a specialist (here billing has never heard of
order B5678), the error is a note in the specialist's notebook, its brain reads
it and says so, and the manager reads that answer and carries on. Nobody
crashes. Should a specialist itself crash, or end without an answer, the
manager still gets an error note that holds what the specialist did (see
tests/test_team.py); and agents asking agents nest at most `max_depth`
deep, so an agent that is its own coworker stops with an error note.
"""

import re

from microagent import Action, Agent, Context, final_answer
from microagent.demo import ORDERS, look_up_order
from microagent.schema import as_tool
from microagent.team import agent_tool
from microagent.trace import show


@as_tool
def refund_rules(order_id: str) -> str:
    """What the refund rules allow for an order."""
    item, price, state = ORDERS[order_id]  # an order billing has never seen: KeyError
    if "defective" not in state:
        return f"{order_id}: not defective, no refund"
    return f"{order_id}: up to ${price} back"


def specialist_policy(tool_name: str):
    """A brain for a one-tool specialist: call the tool about the order asked for, then report."""
    def policy(ctx: Context, tools) -> Action:
        request = next(m.content for m in reversed(ctx.messages) if m.kind == "question")
        order_id = re.search(r"[A-Z]\d{4}", request).group()
        last = ctx.last()
        if last.kind == "question":
            return Action(tool_name, {"order_id": order_id}, f"look at {order_id}")
        if last.error:
            return Action("final_answer", {"answer": f"I could not check {order_id} "
                                                     f"({last.content})"},
                          "the tool failed, so say so")
        return Action("final_answer", {"answer": last.content}, "report back")
    return policy


orders = Agent(specialist_policy("look_up_order"), [look_up_order, final_answer], name="orders")
billing = Agent(specialist_policy("refund_rules"), [refund_rules, final_answer], name="billing")

REQUESTS = [("orders", "What is order A1234?"), ("billing", "What can we refund for A1234?"),
            ("billing", "What can we refund for B5678?")]


def manager_policy(ctx: Context, tools) -> Action:
    """Ask each specialist in turn; then pass on what billing said."""
    heard = [m.content for m in ctx if m.kind == "result"]
    if len(heard) < len(REQUESTS):
        who, request = REQUESTS[len(heard)]
        return Action(who, {"request": request}, f"ask {who}: {request}")
    return Action("final_answer", {"answer": "billing says: " + "; ".join(heard[1:])},
                  "pass on what billing said")


manager = Agent(manager_policy, [
    agent_tool(orders, description="Knows every order: what it is, what it cost, its state."),
    agent_tool(billing, description="Knows what the refund rules allow for an order."),
    final_answer], name="manager")

if __name__ == "__main__":
    show(manager.run("Refunds for A1234 and B5678, please."))
