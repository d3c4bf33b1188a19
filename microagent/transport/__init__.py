"""The workshop's transport: the LLM brain's HTTP, hardened against the servers of the world.

    from microagent.llm import chat_policy
    from microagent.transport import hardened

    brain = chat_policy("llama3.1", "http://localhost:11434/v1", send=hardened())

`hardened(timeout=60, deadline=300, retries=3)` makes a `send`, the one seam of
microagent.llm's brain, that retries politely, bounds every wait and every whole
reply, hears a cancel while it waits, follows no redirect, uses no proxy unless
asked, and keeps the API key out of everything a server sends back
(README.md says what each piece is for). `stand_in` is a stand-in model server on
127.0.0.1 with scripted replies, for tests and notebooks.

It imports only the book's public names (microagent.llm's LLMError, problem and
WHAT_TO_DO); the book imports nothing from here.
"""

from microagent.transport.client import MAX_REPLY, MAX_WAIT, READ, TICK, hardened
from microagent.transport.keys import Key, mended

__all__ = ["hardened", "MAX_REPLY", "MAX_WAIT", "READ", "TICK", "Key", "mended"]
