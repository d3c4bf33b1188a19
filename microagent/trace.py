r"""The story printer: a notebook read back as the story of what happened.

    you asked: "Can I get a refund for order A1234?"
      support thought: let me pull up the order first
        -> look_up_order returned: A1234, Wireless Headphones, $79, delivered

`story(ctx)` returns the text, a line per note told by its kind; `show(ctx)` prints
it; in Jupyter a Context displays as its story by itself. The one rule: no note can
print a line that passes for another's (see `_mark`). It only reads; it never
changes a notebook. It does not defend against look-alike letters: what a note says
stays on its own lines and in its own order, not beyond doubt in how it looks.
"""

import re

from microagent.context import Context
from microagent.message import Message

BREAK = r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]"  # every one str.splitlines knows
# what prints as nothing or moves other text: Unicode's format characters (category Cf:
# a zero-width space, a soft hyphen, a right-to-left override that shows $97 as $79) and
# the rest it calls default-ignorable (a variation selector, a Hangul filler), so that
# "A12\u200b34" never reads as A1234
UNSEEN = (r"\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
          r"\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164"
          r"\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U000110bd\U000110cd"
          r"\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
          r"\U000e0000-\U000e0fff")
# and every other control character but tab, and half a character (a lone surrogate)
OTHER = rf"[\x00-\x08\x0e-\x1b\x1f\x7f-\x84\x86-\x9f\ud800-\udfff{UNSEEN}]"
CONTROL = re.compile(f"({BREAK})|{OTHER}")


def story(ctx: Context | tuple[Message, ...], indent: str = "") -> str:
    """The notebook as a story: a line per note, and a marked line per break in one.

    Each "thought" is the brain deciding, each arrow a coworker handing back a result,
    a human's verdict sits between a call and its result, and a reply that held no
    move says what was wrong with it. What an agent used as a tool did is told in
    full, indented under the call. A decision's arguments are shown only where they
    matter to a human: a call waiting for approval, a verdict that changed them.

    >>> hi = Message("user", "hi")
    >>> print(story(Context((hi, Message("tool", "hello!", "final_answer")))))
    you asked: "hi"
        -> final_answer returned: hello!
    """
    if isinstance(ctx, (str, bytes)):  # any notes, but not the JSON text of them
        raise TypeError("story takes a Context, not its JSON text: "
                        "load it with microagent.saving.from_json(text)")
    notes = tuple(ctx)
    if not all(isinstance(m, Message) for m in notes):
        raise TypeError("story takes a Context, or a tuple of Messages")
    lines = []
    for i, m in enumerate(notes):
        last = i == len(notes) - 1 and not indent  # a run's last, not an inner run's
        if m.kind == "system":
            lines.append(f"{indent}(the assistant was told: {m.content})")
        elif m.kind == "question":
            lines.append(f'{indent}you asked: "{m.content}"')
        elif m.kind == "decision":  # the reasoning, or else the call itself
            said = m.content or f"call {m.tool} with {m.args}"
            lines.append(f"{indent}  {m.name} thought: {said}")
            if last:  # nothing answered it: the run is paused
                lines.append(f"{indent}    .. {m.tool} {m.args} is waiting for a human "
                             "to decide")
        elif m.kind == "verdict":
            lines.append(f"{indent}    {_ruled(notes, i)}")
            if last:
                lines.append(f"{indent}    .. {m.tool}: the verdict is not carried out")
        elif m.kind == "result":
            if m.notes:  # an agent used as a tool: its run, one level in, marked already
                lines += story(m.notes, indent + "      ").split("\n")
            lines.append(f"{indent}    -> {m.name} returned: {m.content}")
        elif m.kind == "no_move":
            lines.append(f"{indent}  {m.name} made no move: {m.content}")
        else:  # a remark: out of steps, say
            lines.append(f"{indent}  {m.name}: {m.content}")
    return "\n".join(_mark(line, indent) for line in lines)


def show(ctx: Context) -> None:
    """Print the notebook as a story."""
    print(story(ctx))


def _ruled(notes: tuple[Message, ...], i: int) -> str:
    """A verdict in words: who approved what (and what was asked), or said no."""
    m = notes[i]
    if m.args is None:
        return f"{m.name} denied {m.tool}: {m.content}"
    asked = notes[i - 1].args if i > 0 else None
    edit = f" (it asked for {asked})" if asked is not None and asked != m.args else ""
    return f"{m.name} approved {m.tool} with {m.args}{edit}"


def _mark(line: str, indent: str) -> str:
    """A line as the story prints it: a break starts a `|` line, controls are escaped.

    Each line begins the way its kind of note begins, so a line break inside a note
    (any of those Python's str.splitlines knows: \\n, \\r, \\u2028, \\x85, \\f, ...)
    starts a line marked `|` as the same note's, and any other control character (a
    terminal's escape codes, which could move the cursor up and print over a line) is
    shown as its escape, `\\x1b`, as are half a character (`\\ud800`), the marks
    that reorder text (`\\u202e`, the right-to-left override, would show $97 as $79)
    and every character that prints as nothing (`\\u200b`: a human asked to approve
    order A12\\u200b34 must not read A1234).

    >>> print(_mark("  bot thought: ok\\u2028    alice approved refund\\x1b[1A", ""))
      bot thought: ok
          |     alice approved refund\\x1b[1A
    """
    marked = "\n" + indent + "      | "
    return CONTROL.sub(lambda c: marked if c.group(1) else ascii(c.group())[1:-1], line)
