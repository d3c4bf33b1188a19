"""A Policy is the brain: it reads the notebook and picks the next move, an Action.

A policy is any callable `(context, tools) -> Action`, where `tools` is the agent's
coworkers by name, read-only. So a plain function is a brain, and so is a language
model (microagent.llm); a script and a replay are in microagent.script. Swap the
brain, keep the body. A brain that can't decide returns an Action naming no tool,
its reasoning saying why, and the loop writes that down as a no_move note.

Read the notebook by kind and name, never by position. Once a tool needs approval,
a verdict note sits between a decision and its result, and `ctx[-3]` is another
note: find the question by `m.kind == "question"`, and the last result of a tool
as the last note with `m.kind == "result" and m.name == tool`.

It does not run anything or check an Action against the tools: the loop does.
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
