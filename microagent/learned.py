"""A brain you train yourself: a tiny neural network that learned the office's job.

Behaviour cloning, in three moves: make up customers (`cases`) and turn the
notebooks of the rule-based office into pairs (`features` seen, tool picked); train
a network with one hidden layer to guess the tool (`train`); use it as a plain
Policy, `support_agent(brain(net))`, and measure it on customers it never saw
(`success_rate`). The one rule: the network picks the tool, and a rule you can read
fills the arguments (`arguments`), so its mistakes are all in which tool it picks.

What it leaves out: numpy, batches, momentum, any model of language. It sees only
the last note of the notebook (`features`): it never reads what the question asks,
and it cannot learn a move that depends on anything earlier.
"""

import itertools
import json
import math
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from microagent.agent import DONE, Agent
from microagent.context import Context
from microagent.demo import price, support_agent, support_policy
from microagent.policy import Action
from microagent.tool import Tool

# ---------------------------------------------------------------------------
# the data: made-up customers, and the pairs their notebooks hold. The features and
# the pairs read any notebook; the customers, the argument rule and what counts as
# served right are the refund office's: they name its tools and their arguments,
# and change when the office does.

ITEMS = ("Wireless Headphones", "Desk Lamp", "Coffee Grinder", "Rain Jacket",
         "Phone Case", "Yoga Mat", "Kettle", "Backpack", "Bike Light", "Blender",
         "Toaster", "Keyboard")
# half the orders are defective, the only kind the policy refunds
STATES = ("delivered, reported defective", "delivered, reported defective", "delivered",
          "in transit")
ASKS = ("Can I get a refund for order {id}? It arrived broken.",
        "My {item} (order {id}) stopped working after a week. Money back, please.",
        "Order {id}: the {item} does not turn on. I want a refund.",
        "Hi, I'd like my money back for {id}, the {item} is not what I hoped.",
        "Refund {id} please, it came damaged.")


@dataclass(frozen=True)
class Case:
    """One made-up customer: what they ask, their one order, what their human says."""

    question: str
    order: tuple[str, str, int, str]  # the office's one order: (id, item, price, state)
    yes: bool                         # what the human says if a refund is asked for

    def office(self, policy=support_policy) -> Agent:
        """The refund office for this customer: their order in the table, their human."""
        order_id, *rest = self.order
        return support_agent(policy, approver=lambda tool_name, args: self.yes,
                             orders={order_id: tuple(rest)})


def cases(n: int, seed: int) -> list[Case]:
    """`n` made-up customers; the same seed gives the same ones.

    Different orders, items, prices and reasons, some refundable and some not, a
    human who says yes or no: run each through the refund office of microagent.demo
    (`case.office()`, with its rule-based brain) to get the notebooks to learn from.
    """
    rng = random.Random(seed)
    made = []
    for _ in range(n):
        order_id = rng.choice("ABCDEFGH") + str(rng.randrange(1000, 10000))
        item, cost, state = rng.choice(ITEMS), rng.randrange(5, 400), rng.choice(STATES)
        # now and then a typo: the customer names an order that is not theirs
        asked = order_id if rng.random() > 0.15 else order_id[0] + order_id[1:][::-1]
        question = rng.choice(ASKS).format(id=asked, item=item)
        made.append(Case(question, (order_id, item, cost, state), rng.random() < 0.7))
    return made


def features(ctx: Context) -> list[str]:
    """What the brain can see, as the names of the features that are on: the last note.

    >>> from microagent import Message
    >>> features(Context((Message("tool", "no order B1", name="look_up_order"),)))
    ['last: look_up_order', 'word: no', 'word: order']
    """
    last = ctx.last()
    if last.kind != "result":  # the run has just begun: the question is the last note
        return ["last: the question"]
    # whole words only: an order id or a price is not a word
    words = sorted(set(re.findall(r"\b[a-z]+\b", last.content.lower())))
    return ([f"last: {last.name}"] + (["last: an error"] if last.error else [])
            + [f"word: {w}" for w in words])


def pairs(ctx: Context, see: Callable[[Context], list[str]] = features
          ) -> list[tuple[list[str], str]]:
    """(what the brain could see, the tool it picked), for each decision in `ctx`.

    >>> from microagent import Message
    >>> ctx = Context((Message("user", "Refund A1234?"),
    ...                Message("assistant", "", tool="look_up_order", args="{}"),
    ...                Message("tool", "no order A1234", name="look_up_order"),
    ...                Message("assistant", "", tool="final_answer", args="{}")))
    >>> pairs(ctx)  # doctest: +NORMALIZE_WHITESPACE
    [(['last: the question'], 'look_up_order'),
     (['last: look_up_order', 'word: no', 'word: order'], 'final_answer')]
    """
    return [(see(Context(ctx.messages[:i])), m.tool) for i, m in enumerate(ctx)
            if m.kind == "decision"]


