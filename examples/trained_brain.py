"""The refund office with a brain it trained itself: learned from the notebooks its rules wrote.

    python examples/trained_brain.py
    python examples/trained_brain.py "Where is my order A1234?"   # a question it never learned to read

The network and the training live in microagent/learned.py; notebook 13 walks through them.
"""

import sys

from microagent import show
from microagent.demo import QUESTION, support_agent
from microagent.learned import brain, cases, network, pairs, serve, train

data = [pair for case in cases(100, seed=1) for pair in pairs(serve(case).context)]
net = network(data)
losses = train(net, data)
print(f"trained on {len(data)} pairs from 100 notebooks: {net.size()} weights, "
      f"loss {losses[0]:.3f} -> {losses[-1]:.4f}")
question = sys.argv[1] if len(sys.argv) > 1 else QUESTION
for step in support_agent(policy=brain(net)).steps(question):
    pass
show(step.context)
