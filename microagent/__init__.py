"""microagent: the five pieces of every agent framework, small enough to read in one sitting.

Read them in this order: message, context, tool, policy, agent. Every other
module is one small file built on top of those five.
"""

from microagent.message import ASSISTANT, ROLES, SYSTEM, TOOL, USER, Message
from microagent.context import Context
from microagent.tool import Tool, final_answer
from microagent.policy import Action, decisions, replay, scripted
from microagent.agent import CANCELLED, DONE, ERROR, OUT_OF_STEPS, PAUSED, Agent, Step
from microagent.schema import as_tool
from microagent.team import agent_tool
from microagent.trace import show, story
from microagent.approval import approve, deny, gate

__all__ = [
    "SYSTEM", "USER", "ASSISTANT", "TOOL", "ROLES", "Message",
    "Context",
    "Tool", "final_answer",
    "Action", "decisions", "scripted", "replay",
    "Agent", "Step", "DONE", "OUT_OF_STEPS", "PAUSED", "CANCELLED", "ERROR",
    "as_tool", "agent_tool",
    "story", "show",
    "gate", "approve", "deny",
]
