"""Doing things at the same time, while the loop stays one loop that calls a tool a turn.

    async_tool(fn)            an `async def` as a Tool: its coroutine run to its end
    async_steps(agent, task)  agent.steps for `async for`, a turn per worker thread
    at_once(tools)            a Tool whose arguments are several calls, run in threads
    left_calls(ctx)           the calls at_once left for a human, not yet made
    left_first(policy)        a brain that first makes those calls, then asks policy
    at_once_action(reply)     a model's reply of several tool calls as one call to at_once

Three calls that wait 0.3 s each take 0.31 s at once, 0.90 s one after another (2.9
times faster: benchmarks/parallel_calls.py). What it leaves out: a cancel stops calls
not started, never one under way; a tool called at once must be safe to call from two
threads; each async call gets an event loop of its own (not the caller's).
"""

import asyncio
import contextvars
import functools
import inspect
import json
import threading
from concurrent.futures import ThreadPoolExecutor

from microagent.chat import to_action
from microagent.message import ASSISTANT, TOOL, Message
from microagent.policy import Action
from microagent.schema import as_tool
from microagent.tool import Tool, error_note, read_json

LEFT = "waits for a human's approval: it did not run here"


def finish(coroutine):
    """Run a coroutine to its end from plain code, and hand back what it returns."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no event loop runs in this thread: the usual case
        return asyncio.run(coroutine)
    # subtle: asyncio.run can't nest (a Jupyter cell, a run called inside `async def`),
    # so the coroutine gets a loop in a thread of its own, and this thread waits
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def async_tool(fn=None, *, name=None, description=None, terminal=False,
               needs_approval=False):
    """An `async def` as a Tool: `@async_tool`, or `@async_tool(name=..., ...)`.

    Each call runs the coroutine to its end, in a thread of its own if this thread
    runs an event loop already.
    """
    def make(fn):
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"async_tool makes a Tool from an async def, not {fn!r}: "
                            "a plain def is a Tool already (@as_tool)")

        @functools.wraps(fn)  # its name, docstring and hints, for the schema
        def finished(**args):
            return finish(fn(**args))
        return as_tool(finished, name=name, description=description, terminal=terminal,
                       needs_approval=needs_approval)
    return make if fn is None else make(fn)


async def async_steps(agent, task, cancel=None):
    """`agent.steps(task, cancel)` for `async for`: each turn in a worker thread, so
    the event loop serves others meanwhile.

    Set `cancel` and read on: the turn under way ends, and the last Step says
    cancelled. Leaving early (a break, a cancelled task) sets it too.
    """
    cancel = threading.Event() if cancel is None else cancel
    steps, over = agent.steps(task, cancel), False
    try:
        while (step := await asyncio.to_thread(next, steps, None)) is not None:
            over = step.stop is not None
            yield step
    finally:
        if not over:  # the caller left before the end: nothing new starts
            cancel.set()


def at_once(tools: list[Tool], *, name: str = "at_once", threads: int = 8,
            cancel=None) -> Tool:
    """A Tool that makes calls to `tools` at once, in threads: its arguments are
    {"calls": [{"tool": ..., "args": ...}, ...]}.

    Its result says what each call returned, a line each in the calls' order; its notes
    keep each call's decision and result. Once `cancel` is set, no new call starts.
    """
    if not (isinstance(tools, (list, tuple)) and tools
            and all(isinstance(t, Tool) and not t.terminal for t in tools)):
        raise TypeError("at_once takes a list of Tools to call, none of them terminal "
                        "(the final answer ends a run: call it on its own)")
    if not (type(threads) is int and threads >= 1):
        raise ValueError(f"threads is how many calls run at once, 1 or more, "
                         f"not {threads!r}")
    by_name = {t.name: t for t in tools}
    call = {"type": "object", "required": ["tool", "args"],
            "properties": {"tool": {"type": "string", "enum": list(by_name)},
                           "args": {"type": ["object", "string"]}}}  # or JSON text

    def one(tool: Tool, args: str) -> tuple[Message, ...]:
        decision = Message(ASSISTANT, "", name, tool.name, args)
        if cancel is not None and cancel.is_set():
            return decision, error_note(tool.name, "cancelled: it did not start")
        if not tool.needs_approval:
            return decision, tool.run(args)
        read = tool.read(args)  # a call that can't fit is refused now, as the loop does
        return (decision, read) if isinstance(read, Message) else (decision,)

    def run_all(calls: list) -> Message:
        if not calls:
            raise ValueError("no calls were given: give at least one")
        made = [(by_name[c["tool"]], c["args"] if isinstance(c["args"], str)
                 else json.dumps(c["args"], ensure_ascii=False)) for c in calls]
        with ThreadPoolExecutor(threads) as pool:
            # each call sees this thread's contextvars (how deep agents ask, team.py)
            futures = [pool.submit(contextvars.copy_context().run, one, tool, args)
                       for tool, args in made]
            turns = [f.result() for f in futures]  # in the calls' order, always
        said = [f"{t[0].tool}: {t[1].content if len(t) > 1 else LEFT}" for t in turns]
        failed = any(len(t) > 1 and t[1].error for t in turns)
        return Message(TOOL, "\n".join(said), name, error=failed,
                       notes=tuple(m for t in turns for m in t))
    about = ("Make several calls at the same time, to any of: "
             f"{', '.join(by_name)}. Use it when the calls don't need each other's "
             "answers.")
    return Tool(name, about, run_all, schema={"type": "object", "required": ["calls"],
                "properties": {"calls": {"type": "array", "items": call}}})


def left_calls(ctx, name: str = "at_once") -> list[Action]:
    """The calls the last `name` result left for a human, not yet made since."""
    for i in range(len(ctx) - 1, -1, -1):
        if ctx[i].kind == "result" and ctx[i].name == name:
            inner = ctx[i].notes
            left = [Action(d.tool, d.args, f"{name} left this call for a human")
                    for j, d in enumerate(inner) if d.kind == "decision"
                    and (j + 1 == len(inner) or inner[j + 1].kind != "result")]
            made = sum(n.kind in ("decision", "no_move") for n in ctx[i + 1:])
            return left[made:]
    return []


def left_first(policy, name: str = "at_once"):
    """A brain that first makes the calls `name` left for a human, then asks `policy`."""
    if not callable(policy):
        raise TypeError("left_first takes a policy: a function (context, tools) "
                        "-> Action")

    def policy_after(ctx, tools) -> Action:
        left = left_calls(ctx, name)
        return left[0] if left else policy(ctx, tools)
    return policy_after


def at_once_action(message: dict, tools, name: str = "at_once") -> Action:
    """A model's reply as one move: its one call as chat.to_action reads it, or its
    several calls as one call to `name` (if the agent has it).

    >>> two = [{"function": {"name": "stock", "arguments": '{"item": "a"}'}},
    ...        {"function": {"name": "stock", "arguments": '{"item": "b", "item": 1}'}}]
    >>> tools = {"at_once": None}  # only its name is read here
    >>> for call in json.loads(at_once_action({"tool_calls": two}, tools).args)["calls"]:
    ...     print(call)
    {'tool': 'stock', 'args': {'item': 'a'}}
    {'tool': 'stock', 'args': '{"item": "b", "item": 1}'}
    """
    first = to_action(message, tools)  # the first call, and the words beside it
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if first.tool is None or name not in tools or not isinstance(calls, list) \
            or len(calls) < 2:
        return first
    made = []
    for call in calls:
        move = to_action({"tool_calls": [call]}, tools)  # each read as chat reads one
        if move.tool is None:  # a call that can't be read: no move, saying why
            return move
        try:  # read strictly, as the loop reads them; else the text, for run to refuse
            args = read_json(move.args)
        except ValueError:
            args = move.args
        made.append({"tool": move.tool, "args": args})
    return Action(name, {"calls": made}, first.reasoning)