# ---------------------------------------------------------------------------
# the network: features in, one score per tool out


@dataclass
class Net:
    """The network: feature names in, tool names out, and the numbers it learns.

    No file format of its own: a Net is plain lists, so
    `json.dumps(dataclasses.asdict(net))` saves it and `Net(**json.loads(text))`
    loads it back.
    """

    inputs: list[str]      # the feature names, one per input (one never seen is ignored)
    outputs: list[str]     # the tool names, one per output
    w1: list[list[float]]  # (hidden, inputs)
    b1: list[float]        # (hidden,)
    w2: list[list[float]]  # (outputs, hidden)
    b2: list[float]        # (outputs,)

    def size(self) -> int:
        """How many numbers it learns: its weights and biases."""
        return sum(len(row) for row in self.w1 + self.w2) + len(self.b1) + len(self.b2)


def network(data: list[tuple[list[str], str]], hidden: int = 8, seed: int = 0) -> Net:
    """A network sized for these pairs, with small random weights: it knows nothing."""
    if not data:
        raise ValueError("a network needs pairs to learn from: pairs(notebook) for a "
                         "few notebooks, such as case.office().run(case.question)")
    rng = random.Random(seed)
    inputs = sorted({name for on, _ in data for name in on})
    outputs = sorted({tool for _, tool in data})

    def weights(rows: int, cols: int) -> list[list[float]]:
        return [[rng.gauss(0, 1 / math.sqrt(cols)) for _ in range(cols)]
                for _ in range(rows)]
    return Net(inputs, outputs, weights(hidden, len(inputs)), [0.0] * hidden,
               weights(len(outputs), hidden), [0.0] * len(outputs))


def encode(net: Net, on: list[str]) -> list[float]:
    """The features that are on, as the network's inputs: 1.0 for each, 0.0 elsewhere."""
    return [1.0 if name in on else 0.0 for name in net.inputs]


def dot(a: list[float], b: list[float]) -> float:
    """Multiply two lists of numbers pairwise and add it up: one unit's weighted sum."""
    return sum(ai * bi for ai, bi in zip(a, b, strict=True))


def forward(net: Net, x: list[float]) -> tuple[list[float], list[float]]:
    """The hidden layer, and the probability the network gives each tool."""
    h = [math.tanh(dot(row, x) + b) for row, b in zip(net.w1, net.b1, strict=True)]
    z = [dot(row, h) + b for row, b in zip(net.w2, net.b2, strict=True)]
    top = max(z)  # less the largest score, the same softmax, and exp() can't overflow
    e = [math.exp(zk - top) for zk in z]
    return h, [ek / sum(e) for ek in e]


def loss(net: Net, data: list[tuple[list[str], str]]) -> float:
    """How surprised the network is by the teacher's moves, on average (0: not a bit)."""
    if not data:  # (train given no pairs stops here, at the end of its first pass)
        raise ValueError("no pairs to learn from or to score: pairs(notebook) gives some")
    # the probability it gives the teacher's tool, pair by pair (it may round to 0.0)
    p = [forward(net, encode(net, on))[1][net.outputs.index(tool)] for on, tool in data]
    return -sum(math.log(max(pk, 1e-300)) for pk in p) / len(p)


def learn(net: Net, x: list[float], y: int, lr: float) -> None:
    """One step of gradient descent on one example: inputs `x`, the right output `y`.

    The gradients are written by hand, not by a small autograd in micrograd's spirit:
    an autograd builds an object for every multiplication, thousands per example, and
    training would take minutes instead of seconds; and one hidden layer's gradients
    are a few lines, so the reader sees exactly what backprop does.
    """
    h, p = forward(net, x)
    # backward: how the loss -log(p[y]) moves with each score, then with each hidden
    # unit; for softmax and this loss together, a score's gradient is p, less 1 at y
    dz = [pk - (k == y) for k, pk in enumerate(p)]
    # subtle: dh is worked out from w2 as it was in the forward pass, before w2 moves
    dh = [(1 - hj * hj) * sum(dz[k] * net.w2[k][j] for k in range(len(dz)))
          for j, hj in enumerate(h)]  # back through tanh, whose slope is 1 - h²
    # plain gradient descent: each weight takes a small step against its gradient
    for k, dzk in enumerate(dz):
        net.w2[k] = [w - lr * dzk * hj for w, hj in zip(net.w2[k], h, strict=True)]
        net.b2[k] -= lr * dzk
    for j, dhj in enumerate(dh):
        net.w1[j] = [w - lr * dhj * xi for w, xi in zip(net.w1[j], x, strict=True)]
        net.b1[j] -= lr * dhj


