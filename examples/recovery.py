"""Recovering from errors: a mistake the brain corrects, a flaky tool retried, a secret kept.

    python examples/recovery.py

One support run meets three kinds of trouble:

- the brain asks for order "a1234"; the tool raises, the error becomes a note,
  and the brain reads it and asks again, for "A1234";
- the stock service drops the connection twice; `retrying` tries a third time,
  and the result says so;
- the payment gateway fails with its API key in the message; `hiding` shows the
  brain a generic note, and the full error goes to the developer's list.
"""

from microagent import Action, Agent, Context, final_answer
from microagent.retry import hiding, retrying
from microagent.schema import as_tool
from microagent.trace import show

ORDERS = {"A1234": "Wireless Headphones, $79"}


@as_tool
def look_up_order(order_id: str) -> str:
    """Look up an order by its id (ids are a capital letter and four digits)."""
    if order_id not in ORDERS:
        raise KeyError(f"no order {order_id!r}; ids look like A1234")
    return f"{order_id}: {ORDERS[order_id]}"


dropped = []  # the stock service drops the first two calls


@as_tool
def check_stock(item: str) -> str:
    """How many of an item are in the warehouse."""
    if len(dropped) < 2:
        dropped.append(item)
        raise ConnectionError("the stock service closed the connection")
    return f"3 {item} in stock"


@as_tool
def charge_card(order_id: str, amount: float) -> str:
    """Charge the customer's card for a replacement."""
    # a secret in the error, as a payment gateway's client may well put it
    raise RuntimeError("gateway said 401 for key sk-demo-0000-not-a-real-key")


def policy(ctx: Context, tools) -> Action:
    """Plain rules that read the last note, errors included."""
    last = ctx.last()
    if last.kind != "result":
        return Action("look_up_order", {"order_id": "a1234"}, "look up the order")
    if last.name == "look_up_order" and last.error:
        return Action("look_up_order", {"order_id": "A1234"},
                      "the error says ids are capitals: try A1234")
    if last.name == "look_up_order":
        return Action("check_stock", {"item": "Wireless Headphones"},
                      "is a replacement in stock?")
    if last.name == "check_stock":
        return Action("charge_card", {"order_id": "A1234", "amount": 79},
                      "charge for the replacement")
    return Action("final_answer", {"answer": "Your replacement is in stock, but the payment "
                                             "did not go through; a teammate will call you."},
                  "the payment failed: be honest")


errors = []  # the developer's list: full exceptions, never shown to the brain

agent = Agent(policy, [look_up_order, retrying(check_stock, attempts=3),
                       hiding(charge_card, errors.append), final_answer], name="support")

if __name__ == "__main__":
    show(agent.run("My headphones A1234 broke; can you send a replacement?"))
    print("\nthe developer's list of hidden errors:")
    for e in errors:
        print(f"  {type(e).__name__}: {e}")
