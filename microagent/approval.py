"""Approval: a human's yes or no before a risky tool runs, in two forms.

On the spot: `gate(tool, approver)` is a Tool wrapping a Tool. It asks the
approver (any function `(tool_name, args) -> bool`) and runs the tool only on a
yes; a no comes back as the tool's result, an error note for the brain to read.

Later: a Tool made with `needs_approval=True` makes the run pause before it
runs, with the decision waiting at the end of the notebook (`waiting(ctx)`).
Save the notebook, let a human decide in another process days later, then:

    ctx = approve(ctx, refund, by="alice")                     # the refund runs
    ctx = deny(ctx, refund, "send the item back first", by="bob")  # or it doesn't
    ctx = agent.run(ctx)                                       # the run goes on

A verdict is a user note on the waiting call: `name` names the approver (the
`by` of approve and deny), `tool` which call, `args` the arguments approved
(None: a no, and the content is the reason). The tool runs with exactly what
was approved, and the notebook keeps both what the brain asked for (the
decision) and what the approver approved.

Each of approve and deny is two steps: `verdict` writes the human's note, and
`settle` carries it out (runs the tool, or writes the no where its result goes).
A program that must survive a crash saves the notebook between the two. A
notebook that ends with a verdict is still paused, and settling it on resume
carries the verdict out: at least once, so the tool may run again if the crash
came while it ran. A tool with effects in the world is then keyed by its call
(examples/pause_resume.py pays a refund once however often it is carried out).

The one rule: a verdict that can't be right is refused before it is written:
nothing waiting, a notebook that breaks the rules of microagent.invariants, a
tool other than the waiting one, arguments that don't fit it, a reason given
with a yes or arguments with a no.

What it leaves out: signing a verdict against forgery. Here the saved notebook
is the user's own file; a server that takes verdicts from strangers signs them.
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
    """`tool`, asking `approver(name, args)` first; on a no it does not run.

    A tool made with `needs_approval=True` is refused: it already waits for a verdict,
    and a gate on it would ask a second time after the human said yes. One ask each.
    """
    if not isinstance(tool, Tool) or tool.terminal or not callable(approver):
        raise ValueError("gate a Tool with side effects, not the final answer, and give "
                         "it an approver: a function (tool_name, args) -> True or False")
    if tool.needs_approval:
        raise ValueError(f"{tool.name} already waits for a human's verdict "
                         "(needs_approval=True): gate it or flag it, not both")

    @functools.wraps(tool.fn)  # the gate takes exactly the arguments the tool takes
    def gated(**args) -> str | Message:
        yes = approver(tool.name, copy.deepcopy(args))  # a copy: it can't edit the call
        if not isinstance(yes, bool):  # "no" is a true string: only True is a yes
            raise TypeError(f"the approver must answer True or False, not {yes!r}")
        if not yes:  # an error note, as when a verdict says no
            return Message(TOOL, f"denied by {by}: {tool.name} did not run", error=True)
        out = tool(**args)
        if isinstance(out, Message):  # an agent used as a tool: keep its notes
            return dataclasses.replace(out, content=f"approved by {by}, {out.content}")
        return f"approved by {by}, {out}"
    return dataclasses.replace(tool, fn=gated)


def waiting(ctx: Context) -> Message | None:
    """The decision the run waits on (its last note, if that is a decision), or None."""
    if not isinstance(ctx, Context):
        raise TypeError(f"waiting reads a Context, not {type(ctx).__name__}")
    last = ctx.last()
    return last if last is not None and last.kind == "decision" else None


def verdict(ctx: Context, tool: Tool, approved: bool, *, by: str = "a human",
            args: dict | None = None, reason: str = "") -> Context:
    """The notebook with a human's verdict on the waiting decision; nothing runs yet.

    `by` names the approver. A yes approves the call as the brain asked it, or with
    edited `args`; a no says why in `reason`, for the brain to read. `settle` carries
    it out.
    """
    if not isinstance(tool, Tool):
        raise TypeError(f"the tool is the Tool the run waits on, not {tool!r}")
    if not isinstance(approved, bool):  # "no" is a true string
        raise TypeError(f"approved is True or False, not {approved!r}")
    if not (isinstance(by, str) and isinstance(reason, str)):
        raise TypeError("by (who rules) and reason (why not) are strings")
    asked, last = waiting(ctx), ctx.last()
    if asked is None and last is not None and last.kind == "verdict":
        raise ValueError(f"{last.tool} has a verdict already: "
                         "settle(ctx, tool) carries it out")
    if asked is None:
        raise ValueError("nothing in this notebook is waiting for approval")
    if tool.name != asked.tool:
        raise ValueError(f"the run is waiting for a verdict on {asked.tool}, "
                         f"not on {tool.name}")
    if not approved:
        if args is not None:
            raise ValueError("a no approves no arguments: args= goes with a yes")
        return check(ctx.add(Message(USER, reason, by, tool.name)))
    if reason:
        raise ValueError("a yes needs no reason: reason= goes with a no")
    text = asked.args if args is None else _dumps(args)
    if problem := tool.problem(text):
        which = "the arguments asked for" if args is None else "the edited arguments"
        raise ValueError(f"{which} don't fit {tool.name}: {problem}")
    return check(ctx.add(Message(USER, "approved", by, tool.name, text)))


def settle(ctx: Context, tool: Tool) -> Context:
    """Carry out the verdict the notebook ends with: run `tool` as approved, or say no.

    Any other notebook comes back as it is, so settling twice carries a verdict out once.
    """
    if not isinstance(tool, Tool):
        raise TypeError(f"the tool is the Tool the verdict rules on, not {tool!r}")
    if not isinstance(ctx, Context):
        raise TypeError(f"settle reads a Context, not {type(ctx).__name__}")
    ruled = ctx.last()
    if ruled is None or ruled.kind != "verdict":
        return ctx
    if tool.name != ruled.tool:
        raise ValueError(f"the verdict is on {ruled.tool}, not on {tool.name}")
    check(ctx)  # a verdict from a file is carried out only if its notebook is sound
    if ruled.args is None:
        said = f"denied by {ruled.name}: {ruled.content}"
        return ctx.add(Message(TOOL, said, tool.name, error=True))
    return ctx.add(tool.run(ruled.args))


def approve(ctx: Context, tool: Tool, *, by: str = "a human",
            args: dict | None = None) -> Context:
    """The notebook with a yes on the waiting decision (as asked, or edited to `args`),
    carried out: the tool has run."""
    return settle(verdict(ctx, tool, True, by=by, args=args), tool)


def deny(ctx: Context, tool: Tool, reason: str, *, by: str = "a human") -> Context:
    """The notebook with a no on the waiting decision: the tool did not run, and why."""
    return settle(verdict(ctx, tool, False, by=by, reason=reason), tool)


def _dumps(args) -> str:
    try:
        return json.dumps(args, ensure_ascii=False)
    except RecursionError:  # read_json reads nesting up to Python's own limit, no deeper
        raise ValueError("the edited arguments are nested too deeply to write") from None