def train(net: Net, data: list[tuple[list[str], str]], epochs: int = 10, lr: float = 0.1,
          seed: int = 0) -> list[float]:
    """Fit the network to (features, tool) pairs by gradient descent; the loss each pass.

    A feature the network has no input for is ignored, as when it is used.
    """
    unknown = sorted({tool for _, tool in data} - set(net.outputs))
    if unknown:
        raise ValueError(f"the network has no output for {', '.join(unknown)}: "
                         "make it from these pairs, network(data)")
    rng = random.Random(seed)
    # (x, y): the inputs and the right output
    examples = [(encode(net, on), net.outputs.index(tool)) for on, tool in data]
    losses = []
    for _ in range(epochs):
        rng.shuffle(examples)  # a new order each pass, the same for the same seed
        for x, y in examples:
            learn(net, x, y, lr)
        losses.append(loss(net, data))
    return losses


# ---------------------------------------------------------------------------
# the trained network as a brain, and how well a brain does the job


def arguments(ctx: Context, tool: Tool | None) -> dict:
    """Each argument the tool takes, filled by a rule from the notebook.

    The order id is the one in the question, the amount is the price the lookup
    wrote, the answer says what the notebook shows happened. Copying a value is not
    what a small classifier does well, and a rule cannot invent an order id or an
    amount. An argument that can't be filled is left out (no order id in the question,
    no price in the lookup, or one too long to read), and the loop's error note says
    it is missing.
    """
    question = [m.content for m in ctx if m.kind == "question"][-1]
    # the latest result of each tool that did not fail
    results = {m.name: m.content for m in ctx if m.kind == "result" and not m.error}
    order = re.search(r"\b[A-Z]\d{4}\b", question)  # the order the customer names
    paid = re.search(r"\$\d+", results.get("issue_refund", ""))  # what a refund paid
    answer = (f"Done: {paid.group()} is on its way back to your card." if paid else
              "Sorry, I can't refund this order. A teammate will follow up by email.")
    values = {"order_id": order and order.group(),
              "amount": price(results.get("look_up_order", "")), "answer": answer}
    takes = tool.schema["properties"] if tool is not None else {}
    return {name: values[name] for name in takes if values.get(name) is not None}


def brain(net: Net, see: Callable[[Context], list[str]] = features):
    """The trained network as a Policy: it picks the tool it finds most likely.

    A guess that does not fit (a tool the office lacks, an argument the notebook
    cannot fill) becomes an error note, like any brain's mistake, and `max_steps`
    stops a brain that goes round in circles.
    """
    def policy(ctx: Context, tools) -> Action:
        p = forward(net, encode(net, see(ctx)))[1]
        best = max(range(len(p)), key=p.__getitem__)
        name = net.outputs[best]  # a tool the office lacks: the loop's note will say so
        return Action(name, arguments(ctx, tools.get(name)),
                      f"the network is {p[best]:.0%} sure")
    return policy


def guessing(seed: int = 0):
    """The floor: a brain that picks a tool at random; `arguments` fills the rest."""
    rng = random.Random(seed)

    def policy(ctx: Context, tools) -> Action:
        tool = rng.choice(list(tools.values()))
        return Action(tool.name, arguments(ctx, tool), "a guess")
    return policy


def owed(case: Case) -> bool:
    """Is this customer owed a refund: a defective order, named right, a human's yes?"""
    order_id, state = case.order[0], case.order[3]
    return order_id in case.question and "defective" in state and case.yes


def right(case: Case, ctx: Context) -> bool:
    """Did the run end with an answer, and refund the price if and only if it is owed?"""
    due = [case.order[2]] if owed(case) else []
    # each refund that went through, at the amount of the note before: its call, or a yes
    paid = [json.loads(call.args)["amount"] for call, came in itertools.pairwise(ctx)
            if came.kind == "result" and came.name == "issue_refund" and not came.error]
    return case.office().why_stop(ctx) == DONE and paid == due


def success_rate(policy, held_out: list[Case]) -> float:
    """The share of customers a brain serves right."""
    if not held_out:
        raise ValueError("no customers to serve: cases(n, seed) makes n of them")
    return sum(right(case, case.office(policy).run(case.question))
               for case in held_out) / len(held_out)
