"""A run drawn as a picture: the notebook as a sequence diagram, in SVG.

    draw(ctx)                      # in Jupyter: shows the picture
    draw(ctx).svg                  # the SVG text, for a web page
    draw(ctx).save("run.svg")      # a file

The one rule: every piece of text is escaped, so what a model or a tool wrote stays
text, never markup, in its own order, and in full (a character that prints as
nothing, like U+200B, shows as its escape; see `_text`). It only reads the notebook;
it does not check that the notes make a sensible story (see microagent.invariants),
and it does not lay out a run that uses dozens of tools in less width than dozens
of lanes.
"""

import os
import re
from dataclasses import dataclass
from xml.sax.saxutils import escape

from microagent import trace
from microagent.context import Context
from microagent.message import Message

# pixels: a lane's width, a row's height, the lanes' names on top, the row numbers
LANE, ROW, HEAD, GUTTER = 160, 26, 52, 44
CHAR = 6.6  # the width of a character of the 11px monospace font, to cut labels to fit
COLORS = {"question": "#222", "call": "#1f5fa8", "result": "#666", "error": "#c0392b",
          "approved": "#fff3cd", "denied": "#f8d7da", "waiting": "#ffe8a1",
          "no_move": "#fbe3d6", "note": "#eeeeee"}
HALO = 'stroke="white" stroke-width="3" paint-order="stroke"'  # text over a lifeline
# subtle: XML may not hold these characters even escaped (NUL, most control codes,
# a lone surrogate), so they become a replacement mark
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
# what prints as nothing (a zero-width space: A12\u200b34 would read A1234) or reorders
# what follows it (a right-to-left override shows $97 as $79): each is shown as its
# escape, as the story shows it, so a label reads as what it holds, in its order
UNSEEN = re.compile(f"[{trace.UNSEEN}]")


