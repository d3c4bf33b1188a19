"""An Agent is the assistant who keeps working: decide, act, write it down, repeat.

Each turn the brain reads the notebook and picks an Action; the agent writes that
decision down (a note with the tool's name and arguments), calls the tool, and
writes down what came back (a note named after the tool). Before every turn it
asks why it should stop, and it stops for one of four reasons:

    done          a terminal tool (the final answer) has answered
    paused        a decision waits for a human's verdict (a tool that needs approval)
    cancelled     the caller said stop
    out of steps  the step budget is spent; the agent says so in a note

The loop is a generator: `steps()` yields one Step per turn and the caller drives
it; `run()` just drains it and hands back the last Step, whose `stop` says why.
The brain's mistakes never crash the loop: an unknown tool, arguments that don't
fit, a tool that raises, each becomes an error note that the brain reads next turn.

It has no state of its own between runs: the notebook is the state. Hand it a
saved Context and it goes on where that run stopped, carrying out first the
verdict a human wrote into it (see microagent.approval).

What it leaves out: a brain that fails to think at all (a bug in a Python brain,
a model server that is down) raises, and the loop does not catch it; every Step
already handed you the notebook as it stood. No threads, no async, no retries, no
agents as coworkers: those are compositions on top.
"""

import contextlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass

from microagent.context import Context
from microagent.message import ASSISTANT, SYSTEM, TOOL, USER, Message
from microagent.policy import Action
from microagent.tool import Tool, read_args

DONE, OUT_OF_STEPS, PAUSED, CANCELLED = "done", "out of steps", "paused", "cancelled"
ERROR = "error: "  # how the loop's own problem notes start, for the brain; code tests note.error


@dataclass(frozen=True)
class Step:
    """One turn, as the caller sees it; the last Step of a run says why it stopped."""

    context: Context               # the whole notebook after this step: keep it to keep the run
    action: Action | None = None   # what the brain decided this turn
    result: Message | None = None  # the tool note that came back
    stop: str | None = None        # on the last step only: why the run ended
    event: object = None           # something a thinking brain reported (a piece of text)

    @property
    def answer(self) -> str:
        """On a run's last Step: the final answer, or a plain note of why there is none."""
        return self.context.last().content if self.stop == DONE else f"(no answer: {self.stop})"


