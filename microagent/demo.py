"""The refund office: a support agent that handles a refund, told as a story.

    python -m microagent          # a human approves the refund
    python -m microagent --deny   # a human says no, and the agent says so

`support_agent()` builds the one refund office the examples, the host and the
trained brain all run: four coworkers and a brain of plain rules (`support_policy`,
no model, so the run is the same every time). The one rule: no money goes out
without a human. It does not look anything up for real: the orders and the policy
are a small dict, so the demo runs offline.
"""

import argparse
import dataclasses
import re

from microagent.agent import Agent
from microagent.approval import gate
from microagent.context import Context
from microagent.message import Message
from microagent.policy import Action
from microagent.schema import as_tool
from microagent.tool import Tool, error_note, final_answer
from microagent.trace import show

QUESTION = "Can I get a refund for order A1234? It arrived broken."
ORDERS = {"A1234": ("Wireless Headphones", 79, "delivered, reported defective")}


def order_desk(orders: dict[str, tuple[str, int, str]]) -> tuple[Tool, Tool]:
    """The two coworkers who read an order table: id -> (item, price in $, state)."""
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
def issue_refund(order_id: str, amount: float) -> str | Message:
    """Refund an amount in dollars to the card the order was paid with."""
    if problem := refund_problem(amount):  # an error note, for the brain: nothing is paid
        return error_note("issue_refund", problem)
    return f"{dollars(amount)} refunded to the original card"


def refund_problem(amount: float) -> str | None:
    """What is wrong with an amount to refund, in words; None if it is one to pay.

    A refund is an amount over $0 in dollars and cents.

    >>> refund_problem(79) is None
    True
    >>> refund_problem(-500), refund_problem(0.001)
    ('a refund is more than $0, not -500', 'a refund is in dollars and cents, not 0.001')
    """
    try:
        whole = float(amount)  # a whole number of 400 digits is no sum of money either
    except OverflowError:
        return "a refund is a sum of money, not a number of hundreds of digits"
    if not whole > 0:
        return f"a refund is more than $0, not {amount!r}"
    if round(amount, 2) != amount:
        return f"a refund is in dollars and cents, not {amount!r}"
    return None


def dollars(amount: float) -> str:
    """An amount as a person reads it, never in scientific notation.

    >>> dollars(79), dollars(70.5), dollars(1234567), dollars(1e20)
    ('$79', '$70.50', '$1,234,567', '$100,000,000,000,000,000,000')
    """
    return f"${amount:,.0f}" if amount == int(amount) else f"${amount:,.2f}"


def price(looked: str) -> int | None:
    """The price a lookup note gives, in whole dollars; None if it gives none to refund.

    >>> price("A1234, Wireless Headphones, $79, delivered, reported defective")
    79
    >>> price("A1234, Kettle, $" + "9" * 5000) is None  # too long to read as a number
    True
    """
    digits = re.search(r"\$(\d+)", looked)
    try:
        return int(digits.group(1)) if digits else None
    except ValueError:  # more digits than Python reads as a number (4,300, unless set)
        return None


def support_policy(ctx: Context, tools) -> Action:
    """Pick the next move by rules, from the question and the latest answer.

    The notes are found by kind and name. Swap this brain for an LLM brain
    (microagent.llm) or a trained one (microagent.learned) and the tools, the agent
    and the story stay.
    """
    question = next(m.content for m in reversed(ctx.messages) if m.kind == "question")
    order = re.search(r"[A-Z]\d{4}", question)
    order_id = order.group() if order else "unknown"
    # the newest question or coworker's answer, found by kind: whatever note comes after
    # it (a brain's reply that held no move, a summary) is not news about the order
    last = next(m for m in reversed(ctx.messages) if m.kind in ("question", "result"))
    if last.kind == "question":
        return Action("look_up_order", {"order_id": order_id},
                      "let me pull up the order first")
    if last.name == "look_up_order" and not last.content.startswith("no order"):
        return Action("check_policy", {"order_id": order_id},
                      "now check if it qualifies")
    if last.name == "check_policy" and last.content.startswith("eligible"):
        # the price as the lookup wrote it: a brain knows only what is in the notebook
        looked = next(m for m in reversed(ctx.messages)
                      if m.kind == "result" and m.name == "look_up_order")
        amount = price(looked.content)
        if "issue_refund" in tools and amount is not None:
            return Action("issue_refund", {"order_id": order_id, "amount": amount},
                          "it qualifies, and a refund needs a human to sign off")
    if last.name == "issue_refund" and not last.error:  # it went through
        # what ran, which a human may have changed from what was asked
        paid = re.search(r"\$\d[\d,]*(\.\d\d)?", last.content)  # as dollars() writes it
        said = f"I refunded {paid[0]} to your card" if paid else "Your refund is sent"
        answer = f"Good news, {order_id} qualifies. {said}, here in 3 to 5 days."
        return Action("final_answer", {"answer": answer},
                      "all set, time to reply to the customer")
    answer = (f"Sorry, I can't refund {order_id} right now. "
              "A teammate will follow up by email within a day.")
    return Action("final_answer", {"answer": answer},
                  "no refund this time, so tell the customer honestly")


def support_agent(policy=support_policy, *, approver=None, orders: dict | None = None,
                  refund: Tool | None = None) -> Agent:
    """The refund office: `policy` as its brain, and its four coworkers (look up the
    order, check the policy, issue the refund, answer the customer).

    No money goes out without a human: `approver(tool_name, args) -> bool` signs off
    each refund on the spot (microagent.approval.gate); None: the refund needs
    approval, so the run pauses with it waiting for a human's verdict. `orders` is
    the order table (None: ORDERS; microagent.learned makes up many); `refund` a
    refund Tool in place of issue_refund, taking the same arguments (the host's pays
    once per call, from a ledger).
    """
    refund = issue_refund if refund is None else refund
    if not isinstance(refund, Tool) or refund.name != "issue_refund":
        raise ValueError("refund= must be a Tool named issue_refund: that is the name "
                         "the brain calls")
    if approver is None:
        refund = dataclasses.replace(refund, needs_approval=True)
    else:
        refund = gate(refund, approver)
    desk = (look_up_order, check_policy) if orders is None else order_desk(orders)
    return Agent(policy, [*desk, refund, final_answer], name="support")


def main(argv: list[str] | None = None) -> None:
    """Run the refund office once, a human saying yes (or no), and print its story."""
    parser = argparse.ArgumentParser(prog="python -m microagent",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--deny", action="store_true",
                        help="the human says no to the refund")
    parser.add_argument("question", nargs="?", default=QUESTION,
                        help="what the customer asks")
    options = parser.parse_args(argv)

    def human(tool_name: str, args: dict) -> bool:
        return not options.deny
    show(support_agent(approver=human).run(options.question))
