"""Agents as coworkers of agents: an Agent wrapped as a Tool that another agent can call.

    orders = Agent(orders_policy, [look_up_order, final_answer], name="orders")
    manager = Agent(manager_policy, [agent_tool(orders), final_answer], name="manager")

The manager's brain calls `orders` like any tool, with one argument, `request`; the
inner agent makes a whole run of its own on it, and its answer comes back as the
result, with every note of the inner run kept in the result note's `notes`. The one
rule: whatever happens inside, the manager gets a note (an inner run with no answer,
or a brain that raises, is an error note that keeps the run so far), and delegation
is bounded by `max_depth`. It leaves out inner runs that last past one call: each
starts afresh and must finish in it, so one that pauses for a human ends there, and
a cancel is heard by the outer run between its turns, never inside an inner run.
"""

import contextvars
import dataclasses
import threading

from microagent.agent import DONE, OUT_OF_STEPS, Agent
from microagent.message import TOOL, Message
from microagent.tool import Tool, error_note, said_by

# how many agents deep the current call is; a new thread starts at 0
_depth = contextvars.ContextVar("microagent delegation depth", default=0)

REQUEST = {"type": "object", "properties": {"request": {"type": "string"}},
           "required": ["request"]}


def agent_tool(agent: Agent, name: str | None = None, description: str | None = None,
               *, max_depth: int = 3) -> Tool:
    """`agent` as a Tool taking one `request`; its whole run is kept in the result.

    An inner run that ends without an answer (out of steps, paused for a human) is an
    error note that says why; an inner brain that raises is an error note too,
    "orders failed: KeyError: ...", and both keep the inner run so far in `notes`.

    An agent that is its own tool, directly or through others, would otherwise call
    itself without end. Two counts hold it, and a request past either is refused with
    an error note:

    - how deep agents are asking agents in this thread (a contextvar), at most
      `max_depth`, across every agent_tool;
    - how many runs of this tool are under way at once in any thread (a count under a
      lock), at most `max_depth`. A tool that runs its work in a new thread (a timeout
      wrapper, say) starts that thread at depth 0, so the first count alone would not
      hold. The price: runs side by side count too, so a server with several requests
      at once gets at most `max_depth` runs of this agent together, and the one past
      that is refused (give each request its own agent_tool).

    The bound is a product, so mind it with a language model: each level may make
    `max_steps` calls, so an agent that is its own tool, with max_steps=10 and
    max_depth=3, may ask its brain 10 + 100 + 1,000 + 10,000 times before the
    outermost run ends (tests/test_hostile.py counts them).
    """
    if not isinstance(agent, Agent):
        raise TypeError(f"agent_tool takes an Agent, not {agent!r}")
    if not (type(max_depth) is int and max_depth >= 1):  # (why type(): see agent.py)
        raise ValueError("max_depth is how deep agents may ask agents: a whole number "
                         f"from 1 up, not {max_depth!r}")
    name = name or agent.name
    lock, under_way = threading.Lock(), [0]  # this tool's runs going on now, any thread

    def ask(request: str) -> Message:
        depth, ctx = _depth.get(), agent.start(request)
        with lock:
            busy = under_way[0]
            if depth < max_depth and busy < max_depth:
                under_way[0] += 1
        if max(depth, busy) >= max_depth:
            why = (f"agents are already asking agents {depth} deep" if depth >= max_depth
                   else f"{busy} runs of it are under way already, in any thread")
            return _failed(name, f"{name} was not asked: {why}, and max_depth is "
                                 f"{max_depth}")
        token = _depth.set(depth + 1)
        try:
            for step in agent.steps(ctx):
                ctx = step.context
        except Exception as e:  # the inner brain failed: a note keeps its run so far
            return _failed(name, f"{name} failed: {type(e).__name__}: {said_by(e)}", ctx)
        finally:
            _depth.reset(token)
            with lock:
                under_way[0] -= 1
        if step.stop != DONE:
            why = ("it ran out of steps" if step.stop == OUT_OF_STEPS else
                   f"it paused for a human's verdict on {ctx.last().tool}, and a run "
                   "inside a tool cannot wait")
            return _failed(name, f"{name} gave no answer: {why}", ctx)
        return Message(TOOL, ctx.last().content, name, notes=ctx.messages)
    about = description or f"Ask {agent.name}, an agent, to do something for you."
    return Tool(name, about, ask, schema=REQUEST)


def _failed(name, problem, ctx=()):
    """An error note from the tool `name`, keeping the inner run's notes, if any."""
    return dataclasses.replace(error_note(name, problem), notes=tuple(ctx))
