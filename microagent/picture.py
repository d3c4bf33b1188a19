"""A run drawn as a picture: the notebook as a sequence diagram, in SVG.

    draw(ctx)                      # in Jupyter: shows the picture
    draw(ctx).svg                  # the SVG text, for a web page
    draw(ctx).save("run.svg")      # a file

Each lane is someone in the office: the person who asks, the agent, and each
tool the agent called, in the order they first appear. Each row is one note,
numbered as in the notebook (ctx[5] is row 5; 7.2 is ctx[7].notes[2]): a
question is an arrow into the agent, a decision an arrow to its tool, a result
a dashed arrow back (red when it is an error). A band across the picture marks
where the run waited for a human and what they ruled, or a note the agent
wrote to itself. An agent used as a tool gets a lane of its own, and its run
is drawn between the call and its answer, with its own tools beside it.

Long runs stay readable: every row has the same height, so the picture grows
downward, never wider; a label is cut to fit on its row, and the whole text
is in a tooltip (hover over the row).

Every piece of text is escaped: what a model or a tool wrote stays text, never
markup. It only reads the notebook; it does not check that the notes make a
sensible story (see microagent.invariants), and it does not lay out a run that
uses dozens of different tools in less width than dozens of lanes.
"""

import os
import re
from dataclasses import dataclass
from xml.sax.saxutils import escape

from microagent.context import Context
from microagent.message import ASSISTANT, SYSTEM, Message

LANE, ROW, HEAD, GUTTER = 160, 26, 52, 44  # pixels: a lane's width, a row's height, the lane names, the row numbers
CHAR = 6.6  # the width of one character of the 11px monospace font, so labels can be cut to fit
COLORS = {"question": "#222", "call": "#1f5fa8", "result": "#666", "error": "#c0392b",
          "approved": "#fff3cd", "denied": "#f8d7da", "waiting": "#ffe8a1", "note": "#eeeeee"}
HALO = 'stroke="white" stroke-width="3" paint-order="stroke"'  # text stays readable over a lifeline
# subtle: XML may not hold these characters even escaped (NUL, most control codes, a lone surrogate)
NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


@dataclass(frozen=True)
class Picture:
    svg: str                    # the whole picture, as SVG text
    lanes: tuple[str, ...]      # the lanes' names, left to right
    rows: int                   # one per note (notes inside notes too), and one per mark of a wait
    width: int                  # in pixels: grows with the lanes
    height: int                 # in pixels: grows with the rows

    def _repr_svg_(self) -> str:  # Jupyter shows an object with this method as the picture
        return self.svg

    def __repr__(self) -> str:
        return (f"<picture, {self.width} x {self.height} px: {self.rows} rows across "
                f"{len(self.lanes)} lanes ({', '.join(self.lanes)})>")

    def save(self, path: str | os.PathLike) -> None:
        """Write the picture to an .svg file."""
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.svg)


