"""The workshop's A2A: a remote agent as a coworker, and the office served as an A2A agent.

    from microagent.a2a import coworker

    refunds = coworker("http://127.0.0.1:8000", token=token, timeout=30)
    manager = Agent(policy, [refunds, final_answer])

`coworker(url)` reads a remote agent's card and hands back a Tool that sends it a
task and reads back how the task stands (README.md says what of A2A v1.0 is spoken).

It imports only the book's public names; the book imports nothing from here.
"""

from microagent.a2a.client import VERSION, coworker
from microagent.a2a.exchange import A2AError

__all__ = ["coworker", "A2AError", "VERSION"]
