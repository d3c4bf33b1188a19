"""Agents as coworkers of agents: an Agent wrapped as a Tool that another agent can call.

    orders = Agent(orders_policy, [look_up_order, final_answer], name="orders")
    manager = Agent(manager_policy, [agent_tool(orders), final_answer], name="manager")

The manager's brain calls `orders` like any tool, with one argument, `request`.
The inner agent runs a whole run of its own on that request, and its answer comes
back as the result. Nothing is hidden: the inner run, every note of it, is kept in
the result note's `notes`, so the story shows what the inner agent did.

A failure is news, not a crash. An inner run that ends without an answer (out of
steps, paused) comes back as an error note saying why. An inner brain that raises
raises on, carrying the inner run so far (`inner_run`), so the outer loop writes
an error note that keeps it, and `microagent.retry` can still hide or retry it.

Delegation is bounded where a reader can see it: agents asking agents may nest
at most `max_depth` deep (an agent that is its own tool, directly or through
others, would otherwise call itself without end); past that, the request is
refused with an error note. The bound is a product, so mind it with a language
model: each level may make `max_steps` calls, so an agent that is its own tool,
with max_steps=10 and max_depth=3, may ask its brain 10 + 100 + 1,000 + 10,000
times before the outermost run ends (tests/test_hostile.py counts them).

What it leaves out: the inner run starts afresh each call and must finish in it.
If it pauses for a human, the outer agent hears "(no answer: paused)" and that
inner run ends there. A cancel reaches the inner run only between the outer
run's turns.
"""

import contextvars

from microagent.agent import DONE, Agent
from microagent.context import Context
from microagent.message import TOOL, Message
from microagent.schema import as_tool
from microagent.tool import Tool

# how many agents deep the current call is; each thread (each request of a server) starts at 0
_depth = contextvars.ContextVar("microagent delegation depth", default=0)


def agent_tool(agent: Agent, name: str | None = None, description: str | None = None, *,
               max_depth: int = 3) -> Tool:
    """`agent` as a Tool taking one `request`; its whole run is kept in the result note."""
    if not isinstance(agent, Agent):
        raise TypeError(f"agent_tool takes an Agent, not {agent!r}")
    tool_name = name or agent.name

    def ask(request: str) -> Message:
        depth = _depth.get()
        if depth >= max_depth:
            return Message(TOOL, f"{tool_name} was not asked: agents are already asking agents {depth} deep, "
                           f"and max_depth is {max_depth}", error=True)
        token, last = _depth.set(depth + 1), None
        try:
            for last in agent.steps(request):
                pass
        except Exception as e:  # the inner brain failed: its failure carries the run so far
            e.inner_run = Context() if last is None else last.context
            raise
        finally:
            _depth.reset(token)
        return Message(TOOL, last.answer, name=tool_name, notes=last.context.messages,
                       error=last.stop != DONE)  # no answer (out of steps, paused) is a failure
    return as_tool(ask, name=tool_name, description=description or agent.description or f"ask {agent.name}")
