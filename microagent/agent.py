"""An Agent is the assistant who keeps working: decide, act, write it down, repeat.

Each turn the brain reads the notebook and picks an Action; the agent writes that
decision down (a note with the tool's name and arguments), calls the tool, and
writes down what came back (a note named after the tool). It stops when a
terminal tool has run (done), when the step budget is spent (out of steps, said
in a note), when a tool that needs a human's approval comes up (paused, with the
decision waiting in the notebook), or when the caller cancels (cancelled).

The loop is a generator: `steps()` yields one Step per turn and the caller
drives it; `run()` just drains it. The brain's mistakes never crash the loop:
an unknown tool, arguments that don't fit, a tool that raises, each becomes a
tool note starting with "error:" that the brain reads on its next turn.

It has no state of its own between runs: the notebook is the state. Hand it a
saved Context and it goes on where that run stopped.

What it leaves out: a brain that fails to think at all (a bug in a Python brain,
a model server that is down) raises, and the loop does not catch it; every
Step already handed you the notebook as it stood, so drive `steps()` to keep
it. No threads, no async, no retries of its own: those are compositions on top.
"""

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass

from microagent.context import Context
from microagent.message import ASSISTANT, SYSTEM, TOOL, USER, Message
from microagent.policy import Action
from microagent.tool import Tool

DONE, OUT_OF_STEPS, PAUSED, CANCELLED = "done", "out of steps", "paused", "cancelled"
ERROR = "error: "  # how the loop's own problem notes start, for the brain; code tests note.error


@dataclass(frozen=True)
class Step:
    context: Context               # the whole notebook after this step: keep it to keep the run
    action: Action | None = None   # what the brain decided this turn
    result: Message | None = None  # the tool note that came back
    stop: str | None = None        # on the last step only: why the run ended
    event: object = None           # something a thinking brain reported (a piece of text)


