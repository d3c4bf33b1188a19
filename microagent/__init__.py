"""microagent: the five pieces of every agent framework, small enough for one sitting.

Read them in this order: message, context, tool, policy, agent. Every other
file in this folder is a chapter: one small module built on those five, which
wraps a Tool, wraps a Policy, or writes notes. Every folder is the workshop:
what faces the world (a hardened model client, an HTTP host, MCP), built on the
book's public names only.
"""

from microagent.message import ASSISTANT, ROLES, SYSTEM, TOOL, USER, Message
from microagent.context import Context
from microagent.tool import Tool, error_note, final_answer, read_json
from microagent.policy import Action
from microagent.agent import CANCELLED, DONE, OUT_OF_STEPS, PAUSED, Agent, Step
from microagent.script import actions, replay, scripted
from microagent.saving import from_json, to_json
from microagent.schema import as_tool
from microagent.team import agent_tool
from microagent.trace import show, story
from microagent.approval import approve, deny, gate

__all__ = [
    "SYSTEM", "USER", "ASSISTANT", "TOOL", "ROLES", "Message",
    "Context",
    "Tool", "final_answer", "error_note", "read_json",
    "Action",
    "Agent", "Step", "DONE", "PAUSED", "CANCELLED", "OUT_OF_STEPS",
    "scripted", "replay", "actions",
    "to_json", "from_json",
    "as_tool", "agent_tool",
    "story", "show",
    "gate", "approve", "deny",
]
