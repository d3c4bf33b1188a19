"""The refund office: a support agent that handles a refund, told as a story.

    python -m microagent          # a human approves the refund
    python -m microagent --deny   # a human says no, and the agent says so

The brain here is a plain function that reads the notebook and picks the next
move by rules: no model, so the run is the same every time. Swap it for an LLM
brain (microagent.llm) or a trained one (microagent.learned) and the tools, the
agent and the story stay the same.

It does not look anything up for real: the orders and the policy are a small
dict, so the demo runs offline. `support_agent(orders=...)` puts another order
table in the office (microagent.learned makes up many).
"""

import argparse
import re

from microagent.agent import Agent
from microagent.approval import gate
from microagent.context import Context
from microagent.policy import Action
from microagent.schema import as_tool
from microagent.tool import Tool, final_answer
from microagent.trace import show

QUESTION = "Can I get a refund for order A1234? It arrived broken."
ORDERS = {"A1234": ("Wireless Headphones", 79, "delivered, reported defective")}


def order_desk(orders: dict[str, tuple[str, int, str]]) -> tuple[Tool, Tool]:
    """The two coworkers who read an order table (id -> (item, price in whole dollars, state))."""
    @as_tool
    def look_up_order(order_id: str) -> str:
        """Look up an order by its id: what it is, what it cost, and its state."""
        if order_id not in orders:
            return f"no order {order_id}"
        item, price, state = orders[order_id]
        return f"{order_id}, {item}, ${price}, {state}"

    @as_tool
    def check_policy(order_id: str) -> str:
        """Check whether an order qualifies for a refund under the 30 day policy."""
        if order_id not in orders or "defective" not in orders[order_id][2]:
            return "not eligible: only defective items within 30 days are refunded"
        return "eligible, within the 30 day window and reported defective"
    return look_up_order, check_policy


look_up_order, check_policy = order_desk(ORDERS)


@as_tool
def issue_refund(order_id: str, amount: float) -> str:
    """Refund an amount in dollars to the card the order was paid with."""
    return f"${amount:g} refunded to the original card"


def support_policy(ctx: Context, tools) -> Action:
    """Pick the next move by reading the notebook: the question, then the latest result."""
    question = next(m.content for m in reversed(ctx.messages) if m.is_question)
    order = re.search(r"[A-Z]\d{4}", question)
    order_id = order.group() if order else "unknown"
    last = ctx.last()
    if last.is_question:
        return Action("look_up_order", {"order_id": order_id}, "let me pull up the order first")
    if last.name == "look_up_order" and not last.content.startswith("no order"):
        return Action("check_policy", {"order_id": order_id}, "now check if it qualifies")
    if last.name == "check_policy" and last.content.startswith("eligible"):
        # the price as the lookup wrote it: a brain knows only what is in the notebook
        looked = next(m for m in reversed(ctx.messages) if m.is_result and m.name == "look_up_order")
        price = int(re.search(r"\$(\d+)", looked.content).group(1))
        return Action("issue_refund", {"order_id": order_id, "amount": price},
                      "it qualifies, and a refund needs a human to sign off")
    if last.name == "issue_refund" and not last.error:  # it went through
        refunded = re.search(r"\$[\d.]+", last.content).group()  # what ran, which a human may have changed
        return Action("final_answer", {"answer": f"Good news, {order_id} qualifies. I refunded {refunded} "
                                       "to your card, here in 3 to 5 days."},
                      "all set, time to reply to the customer")
    return Action("final_answer", {"answer": f"Sorry, I can't refund {order_id} right now. "
                                   "A teammate will follow up by email within a day."},
                  "no refund this time, so tell the customer honestly")


def support_agent(approver=None, policy=support_policy, orders: dict | None = None) -> Agent:
    """The support agent; `approver(tool_name, args) -> bool` signs off refunds (None: always yes).

    `orders` is the office's order table (None: ORDERS, the demo's one order).
    """
    def yes(tool_name: str, args: dict) -> bool:
        return True
    refund = gate(issue_refund, yes if approver is None else approver)
    desk = (look_up_order, check_policy) if orders is None else order_desk(orders)
    return Agent(policy, [*desk, refund, final_answer], name="support",
                 description="answers customers' questions about orders and refunds")


def main(argv: list[str] | None = None) -> None:
    """Run the refund office once and print its story."""
    parser = argparse.ArgumentParser(prog="python -m microagent", description=__doc__.splitlines()[0])
    parser.add_argument("--deny", action="store_true", help="the human says no to the refund")
    parser.add_argument("question", nargs="?", default=QUESTION, help="what the customer asks")
    options = parser.parse_args(argv)

    def human(tool_name: str, args: dict) -> bool:
        return not options.deny
    show(support_agent(human).run(options.question).context)
