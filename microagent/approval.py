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
asked for (the decision note) and what the human approved (the verdict).

A verdict that can't be right is refused before anything is written: nothing
waiting, a notebook that breaks the rules of microagent.invariants, a verdict
for another tool than the waiting one, or edited arguments that don't fit the
tool (to check those, `approve` needs the tool: `tool=...`).

What it leaves out: signing a verdict against forgery. Here the saved notebook
is the user's own file; a server that hands verdicts to strangers would sign them.
"""

import copy
import dataclasses
import functools
import json

from microagent.context import Context
from microagent.invariants import check
from microagent.message import TOOL, USER, Message
from microagent.tool import Tool


def gate(tool: Tool, approver, by: str = "a human") -> Tool:
    """`tool`, asking `approver(name, args)` first; on a no it does not run."""
    if not isinstance(tool, Tool) or tool.terminal or not callable(approver):
        raise ValueError("gate a Tool with side effects, not the final answer, and give it an approver: "
                         "a function (tool_name, args) -> True or False")

    @functools.wraps(tool.fn)  # the gate takes exactly the arguments the tool takes
    def gated(**args) -> str | Message:
        yes = approver(tool.name, copy.deepcopy(args))  # a copy: an approver can't change what runs
        if not isinstance(yes, bool):  # subtle: "no" is a true string; only True is a yes
            raise TypeError(f"the approver must answer True or False, not {yes!r}")
        if not yes:  # a denial is an error note, as when the loop settles a "no"
            return Message(TOOL, f"denied by {by}: {tool.name} did not run", error=True)
        out = tool(**args)
        if isinstance(out, Message):  # an agent used as a tool: keep its notes
            return dataclasses.replace(out, content=f"approved by {by}, {out.content}")
        return f"approved by {by}, {out}"
    return dataclasses.replace(tool, fn=gated)


def approve(ctx: Context, *, by: str = "a human", args: dict | None = None, tool: Tool | None = None) -> Context:
    """The notebook with a yes on the waiting decision: as the brain asked, or with edited `args`.

    Edited arguments are checked against `tool` (the waiting tool) before anything is written.
    """
    pending = _waiting(ctx, tool)
    if args is None:
        return ctx.add(Message(USER, "approved", name=by, tool=pending.tool, args=pending.args))
    if tool is None:
        raise ValueError(f"to check the edited arguments, approve needs the {pending.tool} tool: "
                         "approve(ctx, by=..., args=..., tool=...)")
    problem = tool.check(args)
    if problem:
        raise ValueError(f"the edited arguments don't fit {tool.name}: {problem}")
    return ctx.add(Message(USER, "approved", name=by, tool=pending.tool, args=json.dumps(args, ensure_ascii=False)))


def deny(ctx: Context, reason: str, *, by: str = "a human", tool: Tool | None = None) -> Context:
    """The notebook with a no on the waiting decision; the tool will not run, the brain reads `reason`."""
    pending = _waiting(ctx, tool)
    return ctx.add(Message(USER, reason, name=by, tool=pending.tool))


def _waiting(ctx: Context, tool: Tool | None) -> Message:
    """The decision waiting for a verdict, or a ValueError that says why there is none."""
    check(ctx)  # a notebook that breaks the rules gets no verdict
    pending = ctx.pending
    if pending is None:
        raise ValueError("nothing in this notebook is waiting for approval")
    if pending is not ctx.last():
        raise ValueError(f"{pending.tool} has a verdict already: resume the run with agent.run(context=ctx)")
    if tool is not None and not isinstance(tool, Tool):
        raise TypeError(f"tool= is the Tool that waits (here {pending.tool}), not {tool!r}")
    if tool is not None and tool.name != pending.tool:
        raise ValueError(f"the run is waiting for a verdict on {pending.tool}, not on {tool.name}")
    return pending