@dataclass(frozen=True)
class Picture:
    """A drawn run: its SVG text, and the lanes and rows it holds."""

    svg: str                    # the whole picture, as SVG text
    lanes: tuple[str, ...]      # the lanes' names, left to right
    rows: int                   # a row per note (inner ones too), and per mark of a wait
    width: int                  # in pixels: grows with the lanes
    height: int                 # in pixels: grows with the rows

    def _repr_svg_(self) -> str:  # Jupyter shows an object with this as the picture
        return self.svg

    def __repr__(self) -> str:
        return (f"<picture, {self.width} x {self.height} px: {self.rows} rows across "
                f"{len(self.lanes)} lanes ({', '.join(self.lanes)})>")

    def save(self, path: str | os.PathLike) -> None:
        """Write the picture to an .svg file."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.svg)


def draw(ctx: Context | tuple[Message, ...]) -> Picture:
    """The notebook as a sequence diagram: a lane per one in the run, a row per note.

    Each lane is someone in the office: the person who asks, the agent, and each tool
    the agent called, in the order they first appear. Each row is one note, numbered
    as in the notebook (ctx[5] is row 5; 7.2 is ctx[7].notes[2]), and drawn by its
    kind: a question is an arrow into the agent, a decision an arrow to its tool, a
    result a dashed arrow back (red when it is an error). A band across the picture
    marks what is not a call: where the run waited for a human and what they ruled, a
    reply of the brain's that held no move (and what was wrong with it), or a note
    the agent wrote itself. An agent used as a tool gets a lane of its own, and its
    run is drawn between the call and its answer, with its own tools beside it.

    Long runs stay readable: every row has the same height, so the picture grows
    downward, never wider; a label is cut to fit on its row, and the whole text is in
    a tooltip (hover over the row).
    """
    notes = ctx if isinstance(ctx, tuple) else None
    if isinstance(ctx, Context):
        notes = ctx.messages
    if notes is None or not all(isinstance(m, Message) for m in notes):
        raise TypeError(f"draw takes a Context, not a {type(ctx).__name__}: a Step's is "
                        "step.context, and saved text loads with from_json(text)")
    agent = next((m.name for m in notes if m.kind in ("decision", "no_move") and m.name),
                 "agent")
    # key -> (name, what it is); a tool's key is its agent's key, "/", its name
    lanes = {"person": ("person", "asks"), "agent": (agent, "agent")}
    rows = []  # (number, kind, from lane, to lane or None for a band, label, tooltip)
    _walk(notes, "person", "agent", "", lanes, rows)
    width, height = GUTTER + LANE * len(lanes), HEAD + ROW * len(rows) + 8
    x = {key: GUTTER + LANE * i + LANE // 2 for i, key in enumerate(lanes)}  # its middle
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    svg += [_lane(*lanes[key], x[key], height) for key in lanes]
    svg += [_row(HEAD + ROW * r, row, x, width) for r, row in enumerate(rows)]
    svg.append("</svg>")
    names = tuple(name for name, what in lanes.values())
    return Picture("\n".join(svg) + "\n", names, len(rows), width, height)


def _walk(notes: tuple[Message, ...], asker: str, agent: str, prefix: str, lanes: dict,
          rows: list) -> None:
    """Add a row per note (and per note inside one) to `rows`, new lanes to `lanes`."""
    owner = lanes[agent][0]
    for i, m in enumerate(notes):
        number, tool = f"{prefix}{i}", (m.tool if m.kind != "result" else m.name) or "?"
        lane = f"{agent}/{tool}"  # each agent has lanes of its own for its tools
        if m.kind in ("decision", "result"):
            what = "tool" if agent == "agent" else f"a tool of {owner}"
            lanes.setdefault(lane, (tool, what))
        if m.kind == "system":
            said = f"{owner} was told: {m.content}"
            rows.append((number, "note", agent, None, said, m.content))
        elif m.kind == "question":
            asked = f"{lanes[asker][0]} asked: {m.content}"
            rows.append((number, "question", asker, agent, m.content, asked))
        elif m.kind == "verdict":  # a human ruled on the decision just before it
            said = f"waited for a human: {m.name or 'someone'} {_ruled(notes, i, tool)}"
            rows.append((number, "denied" if m.args is None else "approved", agent, None,
                         said, said))
        elif m.kind == "decision":
            call, why = f"{tool} {m.args}", f" ({m.content})" if m.content else ""
            said = f"{owner} thought: {m.content}\ncalls {call}"
            rows.append((number, "call", agent, lane, call + why, said))
            if i == len(notes) - 1:  # nothing answered it: the run stopped here, paused
                said = f"waiting for a human to decide on {call}"
                rows.append(("", "waiting", agent, None, said, said))
        elif m.kind == "no_move":  # the brain's reply held no move: what was wrong
            said = f"{owner} made no move: {m.content}"
            rows.append((number, "no_move", agent, None, said, said))
        elif m.kind == "remark":  # a note the agent wrote itself (out of steps, say)
            said = f"{owner}: {m.content}"
            rows.append((number, "note", agent, None, said, m.content))
        else:  # a result
            if m.notes:  # an agent used as a tool: its run in its lane, then its answer
                lanes[lane] = (tool, "agent used as a tool")
                _walk(m.notes, agent, lane, f"{number}.", lanes, rows)
            kind = "error" if m.error else "result"
            said = f"{tool} returned: {m.content}"
            rows.append((number, kind, lane, agent, m.content, said))


def _ruled(notes: tuple[Message, ...], i: int, tool: str) -> str:
    """What a verdict ruled, in words (and what was asked, where the human edited it)."""
    m = notes[i]
    if m.args is None:
        return f"denied {tool}: {m.content}"
    asked = notes[i - 1].args if i > 0 else None
    edit = f" (it asked for {asked})" if asked not in (None, m.args) else ""
    return f"approved {tool} with {m.args}{edit}"


# ---- the SVG for one lane, and for one row


def _lane(name: str, what: str, middle: int, height: int) -> str:
    """A lane: its name in a box on top, and a dashed lifeline down the picture."""
    fit = (LANE - 16) / CHAR
    return (f'<g class="lane"><title>{_text(f"{name} ({what})")}</title>'
            f'<rect x="{middle - LANE // 2 + 6}" y="6" width="{LANE - 12}" height="34" '
            f'rx="4" fill="#f4f6fa" stroke="#99a"/>'
            f'<text x="{middle}" y="21" text-anchor="middle" font-weight="bold">'
            f'{_text(name, fit)}</text>'
            f'<text x="{middle}" y="34" text-anchor="middle" fill="#667">'
            f'{_text(what, fit)}</text>'
            f'<line x1="{middle}" y1="40" x2="{middle}" y2="{height - 4}" stroke="#ccd" '
            f'stroke-dasharray="3 3"/></g>')


def _row(top: int, row: tuple, x: dict, width: int) -> str:
    """A row: its number, then an arrow from lane to lane with its label, or a band."""
    number, kind, start, end, label, tooltip = row
    out = (f'<g class="{kind}"><title>{_text(tooltip)}</title>'
           # an invisible box the row's height, so all of the row shows the tooltip
           f'<rect y="{top}" width="{width}" height="{ROW}" fill-opacity="0"/>'
           f'<text x="4" y="{top + 17}" fill="#999">{number}</text>')
    if end is None:
        dashed = ' stroke-dasharray="4 2"' if kind == "waiting" else ""
        fit = (width - GUTTER - 20) / CHAR
        return out + (f'<rect x="{GUTTER}" y="{top + 3}" width="{width - GUTTER - 4}" '
                      f'height="{ROW - 6}" rx="3" fill="{COLORS[kind]}" '
                      f'stroke="#bbb"{dashed}/>'
                      f'<text x="{GUTTER + 8}" y="{top + 17}">{_text(label, fit)}</text>'
                      '</g>')
    a, b = x[start], x[end]
    tip = b - 6 if b > a else b + 6  # where the arrowhead begins
    y = top + 19  # the arrow's height on its row
    dashed = ' stroke-dasharray="5 3"' if kind in ("result", "error") else ""
    fit = (width - min(a, b) - 16) / CHAR  # a row holds one arrow: its label may run on
    return out + (f'<line x1="{a}" y1="{y}" x2="{tip}" y2="{y}" stroke="{COLORS[kind]}"'
                  f'{dashed}/>'
                  f'<polygon points="{b},{y} {tip},{y - 4} {tip},{y + 4}" '
                  f'fill="{COLORS[kind]}"/>'
                  f'<text x="{min(a, b) + 8}" y="{top + 14}" fill="{COLORS[kind]}" '
                  f'{HALO}>'
                  f'{_text(label, fit)}</text></g>')


def _text(text: str, fit: float | None = None) -> str:
    """Text made safe for SVG; cut to `fit` characters on one line, if given.

    Escaped, so it stays text, never markup; a mark that would reorder it (U+202E)
    or that prints as nothing (U+200B) shows as its escape.

    >>> _text('<img src=x onerror="alert(1)">', fit=12)
    '&lt;img src=x…'
    >>> _text('a NUL \\x00 is no XML, & a lone \\ud800 neither')
    'a NUL \ufffd is no XML, &amp; a lone \ufffd neither'
    >>> print(_text('A1234\\u202e, $97 for A12\\u200b34'))
    A1234\\u202e, $97 for A12\\u200b34
    """
    text = UNSEEN.sub(lambda c: ascii(c.group())[1:-1], NOT_XML.sub("\ufffd", text))
    if fit is not None:
        text = " ".join(text.split())
        if len(text) > fit:
            text = text[:max(int(fit) - 1, 1)].rstrip() + "…"
    return escape(text)
