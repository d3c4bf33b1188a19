"""Approval: a human's yes or no before a risky tool runs, in two forms.

On the spot: `gate(tool, approver)` is a Tool wrapping a Tool. It asks the
approver (any function `(tool_name, args) -> bool`) and runs the tool only on a
yes; a no comes back as the result, for the brain to read.

Later: a Tool made with `needs_approval=True` pauses the run before it runs,
with the decision waiting in the notebook (`ctx.pending`). Save the notebook,
let a human decide in another process days later, write their verdict with
`approve(ctx, ...)` or `deny(ctx, ...)`, and hand it back to the agent:
`agent.run(context=ctx)` runs the tool, or tells the brain it was denied.

A verdict is a user note about a tool call: `tool` names the call, `name` who
decided, and `args` the arguments approved (None for a denial). The tool runs
exactly with what was approved, and the notebook keeps both what the brain
asked for and what ran. Signing verdicts against forgery belongs to hosting.
"""

import functools
import json

from microagent.context import Context
from microagent.message import USER, Message
from microagent.tool import Tool


def gate(tool: Tool, approver, by: str = "a human") -> Tool:
    """`tool`, asking `approver(name, args)` first; on a no it does not run."""
    @functools.wraps(tool.fn)  # the gate takes exactly the arguments the tool takes
    def gated(**args) -> str:
        if not approver(tool.name, args):
            return f"denied by {by}: {tool.name} did not run"
        return f"approved by {by}, {tool(**args)}"
    return Tool(tool.name, tool.description, gated, tool.terminal)


def approve(ctx: Context, by: str = "a human", args: dict | None = None) -> Context:
    """The notebook with a yes on the waiting decision (with edited arguments, if given)."""
    pending = _waiting(ctx)
    approved = pending.args if args is None else json.dumps(args, ensure_ascii=False)
    return ctx.add(Message(USER, "approved", name=by, tool=pending.tool, args=approved))


def deny(ctx: Context, reason: str, by: str = "a human") -> Context:
    """The notebook with a no on the waiting decision; the tool will not run."""
    pending = _waiting(ctx)
    return ctx.add(Message(USER, reason, name=by, tool=pending.tool))


def _waiting(ctx: Context) -> Message:
    if ctx.pending is None or ctx.last() is not ctx.pending:
        raise ValueError("nothing in this notebook is waiting for approval" if ctx.pending is None
                         else f"{ctx.pending.tool} has been decided on already")
    return ctx.pending
