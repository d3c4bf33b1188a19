"""microagent: the five pieces of every agent framework, small enough to read in one sitting.

Read them in this order: message, context, tool, policy, agent. Every other
module is one small file built on top of those five (a chapter), and every
folder is the workshop: what faces the world, built on the chapters' public names.
"""

from microagent.message import ASSISTANT, ROLES, SYSTEM, TOOL, USER, Message
from microagent.context import Context
from microagent.tool import Tool, error_note, final_answer, read_json
from microagent.policy import Action
from microagent.agent import CANCELLED, DONE, OUT_OF_STEPS, PAUSED, Agent, Step
from microagent.script import actions, replay, scripted
from microagent.saving import from_json, to_json

__all__ = [
    "SYSTEM", "USER", "ASSISTANT", "TOOL", "ROLES", "Message",
    "Context",
    "Tool", "final_answer", "error_note", "read_json",
    "Action",
    "Agent", "Step", "DONE", "PAUSED", "CANCELLED", "OUT_OF_STEPS",
    "scripted", "replay", "actions",
    "to_json", "from_json",
]
