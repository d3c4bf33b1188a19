"""The refund office with a brain it trained itself, from the notebooks its rules wrote.

    python examples/trained_brain.py
    python examples/trained_brain.py "Where is my order A1234?"  # one it never learned

The network and the training live in microagent/learned.py; notebook 13 walks
through them.
"""

import sys

from microagent.demo import QUESTION, support_agent
from microagent.learned import brain, cases, network, pairs, train
from microagent.trace import show

# the notebooks of 100 made-up customers, each served by the office's rules
notebooks = [case.office().run(case.question) for case in cases(100, seed=1)]
data = [pair for ctx in notebooks for pair in pairs(ctx)]
net = network(data)
losses = train(net, data)
print(f"trained on {len(data)} pairs from 100 notebooks: {net.size()} weights, "
      f"loss {losses[0]:.3f} -> {losses[-1]:.4f}")


def human(tool_name: str, args: dict) -> bool:
    return True  # the human at the gate says yes


question = sys.argv[1] if len(sys.argv) > 1 else QUESTION
show(support_agent(brain(net), approver=human).run(question))
