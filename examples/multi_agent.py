"""Agents as coworkers: a manager that hands work to two specialists.

    python examples/multi_agent.py

A specialist is an ordinary Agent, with its own brain, tools and notebook.
`agent_tool(agent)` makes it a coworker that another agent can call with a
request in plain words: the specialist runs its own loop, and its answer comes
back as the result note, with its whole notebook kept inside that note. So the
manager's story shows what each specialist did, nested under the call.

When something goes wrong inside a specialist (here the billing system has
never heard of order B5678), the error is a note in the specialist's notebook,
its brain reads it and says so, and the manager reads that answer and carries
on. Nobody crashes. (Should a specialist itself crash, the manager still gets
an error note, holding what the specialist did before it fell over: see
tests/test_multi_agent.py. And agents asking agents nest at most `max_depth`
deep, so an agent that is its own coworker stops with an error note.)
"""

import re

from microagent import Action, Agent, Context, agent_tool, as_tool, final_answer, show
from microagent.demo import ORDERS, look_up_order


@as_tool
def refund_rules(order_id: str) -> str:
    """What the refund rules allow for an order."""
    item, price, state = ORDERS[order_id]  # an order billing has never seen raises KeyError
    return f"{order_id}: up to ${price} back" if "defective" in state else f"{order_id}: not defective, no refund"


def specialist_policy(tool_name: str):
    """A brain for a one-tool specialist: call the tool about the order asked for, then report."""
    def policy(ctx: Context, tools) -> Action:
        request = next(m.content for m in reversed(ctx.messages) if m.is_question)
        order_id = re.search(r"[A-Z]\d{4}", request).group()
        last = ctx.last()
        if last.is_question:
            return Action(tool_name, {"order_id": order_id}, f"look at {order_id}")
        if last.error:
            return Action("final_answer", {"answer": f"I could not check {order_id} ({last.content})"},
                          "the tool failed, so say so")
        return Action("final_answer", {"answer": last.content}, "report back")
    return policy


orders = Agent(specialist_policy("look_up_order"), [look_up_order, final_answer], name="orders",
               description="Knows every order: what it is, what it cost, its state.")
billing = Agent(specialist_policy("refund_rules"), [refund_rules, final_answer], name="billing",
                description="Knows what the refund rules allow for an order.")

REQUESTS = [("orders", "What is order A1234?"), ("billing", "What can we refund for A1234?"),
            ("billing", "What can we refund for B5678?")]


def manager_policy(ctx: Context, tools) -> Action:
    """Ask each specialist in turn; then pass on what billing said."""
    heard = [m.content for m in ctx if m.is_result]
    if len(heard) < len(REQUESTS):
        who, request = REQUESTS[len(heard)]
        return Action(who, {"request": request}, f"ask {who}: {request}")
    return Action("final_answer", {"answer": "billing says: " + "; ".join(heard[1:])}, "pass on what billing said")


manager = Agent(manager_policy, [agent_tool(orders), agent_tool(billing), final_answer], name="manager")

if __name__ == "__main__":
    show(manager.run("Refunds for A1234 and B5678, please.").context)
