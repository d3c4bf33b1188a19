"""A Policy is the brain: it reads the notebook and picks the next move.

A move is an Action: which tool to call, with which arguments, and a short note
on why. A policy is any callable `(context, tools) -> Action`, so a plain
function is a brain, and so is a language model behind an HTTP call. Swap the
brain, keep the body: the agent, its tools and its notebook stay the same.

Two more shapes are allowed, for brains that need them: a policy may return
several Actions at once (a model that asks for two tools in one reply), and it
may be a generator that yields events while it thinks (pieces of streamed text)
and then returns its Action(s).

Here too are brains that need no model: `scripted` plays a fixed list of
actions, which is how tests drive an agent deterministically, and `replay`
plays back the decisions recorded in a saved notebook.

What it leaves out: it does not run anything or check an Action against the
tools (the loop does that, and turns every mismatch into a note); a language
model as a brain lives on top, in microagent.llm.
"""

import json
from dataclasses import dataclass

from microagent.context import Context


@dataclass(frozen=True)
class Action:
    """A move the brain picks: the tool to call, its arguments as JSON text, and why."""

    tool: str
    args: str = "{}"     # JSON text; a dict passed in is turned into JSON text
    reasoning: str = ""  # why, in a few words: it becomes the decision note's content

    def __post_init__(self):
        if not (isinstance(self.tool, str) and isinstance(self.reasoning, str)):
            raise TypeError(f"an Action's tool and reasoning are strings, not {self!r}")
        # subtle: a dict would make a frozen Action mutable and unhashable, so the
        # arguments are kept as JSON text. A string is kept as it came: a model may
        # send broken JSON, and the loop turns that into an error note it can read.
        if not isinstance(self.args, str):
            object.__setattr__(self, "args", json.dumps(self.args, ensure_ascii=False))


def decisions(ctx: Context) -> list[Action]:
    """The Actions recorded in a notebook's decision notes, in order (those a summary folded too)."""
    if not isinstance(ctx, Context):
        raise TypeError(f"this takes a Context, not {type(ctx).__name__}: load saved text with Context.from_json(text)")
    return [Action(m.tool, m.args, m.content) for m in ctx.unfolded() if m.is_decision]


def scripted(*actions: Action):
    """A brain that plays `actions` in order: the n-th decision of a run is actions[n].

    It counts the decisions already in the notebook instead of keeping a counter,
    so a run saved half way and loaded in another process goes on correctly.
    """
    def policy(ctx: Context, tools) -> Action:
        n = sum(m.is_decision for m in ctx.unfolded())  # decisions made so far
        if n >= len(actions):
            raise IndexError(f"the script is over: the run asked for decision {n + 1}, "
                             f"and the script holds {len(actions)}")
        return actions[n]
    return policy


def replay(saved: Context):
    """A brain that makes again the decisions recorded in a saved notebook."""
    return scripted(*decisions(saved))
