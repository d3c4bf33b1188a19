"""The story printer: a notebook read back as the story of what happened.

    you asked: "Can I get a refund for order A1234?"
      support thought: let me pull up the order first
        -> look_up_order returned: A1234, Wireless Headphones, $79, delivered

Each thought line is the brain deciding, each arrow line a coworker handing
back a result. What an agent used as a tool did is told in full, indented
under the call. `story(ctx)` returns the text; `show(ctx)` prints it. In
Jupyter a Context displays as its story by itself.

It only reads; it never changes a notebook, and it shows the arguments of a
decision only where they matter to a human (a call waiting for approval, a
verdict that changed them).
"""

from microagent.context import Context
from microagent.message import ASSISTANT, SYSTEM, Message


def story(ctx: Context | tuple[Message, ...], indent: str = "") -> str:
    """The notebook as a story, one line per note.

    >>> from microagent.message import Message
    >>> print(story(Context().add(Message("user", "hi"), Message("tool", "hello!", name="final_answer"))))
    you asked: "hi"
        -> final_answer returned: hello!
    """
    if isinstance(ctx, (str, bytes)):  # it reads any notes, but not the JSON text of them
        raise TypeError("story takes a Context, not its JSON text: load it with Context.from_json(text)")
    messages = list(ctx)
    lines = []
    for i, m in enumerate(messages):
        if m.role == SYSTEM:
            lines.append(f"{indent}(the assistant was told: {m.content})")
        elif m.is_question:
            lines.append(f'{indent}you asked: "{m.content}"')
        elif m.is_verdict and m.args is None:
            lines.append(f"{indent}    {m.name} denied {m.tool}: {m.content}")
        elif m.is_verdict:  # an approval; it follows the decision it rules on
            asked = messages[i - 1].args if i > 0 else None
            edit = f" (it asked for {asked})" if asked is not None and asked != m.args else ""
            lines.append(f"{indent}    {m.name} approved {m.tool} with {m.args}{edit}")
        elif m.is_decision:  # the reasoning, or else the call itself
            said = m.content or f"call {m.tool} with {m.args}"
            lines.append(f"{indent}  {m.name} thought: {said}")
            if i == len(messages) - 1 and not indent:  # nothing answered it: the run is paused
                lines.append(f"{indent}    .. {m.tool} {m.args} is waiting for a human to decide")
        elif m.role == ASSISTANT:  # the assistant's own remark: out of steps, a memory summary
            lines.append(f"{indent}  {m.name}: {m.content}")
        elif m.is_result:
            if m.notes:
                lines += story(m.notes, indent + "      ").split("\n")  # marked already, one level down
            lines.append(f"{indent}    -> {m.name} returned: {m.content}")
    # subtle: a note's own line breaks are marked, so no note can print a line that passes for another's
    return "\n".join(line.replace("\n", "\n" + indent + "      | ") for line in lines)


def show(ctx: Context) -> None:
    """Print the notebook as a story."""
    print(story(ctx))
