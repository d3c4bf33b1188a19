"""How well the trained brain serves new customers, beside its teacher and chance.

    python benchmarks/learned_brain.py

Everything is measured in this one run: the network is trained on the notebooks
of `--train` made-up customers and then serves `--held-out` others (a different
seed; a customer whose order id came up in training is left out). A run counts
as right when it ends with an answer and refunds exactly the price if and only
if it should (a defective order the customer named, and a human who says yes):
microagent.learned's `right`.
"""

import argparse
import statistics
import time

from microagent.context import Context
from microagent.demo import support_agent, support_policy
from microagent.learned import (brain, cases, guessing, network, owed, pairs, right,
                                success_rate, train)


def served(case, policy=support_policy) -> Context:
    """One customer's run through the office, with `policy` as its brain."""
    return case.office(policy).run(case.question)


def rates(policy, held_out) -> tuple[float, float, float]:
    """The share served right: of all customers, of those owed a refund, of those not."""
    due = [c for c in held_out if owed(c)]
    groups = (held_out, due, [c for c in held_out if c not in due])
    return tuple(sum(right(c, served(c, policy)) for c in group) / len(group)
                 for group in groups)


def decision_time(policy, situations: list[Context], tools) -> float:
    """Seconds the brain takes to pick a move, on average over these notebooks."""
    start = time.perf_counter()
    for ctx in situations:
        policy(ctx, tools)
    return (time.perf_counter() - start) / len(situations)


def trained_on(n: int, seed: int):
    """A network trained on the notebooks of n customers, and how long it took (s)."""
    data = [p for c in cases(n, seed=1000 + seed) for p in pairs(served(c))]
    start = time.perf_counter()
    net = network(data, seed=seed)
    losses = train(net, data, seed=seed)
    return net, data, losses, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=100,
                        help="customers whose notebooks it learns from")
    parser.add_argument("--held-out", type=int, default=500,
                        help="customers it is tested on")
    parser.add_argument("--seeds", type=int, default=5,
                        help="trainings (and random brains) to average over")
    options = parser.parse_args()

    # cases(n, seed) are the first n of cases(m, seed) for m > n, so this covers
    # every training set below, the small ones too
    seen = {c.order[0] for s in range(options.seeds)
            for c in cases(options.train, seed=1000 + s)}
    held_out = [c for c in cases(options.held_out, seed=2) if c.order[0] not in seen]

    trainings = [trained_on(options.train, s) for s in range(options.seeds)]
    net, data, losses, _ = trainings[0]
    print(f"training data: the notebooks of {options.train} customers, "
          f"{len(data)} (features, tool) pairs")
    print(f"the network: {len(net.inputs)} inputs, {len(net.b1)} hidden, "
          f"{len(net.outputs)} outputs, {net.size()} weights")
    print(f"training: {len(losses)} passes, loss {losses[0]:.3f} after the first, "
          f"{losses[-1]:.4f} after the last")
    ms = sorted(1000 * t for *_, t in trainings)
    print(f"training time: {statistics.median(ms):.0f} ms (median of {options.seeds}, "
          f"{ms[0]:.0f} to {ms[-1]:.0f} ms)")
    print()
    print(f"{len(held_out)} held-out customers, served right:")
    print("| brain | all | owed a refund | not owed one |")
    print("|-------|----:|--------------:|-------------:|")
    brains = {"rules (the teacher, the ceiling)": [support_policy],
              f"trained (mean of {options.seeds} seeds)":
                  [brain(t[0]) for t in trainings],
              f"random (the floor, mean of {options.seeds} seeds)":
                  [guessing(s) for s in range(options.seeds)]}
    for name, policies in brains.items():
        measured = [rates(p, held_out) for p in policies]
        means = [statistics.mean(m[i] for m in measured) for i in range(3)]
        print(f"| {name} | " + " | ".join(f"{r:.1%}" for r in means) + " |")
    print()
    # each notebook as it stood before each of the rules' decisions, for the held-out
    situations = [Context(ctx.messages[:i]) for ctx in (served(c) for c in held_out)
                  for i, note in enumerate(ctx) if note.kind == "decision"]
    tools = support_agent().tools
    took = {name: decision_time(policy, situations, tools) * 1e6
            for name, policy in (("the rules", support_policy), ("trained", brain(net)),
                                 ("random", guessing(0)))}
    print(f"one decision, over {len(situations)} notebooks: "
          + ", ".join(f"{n} {t:.0f} µs" for n, t in took.items()))
    print()
    print("how many customers it must learn from (held-out served right, mean and range "
          "over seeds):")
    print("| customers | pairs | served right |")
    print("|----------:|------:|-------------:|")
    for n in (1, 2, 3, 5, 10, options.train):
        runs = [trained_on(n, s) for s in range(options.seeds)]
        got = [success_rate(brain(net), held_out) for net, *_ in runs]
        pairs_made = statistics.mean(len(d) for _, d, *_ in runs)
        print(f"| {n} | {pairs_made:.0f} | {statistics.mean(got):.1%} "
              f"({min(got):.0%} to {max(got):.0%}) |")


if __name__ == "__main__":
    main()
