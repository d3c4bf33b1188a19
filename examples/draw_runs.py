"""Two runs drawn as pictures: the refund a human approves, and a long run of 40 steps.

    python examples/draw_runs.py          # writes docs/refund_run.svg, docs/long_run.svg
    python examples/draw_runs.py FOLDER   # writes them into FOLDER instead

The refund is notebook 06's: the refund tool waits for a human, alice approves
it, and the run goes on. The long run is a clerk who looks up 39 orders one by
one (one of them unknown, so its arrow comes back red) and then answers: it
shows what a long run looks like, the same width as a short one, only taller.
The README shows these files; a test checks they are what this script writes.
"""

import pathlib
import sys

from microagent import Action, Agent, Context, final_answer
from microagent.approval import approve
from microagent.demo import QUESTION, support_agent
from microagent.picture import draw
from microagent.schema import as_tool

ORDER_IDS = [f"A{1200 + i}" for i in range(39)]
STATES = ("delivered", "shipped", "delivered, reported defective")


def refund_run() -> Context:
    """Notebook 06's refund: paused before the refund, approved by alice, finished."""
    office = support_agent()  # no approver on the spot: the refund waits for a verdict
    paused = office.run(QUESTION)
    return office.run(approve(paused, office.tools["issue_refund"], by="alice"))


@as_tool
def order_state(order_id: str) -> str:
    """Where an order is now."""
    number = int(order_id[1:])
    if number == 1213:
        raise KeyError(order_id)  # an order the system has never heard of
    return f"{order_id}: {STATES[number % 3]}"


def clerk_policy(ctx: Context, tools) -> Action:
    """Look up each order in turn, then name the defective ones."""
    results = [m for m in ctx if m.kind == "result"]
    if len(results) < len(ORDER_IDS):
        order_id = ORDER_IDS[len(results)]
        return Action("order_state", {"order_id": order_id}, f"next, {order_id}")
    defective = [m.content.split(":")[0] for m in results if "defective" in m.content]
    answer = f"{len(defective)} defective: {', '.join(defective)}"
    return Action("final_answer", {"answer": answer}, "all looked up")


def long_run() -> Context:
    """A clerk's 40 steps: 39 look-ups and the answer."""
    clerk = Agent(clerk_policy, [order_state, final_answer], max_steps=40, name="clerk")
    return clerk.run(f"Which of orders {ORDER_IDS[0]} to {ORDER_IDS[-1]} are defective?")


def main(folder: pathlib.Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, ctx in (("refund_run", refund_run()), ("long_run", long_run())):
        picture = draw(ctx)
        picture.save(folder / f"{name}.svg")
        print(f"{name}.svg: {picture.rows} rows, {picture.width} x {picture.height} px")


if __name__ == "__main__":
    docs = pathlib.Path(__file__).resolve().parent.parent / "docs"
    main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else docs)
