"""A Policy is the brain: it reads the notebook and picks the next move.

A move is an Action: which tool to call, with which arguments, and a short note
on why. A policy is any callable `(context, tools) -> Action`, where `tools` is
the agent's coworkers by name (read-only: a brain can't change the agent). So a
plain function is a brain, and so is a language model behind an HTTP call.
Swap the brain, keep the body: the agent, its tools and its notebook stay the same.

A brain that could not make up its mind (a model whose reply was cut off, or
held no call it could read) says so with an Action that names no tool: its
reasoning says what was wrong, the loop writes that down as a no_move note,
and the brain reads it on its next turn.

Brains that need no model, a script and a replay of a saved run, are built
on top in microagent.script.

What it leaves out: it does not run anything or check an Action against the
tools (the loop does that, and turns every mismatch into a note); a language
model as a brain lives on top, in microagent.llm.
"""

import json
from dataclasses import dataclass



@dataclass(frozen=True)
class Action:
    """A move the brain picks: the tool to call (None: no move), its arguments, why."""

    tool: str | None
    args: str = "{}"     # JSON text; a dict passed in is turned into JSON text
    reasoning: str = ""  # why, in a few words (no tool: what was wrong); the note says it

    def __post_init__(self):
        if not (isinstance(self.tool, str) or self.tool is None) \
                or not isinstance(self.reasoning, str):
            raise TypeError(f"an Action's tool is a string (or None) and its reasoning a "
                            f"string, not {self!r}")
        # a dict would make a frozen Action mutable and unhashable, so the arguments are
        # kept as JSON text. A string is kept as it came: a model may send broken JSON,
        # and the loop turns that into an error note it can read.
        if not isinstance(self.args, str):
            object.__setattr__(self, "args", json.dumps(self.args, ensure_ascii=False))
