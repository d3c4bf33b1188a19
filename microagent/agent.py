"""An Agent is the assistant who keeps working: decide, act, write it down, repeat.

Each turn the brain reads the notebook and picks an Action; the agent calls the
tool and writes both down: the decision (a note with the tool's name and
arguments) and what came back (a note from the tool). Before every turn it asks
why it should stop, and it stops for one of four reasons:

    done          a terminal tool (the final answer) has answered
    paused        a decision waits for a human's verdict (a tool that needs one)
    cancelled     the caller said stop
    out_of_steps  the step budget is spent; the agent says so in a note

The loop is a generator: `steps()` yields one Step per turn and the caller
drives it; `run()` drains it and hands back the notebook, and `why_stop(ctx)`
says why it ended. The brain's mistakes never crash the loop: an unknown tool,
arguments that don't fit, a tool that raises, each becomes an error note that
the brain reads next turn.

It has no state of its own between runs: the notebook is the state. Hand it a
saved Context and it goes on where that run stopped. The budget is counted off
the notebook too (the brain's moves since the last question), so a remark (the
loop's out-of-steps note, or anyone's) ends a run only once those moves reach
max_steps: handed to an agent with a bigger budget, an out-of-steps run goes on.

The rule that keeps it small: a chapter may wrap a Tool, wrap a Policy, or
write notes; it never adds a branch to this loop. Approval writes the human's
verdict and the tool's result (microagent.approval), an agent used as a tool is
a Tool (microagent.team), memory is a Policy that reads less (microagent.memory),
and a streamed brain reports its words to whoever made it (microagent.llm).

What it leaves out: a brain that fails to think at all (a bug in a Python brain,
a model server that is down) raises, and the loop does not catch it; every Step
already handed you the notebook as it stood. No threads, no async, no retries.
"""

from collections.abc import Callable
from types import MappingProxyType
from typing import NamedTuple

from microagent.context import Context
from microagent.message import ASSISTANT, USER, Message
from microagent.policy import Action
from microagent.tool import Tool, error_note

DONE, PAUSED, CANCELLED, OUT_OF_STEPS = "done", "paused", "cancelled", "out_of_steps"


class Step(NamedTuple):  # as frozen as a dataclass, and cheaper to make once a turn
    """One turn, as the caller sees it; the last Step of a run says why it stopped."""

    context: Context               # the notebook after this step: keep it to keep the run
    action: Action | None = None   # what the brain decided this turn
    result: Message | None = None  # the tool's note (None: nothing ran, or nothing could)
    stop: str | None = None        # on the last step only: why the run ended


class Agent:
    """The assistant: a brain (`policy`), coworkers (`tools`), a budget and a name."""

    def __init__(self, policy: Callable, tools: list[Tool], max_steps: int = 10, *,
                 name: str = "agent"):
        if not callable(policy):
            raise TypeError(f"the policy is the brain, a function (context, tools) -> "
                            f"Action, not {policy!r}")
        if not (isinstance(tools, (list, tuple))
                and all(isinstance(t, Tool) for t in tools)):
            raise TypeError("tools must be a list of Tools: Tool(name, description, fn), "
                            "or @as_tool")
        if type(max_steps) is not int or max_steps < 0:  # True is an int in Python
            raise ValueError(f"max_steps must be a whole number >= 0, not {max_steps!r}")
        self.policy = policy
        self.max_steps = max_steps
        self.name = name
        self.tools = MappingProxyType({t.name: t for t in tools})  # read-only
        if len(self.tools) != len(tools):
            raise ValueError(f"two tools share a name: {[t.name for t in tools]}")

    def steps(self, task: str | Context, cancel=None):
        """Run the loop on `task` (a question, or a notebook to go on with): a Step
        per turn, and a last Step that says why it stopped.

        `cancel` is a threading.Event (anything with .is_set()): once set, nothing new
        starts.
        """
        ctx = self.start(task)
        turns = _turns(ctx)  # counted from the notebook, so the budget spans a resume
        while not (stop := self.why_stop(ctx, cancel)) and turns < self.max_steps:
            action = self.policy(ctx, self.tools)  # decide
            decision = self.decision(action)
            result = self.act(action)  # act
            # write it down: the decision, then what came of it (nothing, if it waits)
            ctx = ctx.add(decision) if result is None else ctx.add(decision, result)
            turns += 1
            yield Step(ctx, action, result)
        if stop is None:  # the budget is spent: a note says so, and ends the run
            stop = OUT_OF_STEPS
            ctx = ctx.add(Message(ASSISTANT, f"out of steps: stopped after {turns} "
                                  f"turn{'' if turns == 1 else 's'} without an answer",
                                  self.name))
        yield Step(ctx, stop=stop)

    def run(self, task: str | Context, cancel=None) -> Context:
        """Run until the loop stops; hand back the notebook (why_stop says why)."""
        for step in self.steps(task, cancel):
            pass
        return step.context

    def start(self, task: str | Context) -> Context:
        """The notebook a run starts from: a new one with the question, or yours."""
        if isinstance(task, str):
            return Context((Message(USER, task),))
        if not (isinstance(task, Context) and any(m.kind == "question" for m in task)):
            raise TypeError("give the agent a question, or a notebook that holds one "
                            "(load a saved one with microagent.saving.from_json(text))")
        return task

    def why_stop(self, ctx: Context, cancel=None) -> str | None:
        """Why a run with this notebook stops now, read off its last note (None: go on).

        DONE, PAUSED, OUT_OF_STEPS, or CANCELLED (only if `cancel` is set). An empty
        notebook has no last note, so nothing stops it: None.
        """
        last = ctx.last()
        if last is None:
            return None
        kind = last.kind
        if kind == "result" and not last.error and last.name in self.tools \
                and self.tools[last.name].terminal:  # a terminal tool has answered
            return DONE
        if kind in ("decision", "verdict"):  # nothing answered it: it waits for a human
            return PAUSED
        if kind == "remark" and _turns(ctx) >= self.max_steps:  # once the budget is spent
            return OUT_OF_STEPS
        if cancel and cancel.is_set():
            return CANCELLED
        return None

    def decision(self, action: Action) -> Message:
        """The note of what the brain decided: the call it makes, or why it made none."""
        if not isinstance(action, Action):
            raise TypeError(f"the policy must return an Action, not {action!r}")
        no_move = action.tool is None  # then the reasoning says what was wrong
        return Message(ASSISTANT, action.reasoning, self.name, action.tool,
                       None if no_move else action.args, error=no_move)

    def act(self, action: Action) -> Message | None:
        """Carry out a move: its result or error note, or None if nothing runs (yet)."""
        if action.tool is None:  # no move: there is nothing to call
            return None
        tool = self.tools.get(action.tool)
        if tool is None:
            return error_note(action.tool, f"there is no tool named {action.tool!r}; "
                                           f"the tools are: {', '.join(self.tools)}")
        if tool.needs_approval:  # it waits for a human; a call that can't fit is refused
            read = tool.read(action.args)
            return read if isinstance(read, Message) else None
        return tool.run(action.args)


def _turns(ctx):
    """How many moves the brain has made since the run was last asked a question.

    >>> ask, say = Message(USER, "2 + 2?"), Message(ASSISTANT, "", "me", "add", "{}")
    >>> _turns(Context((say, ask, say, Message("tool", "4", "add"), say)))
    2
    """
    moves = 0
    for m in reversed(ctx):
        if m.kind == "question":
            break
        moves += m.kind in ("decision", "no_move")
    return moves
