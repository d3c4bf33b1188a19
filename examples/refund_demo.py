"""The article's refund office: a support agent, four coworkers, a human who signs off.

    python examples/refund_demo.py          # the human approves the refund
    python examples/refund_demo.py --deny   # the human says no

The office itself (the tools and the rule-based brain) lives in microagent/demo.py,
so that `python -m microagent` runs the very same thing; read it next.
"""

import sys

from microagent.demo import main

main(sys.argv[1:])