class Agent:
    def __init__(self, policy: Callable, tools: list[Tool], *, name: str = "agent", description: str = "",
                 system: str | None = None, max_steps: int = 10):
        tools_ok = isinstance(tools, (list, tuple)) and all(isinstance(t, Tool) for t in tools)
        if not (callable(policy) and tools_ok and isinstance(name, str) and type(max_steps) is int and max_steps >= 0):
            raise TypeError("an Agent takes a policy (a function: context, tools -> Action) and a list of Tools (make "
                            "one from a function with @as_tool); its name is a string, its max_steps a whole number, "
                            "0 or more")  # subtle: type(...) is int, since True is an int in Python
        self.policy, self.name, self.description = policy, name, description
        self.system, self.max_steps = system, max_steps
        self.tools = {t.name: t for t in tools}
        if len(self.tools) != len(tools):
            raise ValueError(f"two tools share a name: {[t.name for t in tools]}")

    def steps(self, user_input: str | None = None, *, context: Context | None = None, cancel=None):
        """Run the loop, yielding a Step per turn and a last Step that says why it stopped.

        `cancel` is anything with .is_set() (a threading.Event): once set, nothing new starts.
        """
        if cancel is not None and not hasattr(cancel, "is_set"):
            raise TypeError("cancel is a threading.Event (anything with .is_set()), or None")
        ctx = self._open(user_input, context)
        used = _turns(ctx)  # subtle: counted from the notebook, so the budget spans resumes
        while True:
            pending, last = ctx.pending, ctx.last()
            if pending is not None and pending is last:  # waiting for a human's verdict
                yield Step(ctx, stop=PAUSED)
                return
            if self._done(last):  # a terminal tool has answered (perhaps in an earlier process)
                yield Step(ctx, stop=DONE)
                return
            if _is_set(cancel):
                yield Step(ctx, stop=CANCELLED)
                return
            if pending is not None:  # a human has ruled on the waiting decision: settle it
                if last.tool != pending.tool:  # never run a tool the brain did not ask for
                    raise ValueError(f"the verdict is on {last.tool}, but the run waits on {pending.tool}")
                ctx = ctx.add(self._settle(last))
                yield Step(ctx, Action(pending.tool, pending.args, pending.content), ctx.last())
                continue
            if used >= self.max_steps:
                if not (last.role == ASSISTANT and last.tool is None):  # not said already
                    ctx = ctx.add(Message(ASSISTANT, f"out of steps: stopped after {used} turns "
                                          "without an answer", name=self.name))
                yield Step(ctx, stop=OUT_OF_STEPS)
                return
            actions = yield from self._decide(ctx, cancel)  # passes on what a thinking brain yields
            for action in actions:
                # subtle: a brain may ask for several tools at once. Each is a turn of its
                # own; the ones still left when the run must stop are dropped.
                if used >= self.max_steps or _is_set(cancel):
                    break
                used += 1
                decision = Message(ASSISTANT, action.reasoning, name=self.name,
                                   tool=action.tool, args=action.args)
                tool, args, error = self._check(action)
                if error is None and tool.needs_approval:
                    ctx = ctx.add(decision)  # and the top of the loop pauses
                    break
                ctx = ctx.add(decision, error or self._call(tool, args))
                yield Step(ctx, action, ctx.last())
                if self._done(ctx.last()):
                    break  # and the top of the loop says done

    def run(self, user_input: str | None = None, *, context: Context | None = None, cancel=None) -> Context:
        """Run until the loop stops; hand back the whole notebook."""
        return _last(self.steps(user_input, context=context, cancel=cancel)).context

    def answer(self, user_input: str | None = None, *, context: Context | None = None, cancel=None) -> str:
        """Run, and hand back the final answer, or say plainly why there is none."""
        return _answer(_last(self.steps(user_input, context=context, cancel=cancel)))

    def as_tool(self, name: str | None = None, description: str | None = None) -> Tool:
        """This agent as a coworker of another agent; its whole run is kept in the result note.

        The inner run starts afresh each call and must finish in it: if it pauses for a
        human, the outer agent hears "(no answer: paused)" and the inner run ends there.
        A cancel reaches the inner run only between the outer run's turns.
        """
        tool_name = name or self.name

        def ask(request: str) -> Message:
            last = None
            try:
                for last in self.steps(request):
                    pass
            except Exception as e:  # the inner brain failed: the failure carries the run so far (see _call)
                e.inner_run = Context() if last is None else last.context
                raise
            return Message(TOOL, _answer(last), name=tool_name, notes=last.context.messages,
                           error=last.stop != DONE)  # no answer (out of steps, paused) is a failure
        return Tool(tool_name, description or self.description or f"ask {self.name}", ask)

    def _open(self, user_input, context) -> Context:
        """The notebook this run starts from: a fresh one, or the one handed in, plus the question."""
        context = Context() if context is None else context
        if not isinstance(context, Context):
            raise TypeError("context must be a Context; load a saved one with Context.from_json(text)")
        if len(context) == 0 and self.system is not None:
            context = context.add(Message(SYSTEM, self.system))
        if user_input is not None:
            if context.pending is not None:
                raise ValueError(f"this run waits on {context.pending.tool}: " + (
                    "approve or deny it first" if context.pending is context.last()
                    else "the verdict is in, so resume it first with agent.run(context=ctx)"))
            context = context.add(Message(USER, user_input))
        if not any(m.role == USER and m.tool is None for m in context):
            raise ValueError("give the agent something to do: agent.run('a question') or run(context=saved)")
        return context

    def _decide(self, ctx, cancel):
        """Ask the brain; pass on what a thinking (generator) brain yields; return its Actions."""
        out = self.policy(ctx, tuple(self.tools.values()))
        if inspect.isgenerator(out):
            thinking = out  # the generator itself, to close; `out` becomes what it returns
            try:
                while True:
                    try:
                        event = next(thinking)
                    except StopIteration as end:
                        out = end.value
                        break
                    yield Step(ctx, event=event)
                    if _is_set(cancel):
                        return []  # nothing the brain was deciding is written
            finally:
                thinking.close()  # subtle: also when the caller stops pulling steps mid-thought
        actions = [out] if isinstance(out, Action) else out
        if not isinstance(actions, (list, tuple)) or not actions or not all(isinstance(a, Action) for a in actions):
            raise TypeError(f"the policy must return an Action or a list of them, not {out!r}")
        return actions

    def _check(self, action: Action) -> tuple[Tool | None, dict | None, Message | None]:
        """The tool and arguments for an action, or an error note saying what is wrong."""
        tool = self.tools.get(action.tool)
        if tool is None:
            return None, None, _error(action.tool, f"there is no tool named {action.tool!r}; "
                                      f"the tools are: {', '.join(self.tools)}")
        try:
            args = json.loads(action.args)
        except ValueError as e:
            return tool, None, _error(tool.name, f"the arguments are not valid JSON ({e})")
        problem = tool.check(args)
        if problem:
            return tool, None, _error(tool.name, f"bad arguments for {tool.name}: {problem}")
        return tool, args, None

    def _call(self, tool: Tool, args: dict) -> Message:
        try:
            out = tool(**args)
        except Exception as e:  # the tool's failure is news for the brain, not a crash
            ran = getattr(e, "inner_run", Context())  # what an agent used as a tool did before it failed
            return _error(tool.name, f"{tool.name} failed: {type(e).__name__}: {e}", ran.messages)
        if isinstance(out, Message):  # a whole note (an agent used as a tool): keep its notes
            return Message(TOOL, out.content, name=tool.name, notes=out.notes, error=out.error)
        return Message(TOOL, out, name=tool.name)

    def _settle(self, verdict: Message) -> Message:
        """Run, or refuse, the decision a human has ruled on (see microagent.approval)."""
        if verdict.args is None:  # a verdict without arguments is a denial
            return Message(TOOL, f"denied by {verdict.name}: {verdict.content}", name=verdict.tool, error=True)
        tool, args, error = self._check(Action(verdict.tool, verdict.args))
        return error or self._call(tool, args)

    def _done(self, note: Message) -> bool:
        """Is this note what a terminal tool handed back (not an error), so the job is done?"""
        tool = self.tools.get(note.name) if note.role == TOOL else None
        return tool is not None and tool.terminal and not note.error


def _error(tool_name: str, problem: str, notes: tuple[Message, ...] = ()) -> Message:
    return Message(TOOL, ERROR + problem, name=tool_name, notes=notes, error=True)


def _is_set(cancel) -> bool:
    return cancel is not None and cancel.is_set()


def _last(steps) -> Step:
    for step in steps:
        pass
    return step


def _answer(last: Step) -> str:
    """The final answer, or a plain note of why there is none (never the last tool's output)."""
    return last.context.last().content if last.stop == DONE else f"(no answer: {last.stop})"


def _turns(ctx: Context) -> int:
    """How many decisions the run has made since the last question it was asked."""
    asked = max(i for i, m in enumerate(ctx) if m.role == USER and m.tool is None)
    return sum(m.role == ASSISTANT and m.tool is not None for m in ctx.messages[asked:])