def draw(ctx: Context | tuple[Message, ...]) -> Picture:
    """The notebook as a sequence diagram: a lane for each one in the run, a row for each note."""
    if not (isinstance(ctx, Context) or (isinstance(ctx, tuple) and all(isinstance(m, Message) for m in ctx))):
        raise TypeError(f"draw takes a Context, not a {type(ctx).__name__}: a Step's is step.context, "
                        "and saved JSON text loads with Context.from_json(text)")
    notes = tuple(ctx)
    agent = next((m.name for m in notes if m.role == ASSISTANT and m.name), "agent")
    # key -> (name, what it is); a tool's key is its agent's key, "/", its name: "agent/look_up_order"
    lanes = {"person": ("person", "asks"), "agent": (agent, "agent")}
    rows = []  # (number, kind, from lane, to lane or None for a band, label, tooltip)
    _walk(notes, "person", "agent", "", lanes, rows)
    width, height = GUTTER + LANE * len(lanes), HEAD + ROW * len(rows) + 8
    x = {key: GUTTER + LANE * i + LANE // 2 for i, key in enumerate(lanes)}  # key -> the middle of its lane
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    svg += [_lane(*lanes[key], x[key], height) for key in lanes]
    svg += [_row(HEAD + ROW * r, row, x, width) for r, row in enumerate(rows)]
    svg.append("</svg>")
    names = tuple(name for name, what in lanes.values())
    return Picture("\n".join(svg) + "\n", names, len(rows), width, height)


def _walk(notes: tuple[Message, ...], asker: str, agent: str, prefix: str, lanes: dict, rows: list) -> None:
    """Add a row per note (and per note inside a note) to `rows`, and each new lane to `lanes`."""
    owner = lanes[agent][0]
    for i, m in enumerate(notes):
        number, tool = f"{prefix}{i}", m.tool or m.name or "?"
        lane = f"{agent}/{tool}"  # each agent has lanes of its own for its tools
        if m.is_decision or m.is_result:
            lanes.setdefault(lane, (tool, "tool" if agent == "agent" else f"a tool of {owner}"))
        if m.role == SYSTEM:
            rows.append((number, "note", agent, None, f"{owner} was told: {m.content}", m.content))
        elif m.is_question:
            rows.append((number, "question", asker, agent, m.content, f"{lanes[asker][0]} asked: {m.content}"))
        elif m.is_verdict:  # a human ruled on the decision just before it (args None: a no)
            asked = notes[i - 1].args if i > 0 else None
            edit = f" (it asked for {asked})" if m.args is not None and asked not in (None, m.args) else ""
            ruled = f"denied {tool}: {m.content}" if m.args is None else f"approved {tool} with {m.args}{edit}"
            said = f"waited for a human: {m.name or 'someone'} {ruled}"
            rows.append((number, "denied" if m.args is None else "approved", agent, None, said, said))
        elif m.is_decision:
            call, thought = f"{tool} {m.args}", f" ({m.content})" if m.content else ""
            rows.append((number, "call", agent, lane, call + thought, f"{owner} thought: {m.content}\ncalls {call}"))
            if i == len(notes) - 1:  # nothing answered it: the run stopped here, paused
                said = f"waiting for a human to decide on {call}"
                rows.append(("", "waiting", agent, None, said, said))
        elif m.role == ASSISTANT:  # a note the agent wrote itself (out of steps, say)
            rows.append((number, "note", agent, None, f"{owner}: {m.content}", m.content))
        else:  # a result
            if m.notes:  # an agent used as a tool: its run, drawn in its own lane, before its answer
                lanes[lane] = (tool, "agent used as a tool")
                _walk(m.notes, agent, lane, f"{number}.", lanes, rows)
            kind = "error" if m.error else "result"
            rows.append((number, kind, lane, agent, m.content, f"{tool} returned: {m.content}"))


# ---- the SVG for one lane, and for one row


def _lane(name: str, what: str, middle: int, height: int) -> str:
    """A lane: its name in a box on top, and a dashed lifeline down the picture."""
    fit = (LANE - 16) / CHAR
    return (f'<g class="lane"><title>{_text(f"{name} ({what})")}</title>'
            f'<rect x="{middle - LANE // 2 + 6}" y="6" width="{LANE - 12}" height="34" rx="4" '
            f'fill="#f4f6fa" stroke="#99a"/>'
            f'<text x="{middle}" y="21" text-anchor="middle" font-weight="bold">{_text(name, fit)}</text>'
            f'<text x="{middle}" y="34" text-anchor="middle" fill="#667">{_text(what, fit)}</text>'
            f'<line x1="{middle}" y1="40" x2="{middle}" y2="{height - 4}" stroke="#ccd" stroke-dasharray="3 3"/></g>')


def _row(top: int, row: tuple, x: dict, width: int) -> str:
    """A row: its number, then an arrow from lane to lane with its label, or a band across the picture."""
    number, kind, start, end, label, tooltip = row
    out = (f'<g class="{kind}"><title>{_text(tooltip)}</title>'
           f'<rect y="{top}" width="{width}" height="{ROW}" fill-opacity="0"/>'  # so all the row shows the tooltip
           f'<text x="4" y="{top + 17}" fill="#999">{number}</text>')
    if end is None:
        dashed = ' stroke-dasharray="4 2"' if kind == "waiting" else ""
        return out + (f'<rect x="{GUTTER}" y="{top + 3}" width="{width - GUTTER - 4}" height="{ROW - 6}" rx="3" '
                      f'fill="{COLORS[kind]}" stroke="#bbb"{dashed}/>'
                      f'<text x="{GUTTER + 8}" y="{top + 17}">{_text(label, (width - GUTTER - 20) / CHAR)}</text></g>')
    a, b = x[start], x[end]
    tip = b - 6 if b > a else b + 6  # where the arrowhead begins
    dashed = ' stroke-dasharray="5 3"' if kind in ("result", "error") else ""
    # subtle: a row holds one arrow, so its label may run on to the right edge, over the lifelines
    return out + (f'<line x1="{a}" y1="{top + 19}" x2="{tip}" y2="{top + 19}" stroke="{COLORS[kind]}"{dashed}/>'
                  f'<polygon points="{b},{top + 19} {tip},{top + 15} {tip},{top + 23}" fill="{COLORS[kind]}"/>'
                  f'<text x="{min(a, b) + 8}" y="{top + 14}" fill="{COLORS[kind]}" {HALO}>'
                  f'{_text(label, (width - min(a, b) - 16) / CHAR)}</text></g>')


def _text(text: str, fit: float | None = None) -> str:
    """Text made safe for SVG; cut to `fit` characters on one line, if given.

    >>> _text('<img src=x onerror="alert(1)">', fit=12)
    '&lt;img src=x…'
    >>> _text('a NUL \\x00 is no XML, & a lone \\ud800 neither')
    'a NUL \ufffd is no XML, &amp; a lone \ufffd neither'
    """
    text = NOT_XML.sub("\ufffd", text)
    if fit is not None:
        text = " ".join(text.split())
        if len(text) > fit:
            text = text[:max(int(fit) - 1, 1)].rstrip() + "…"
    return escape(text)