class Agent:
    """The assistant: a brain (`policy`), its coworkers (`tools`), a name and a step budget.

    `steps()` runs the loop a Step at a time; `run()` runs it to the end and hands back
    the last Step; `answer()` hands back only the final answer.
    """

    def __init__(self, policy: Callable, tools: list[Tool], *, name: str = "agent", description: str = "",
                 system: str | None = None, max_steps: int = 10):
        if not (isinstance(tools, (list, tuple)) and all(isinstance(t, Tool) for t in tools)):
            raise TypeError("tools must be a list of Tools: make one from a function with @as_tool")
        if not (type(max_steps) is int and max_steps >= 0):  # subtle: True is an int in Python
            raise ValueError(f"max_steps must be a whole number, 0 or more, not {max_steps!r}")
        self.policy, self.name, self.description = policy, name, description
        self.system, self.max_steps = system, max_steps
        self.tools = {t.name: t for t in tools}  # name -> Tool
        if len(self.tools) != len(tools):
            raise ValueError(f"two tools share a name: {[t.name for t in tools]}")

    # -----------------------------------------------------------------------------
    # the loop

    def steps(self, question: str | None = None, *, context: Context | None = None, cancel=None):
        """Run the loop, yielding a Step per turn and a last Step that says why it stopped.

        `cancel` is a threading.Event (anything with .is_set()): once set, nothing new starts.
        """
        ctx = self._open(question, context)
        used = _turns(ctx)  # subtle: counted from the notebook, so the budget spans resumes
        if ctx.last().is_verdict and not _is_set(cancel):  # a human has ruled: carry it out first
            asked = ctx.pending
            ctx = ctx.add(self._settle(asked, ctx.last()))
            yield Step(ctx, Action(asked.tool, asked.args, asked.content), ctx.last())
        moves = []  # a brain may ask for several tools at once: each is a turn of its own
        while not (stop := self._stop(ctx, used, cancel)):
            if not moves:
                moves = yield from self._decide(ctx, cancel)  # decide
                continue  # subtle: ask why to stop again first: the caller may have cancelled while it thought
            action, used = moves.pop(0), used + 1
            tool, args, error = self._check(action)
            decision = Message(ASSISTANT, action.reasoning, name=self.name, tool=action.tool, args=action.args)
            if error is None and tool.needs_approval:  # it waits for a human: the next check says paused
                ctx = ctx.add(decision)
                continue
            ctx = ctx.add(decision, error or self._call(tool, args))  # act, and write both down at once
            yield Step(ctx, action, ctx.last())
        if stop == OUT_OF_STEPS and ctx.last().role != ASSISTANT:  # say so, unless said already
            ctx = ctx.add(Message(ASSISTANT, f"out of steps: stopped after {used} turns without an answer",
                                  name=self.name))
        yield Step(ctx, stop=stop)

    def run(self, question: str | None = None, *, context: Context | None = None, cancel=None) -> Step:
        """Run until the loop stops; hand back the last Step: `.stop` says why, `.context` is the notebook."""
        for step in self.steps(question, context=context, cancel=cancel):
            pass
        return step

    def answer(self, question: str | None = None, *, context: Context | None = None, cancel=None) -> str:
        """Run, and hand back the final answer, or say plainly why there is none."""
        return self.run(question, context=context, cancel=cancel).answer

    # -----------------------------------------------------------------------------
    # the moves the loop is made of

    def _open(self, question: str | None, context: Context | None) -> Context:
        """The notebook this run starts from: a fresh one or the one handed in, with the question."""
        ctx = Context() if context is None else context
        if not isinstance(ctx, Context):
            raise TypeError("context must be a Context; load a saved one with Context.from_json(text)")
        if len(ctx) == 0 and self.system is not None:
            ctx = ctx.add(Message(SYSTEM, self.system))
        if question is not None:
            if ctx.pending is not None:
                raise ValueError(f"this run waits on {ctx.pending.tool}: finish it first with agent.run(context=ctx), "
                                 "after a human's verdict")
            ctx = ctx.add(Message(USER, question))
        if not any(m.is_question for m in ctx):
            raise ValueError("give the agent something to do: agent.run('a question') or run(context=saved)")
        return ctx

    def _stop(self, ctx: Context, used: int, cancel) -> str | None:
        """Why the run must stop now, or None to go on."""
        tool = self.tools.get(ctx.last().name) if ctx.last().is_result else None
        if tool is not None and tool.terminal and not ctx.last().error:  # a terminal tool has answered
            return DONE
        if ctx.last().is_decision:  # the loop leaves a decision unanswered only for a human
            return PAUSED
        if _is_set(cancel):
            return CANCELLED
        if used >= self.max_steps:
            return OUT_OF_STEPS
        return None

    def _decide(self, ctx: Context, cancel):
        """Ask the brain for its move(s), passing on what a thinking brain yields on the way."""
        out = self.policy(ctx, tuple(self.tools.values()))
        if inspect.isgenerator(out):
            with contextlib.closing(out) as thinking:  # subtle: closed also when the caller stops pulling steps
                try:
                    while True:
                        yield Step(ctx, event=next(thinking))
                        if _is_set(cancel):
                            return []  # nothing the brain was deciding is written
                except StopIteration as end:
                    out = end.value  # what the generator returned: its Action(s)
        moves = [out] if isinstance(out, Action) else out
        if not (isinstance(moves, (list, tuple)) and moves and all(isinstance(a, Action) for a in moves)):
            raise TypeError(f"the policy must return an Action or a list of them, not {out!r}")
        return list(moves)

    def _check(self, action: Action) -> tuple[Tool | None, dict | None, Message | None]:
        """The tool and arguments for an action, or an error note saying what is wrong."""
        tool = self.tools.get(action.tool)
        if tool is None:
            return None, None, _error(action.tool, f"there is no tool named {action.tool!r}; "
                                      f"the tools are: {', '.join(self.tools)}")
        try:
            args = read_args(action.args)
        except ValueError as e:
            return tool, None, _error(tool.name, f"bad arguments for {tool.name}: {e}")
        problem = tool.check(args)
        if problem:
            return tool, None, _error(tool.name, f"bad arguments for {tool.name}: {problem}")
        return tool, args, None

    def _call(self, tool: Tool, args: dict) -> Message:
        """Call the tool; what it hands back, or the exception it raises, becomes its result note."""
        try:
            out = tool(**args)
        except Exception as e:  # the tool's failure is news for the brain, not a crash
            ran = getattr(e, "inner_run", None)  # what an agent used as a tool did before it failed
            notes = ran.messages if isinstance(ran, Context) else ()
            return _error(tool.name, f"{tool.name} failed: {type(e).__name__}: {e}", notes)
        if isinstance(out, Message):  # a whole note (an agent used as a tool): keep its notes
            return Message(TOOL, out.content, name=tool.name, notes=out.notes, error=out.error)
        return Message(TOOL, out, name=tool.name)

    def _settle(self, asked: Message, verdict: Message) -> Message:
        """Carry out a human's verdict on the waiting decision: run the tool as approved, or say no."""
        if asked is None or verdict.tool != asked.tool:  # never run a tool the brain did not ask for
            raise ValueError(f"the verdict is on {verdict.tool}, but the run waits on {asked and asked.tool}")
        if verdict.args is None:  # a verdict without arguments is a denial
            return Message(TOOL, f"denied by {verdict.name}: {verdict.content}", name=verdict.tool, error=True)
        tool, args, error = self._check(Action(verdict.tool, verdict.args))
        return error or self._call(tool, args)


def _error(tool_name: str, problem: str, notes: tuple[Message, ...] = ()) -> Message:
    return Message(TOOL, ERROR + problem, name=tool_name, notes=notes, error=True)


def _is_set(cancel) -> bool:
    return cancel is not None and cancel.is_set()


def _turns(ctx: Context) -> int:
    """How many decisions the run has made since it was last asked a question (folded ones too)."""
    notes = ctx.unfolded()
    asked = max(i for i, m in enumerate(notes) if m.is_question)
    return sum(m.is_decision for m in notes[asked:])
