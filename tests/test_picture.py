"""A run drawn as a picture: well-formed SVG whose lanes and arrows are the notebook's notes, every text escaped."""

import json
import pathlib
import subprocess
import sys
import unicodedata
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings, strategies as st

from hard_parts import run_checked
from microagent.agent import Agent
from microagent.approval import approve, deny
from microagent.context import Context
from microagent.demo import QUESTION, look_up_order, support_agent
from microagent.message import ASSISTANT, SYSTEM, TOOL, USER, Message
from microagent.picture import CHAR, HEAD, ROW, draw
from microagent.policy import Action
from microagent.saving import from_json, to_json
from microagent.schema import as_tool
from microagent.script import scripted
from microagent.team import agent_tool
from microagent.tool import final_answer
from microagent.trace import story

ROOT = pathlib.Path(__file__).resolve().parent.parent
SVG = "{http://www.w3.org/2000/svg}"
BANDS = ("approved", "denied", "waiting", "no_move", "note")

office = support_agent()  # no approver: the refund waits for a human's verdict
refund = office.tools["issue_refund"]


def read(svg: str) -> tuple[list[tuple[str, str]], list[tuple]]:
    """The lanes (name, what it is) and the rows (number, kind, from lane, to lane) a picture draws.

    An arrow's ends are read off where it is drawn: the x of its line's start and of
    its arrowhead's tip, matched to the x of each lane's lifeline. A lane is named
    by its name, or by "name (what it is)" where two lanes share a name.
    """
    root = ET.fromstring(svg)  # raises if the SVG is not well-formed XML
    groups = root.findall(f"{SVG}g")
    lanes, xs = [], []
    for g in (g for g in groups if g.get("class") == "lane"):
        lanes.append(tuple(t.text for t in g.findall(f"{SVG}text")))
        xs.append(g.find(f"{SVG}line").get("x1"))
    names = [name for name, what in lanes]
    at = {x: name if names.count(name) == 1 else f"{name} ({what})" for x, (name, what) in zip(xs, lanes, strict=True)}
    rows = []
    for g in (g for g in groups if g.get("class") != "lane"):
        number = g.find(f"{SVG}text").text or ""
        if g.get("class") in BANDS:
            rows.append((number, g.get("class"), None, None))
        else:
            tip = g.find(f"{SVG}polygon").get("points").split(",")[0]
            rows.append((number, g.get("class"), at[g.find(f"{SVG}line").get("x1")], at[tip]))
    return lanes, rows


def texts(svg: str) -> list[str]:
    """Every text and tooltip in a picture, as a reader's browser would show it."""
    return [e.text or "" for e in ET.fromstring(svg).iter() if e.tag in (f"{SVG}text", f"{SVG}title")]


def paused_refund() -> Context:
    return run_checked(office, QUESTION)


def test_the_refund_run_is_drawn_lane_by_lane_and_note_by_note():
    ctx = run_checked(office, approve(paused_refund(), refund, by="alice"))
    lanes, rows = read(draw(ctx).svg)
    assert lanes == [("person", "asks"), ("support", "agent"), ("look_up_order", "tool"), ("check_policy", "tool"),
                     ("issue_refund", "tool"), ("final_answer", "tool")]
    # user, assistant, tool, assistant, tool, assistant, (alice's verdict), tool, assistant, tool
    assert rows == [("0", "question", "person", "support"),
                    ("1", "call", "support", "look_up_order"), ("2", "result", "look_up_order", "support"),
                    ("3", "call", "support", "check_policy"), ("4", "result", "check_policy", "support"),
                    ("5", "call", "support", "issue_refund"),
                    ("6", "approved", None, None),
                    ("7", "result", "issue_refund", "support"),
                    ("8", "call", "support", "final_answer"), ("9", "result", "final_answer", "support")]
    assert len(rows) == len(ctx)  # a row per note, in the notebook's order


def test_the_mark_says_who_decided_and_the_arguments_a_human_changed():
    ctx = approve(paused_refund(), refund, by="alice", args={"order_id": "A1234", "amount": 70})
    svg = draw(run_checked(office, ctx)).svg
    assert ('waited for a human: alice approved issue_refund with {"order_id": "A1234", "amount": 70} '
            '(it asked for {"order_id": "A1234", "amount": 79})') in texts(svg)


def test_a_paused_run_ends_with_a_mark_that_it_waits_for_a_human():
    svg = draw(paused_refund()).svg
    lanes, rows = read(svg)
    assert rows[-2:] == [("5", "call", "support", "issue_refund"), ("", "waiting", None, None)]
    assert 'waiting for a human to decide on issue_refund {"order_id": "A1234", "amount": 79}' in texts(svg)


def test_a_denial_is_marked_with_who_said_no_and_why_and_its_result_is_an_error():
    svg = draw(run_checked(office, deny(paused_refund(), refund, "return the item first", by="bob"))).svg
    lanes, rows = read(svg)
    assert rows[6:8] == [("6", "denied", None, None), ("7", "error", "issue_refund", "support")]
    assert "waited for a human: bob denied issue_refund: return the item first" in texts(svg)


def test_an_inner_agent_has_its_own_lane_and_its_run_is_drawn_between_the_call_and_its_answer():
    clerk = Agent(scripted(Action("look_up_order", {"order_id": "A1234"}, "look it up"),
                           Action("final_answer", {"answer": "headphones, $79"}, "report")),
                  [look_up_order, final_answer], name="clerk")
    boss = Agent(scripted(Action("clerk", {"request": "what is A1234?"}, "ask the clerk"),
                          Action("final_answer", {"answer": "done"}, "that's all")),
                 [agent_tool(clerk, "clerk"), final_answer], name="boss")
    lanes, rows = read(draw(run_checked(boss, "look into A1234")).svg)
    assert lanes == [("person", "asks"), ("boss", "agent"), ("clerk", "agent used as a tool"),
                     ("look_up_order", "a tool of clerk"), ("final_answer", "a tool of clerk"),
                     ("final_answer", "tool")]
    # user, boss calls the clerk, [the clerk's run: user, assistant, tool, assistant, tool], clerk's answer, ...
    assert rows == [("0", "question", "person", "boss"),
                    ("1", "call", "boss", "clerk"),
                    ("2.0", "question", "boss", "clerk"),
                    ("2.1", "call", "clerk", "look_up_order"), ("2.2", "result", "look_up_order", "clerk"),
                    ("2.3", "call", "clerk", "final_answer (a tool of clerk)"),
                    ("2.4", "result", "final_answer (a tool of clerk)", "clerk"),
                    ("2", "result", "clerk", "boss"),
                    ("3", "call", "boss", "final_answer (tool)"), ("4", "result", "final_answer (tool)", "boss")]


def test_what_a_model_or_a_tool_wrote_stays_text_never_markup():
    @as_tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        return '<img src=x onerror=alert(1)> & "</text></g><script>alert(2)</script>'

    agent = Agent(scripted(Action("fetch", {"url": "<b>x</b>"}, "</title><svg onload=alert(3)>"),
                           Action("final_answer", {"answer": "]]> &amp; <!-- -->"})), [fetch, final_answer],
                  name="<i>bot</i>")
    svg = draw(run_checked(agent, "<script>alert(4)</script>")).svg
    root = ET.fromstring(svg)
    assert {e.tag for e in root.iter()} == {SVG + tag for tag in ("svg", "rect", "g", "title", "text", "line",
                                                                 "polygon")}
    assert not any(k.startswith("on") for e in root.iter() for k in e.attrib)
    seen = texts(svg)
    assert "fetch returned: <img src=x onerror=alert(1)> & \"</text></g><script>alert(2)</script>" in seen
    assert "<i>bot</i> thought: </title><svg onload=alert(3)>\ncalls fetch {\"url\": \"<b>x</b>\"}" in seen
    assert "person asked: <script>alert(4)</script>" in seen and "<i>bot</i>" in seen


def test_characters_xml_cannot_hold_become_a_replacement_mark_and_the_file_still_parses(tmp_path):
    # a NUL, a terminal's escape code and a lone surrogate (which JSON can carry) in a loaded notebook
    saved = json.dumps({"format": "microagent.context/1", "messages": [
        {"role": "user", "content": "hi\u0000 \u001b[31mred\ud800"}]})
    picture = draw(from_json(saved))
    assert "person asked: hi\ufffd \ufffd[31mred\ufffd" in texts(picture.svg)
    picture.save(tmp_path / "run.svg")  # a lone surrogate could not even be written as UTF-8
    assert ET.parse(tmp_path / "run.svg").getroot().tag == SVG + "svg"


def test_a_mark_that_would_reorder_a_label_shows_as_its_escape():
    # U+202E (right-to-left override) after the order id would show the amount 97 as 79
    paused = support_agent().run(QUESTION)
    asked = paused.last()
    ctx = Context(paused.messages[:-1] + (Message(ASSISTANT, asked.content, asked.name, asked.tool,
                                                  '{"order_id": "A1234\u202e", "amount": 97}'),))
    svg = draw(ctx).svg
    assert "\u202e" not in svg and '"A1234\\u202e", "amount": 97}' in svg


# Unicode's default-ignorable code points (DerivedCoreProperties.txt): they print as nothing
IGNORABLE = [(0xAD, 0xAD), (0x34F, 0x34F), (0x61C, 0x61C), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
             (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F),
             (0xFEFF, 0xFEFF), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
             (0xE0000, 0xE0FFF)]


def unseen(c: str) -> bool:
    """Does this character print as nothing, or move other text: a format character, or default-ignorable?"""
    return unicodedata.category(c) == "Cf" or any(a <= ord(c) <= b for a, b in IGNORABLE)


def test_what_prints_as_nothing_shows_as_its_escape_in_the_picture_and_in_the_story():
    # the approver must read the order id that will be booked: A12, five characters that print as nothing, 34
    hidden = "A12\u200b\u2060\ufeff\u00ad\u180e34"
    ctx = Context((Message(USER, f"refund {hidden}"),
                   Message(ASSISTANT, "", "support", "issue_refund", json.dumps({"order_id": hidden}, ensure_ascii=False))))
    shown = "A12\\u200b\\u2060\\ufeff\\xad\\u180e34"
    assert f'waiting for a human to decide on issue_refund {{"order_id": "{shown}"}}' in texts(draw(ctx).svg)
    assert story(ctx).splitlines() == [f'you asked: "refund {shown}"',
                                       f'  support thought: call issue_refund with {{"order_id": "{shown}"}}',
                                       f'    .. issue_refund {{"order_id": "{shown}"}} is waiting for a human to decide']
    # and each of them, the way every other character is kept as it is
    every = [chr(i) for i in range(0x110000) if not 0xD800 <= i <= 0xDFFF]
    hiding = "".join(c for c in every if unseen(c))
    assert len(hiding) > 4000  # the tag characters alone are 4,096 (E0000-E0FFF)
    said = "".join(f"{c}." for c in hiding)
    told = story(Context((Message(USER, said),)))
    drawn = "".join(texts(draw(Context((Message(USER, said),))).svg))
    escapes = "".join(ascii(c)[1:-1] + "." for c in hiding)
    assert told == f'you asked: "{escapes}"' and escapes in drawn
    kept = "".join(c for c in every[0x20:0x3000] if not unseen(c) and c.isprintable())
    assert story(Context((Message(USER, kept),))) == f'you asked: "{kept}"'


notes = st.text(max_size=40)  # any text at all, control characters and lone surrogates included


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["question", "decision", "result", "error", "said", "verdict",
                                           "no_move", "system"]), notes, notes), max_size=12))
def test_any_notes_make_a_well_formed_picture_with_every_text_in_its_tooltip(made):
    # not a sensible run, only notes, any text at all: the picture still parses, one row per note
    kinds = {"question": lambda c, n: Message(USER, c),
             "decision": lambda c, n: Message(ASSISTANT, c, name=n, tool="t", args="{}"),
             "result": lambda c, n: Message(TOOL, c, name=n),
             "error": lambda c, n: Message(TOOL, c, name=n, error=True, notes=(Message(USER, n),)),
             "said": lambda c, n: Message(ASSISTANT, c, name=n),
             "verdict": lambda c, n: Message(USER, c, name=n, tool="t"),
             "no_move": lambda c, n: Message(ASSISTANT, c, name=n, error=True),
             "system": lambda c, n: Message(SYSTEM, c)}
    ctx = Context(tuple(kinds[kind](content, name) for kind, content, name in made))
    picture = draw(ctx)
    waits = ctx.last() is not None and ctx.last().kind == "decision"  # nothing answered it: a mark
    assert picture.rows == sum(1 + len(m.notes) for m in ctx) + waits
    seen = "\n".join(texts(picture.svg))
    for m in ctx:
        # XML reads a carriage return as a newline, so a tooltip shows it as one
        shown = "".join(c if c in "\t\n\r" or " " <= c <= "\ud7ff" or "\ue000" <= c <= "\ufffd" or c > "\uffff"
                        else "\ufffd" for c in m.content).replace("\r\n", "\n").replace("\r", "\n")
        shown = "".join(ascii(c)[1:-1] if unseen(c) else c for c in shown)
        assert shown in seen


def test_a_long_run_grows_downward_and_never_wider():
    @as_tool
    def order_state(order_id: str) -> str:
        """Where an order is."""
        return f"{order_id}: delivered, and a very long note about it " * 5

    def clerk(n: int) -> Agent:
        script = [Action("order_state", {"order_id": f"A{i}"}, "next " * 30) for i in range(n - 1)]
        return Agent(scripted(*script, Action("final_answer", {"answer": "all fine"})), [order_state, final_answer],
                     name="clerk", max_steps=n)

    short, long = draw(run_checked(clerk(2), "check them")), draw(run_checked(clerk(40), "check them all"))
    assert long.rows == 1 + 2 * 40 and long.height == HEAD + ROW * long.rows + 8
    assert long.width == short.width <= 700  # four lanes: person, clerk, order_state, final_answer
    root = ET.fromstring(long.svg)
    for text in root.iter(f"{SVG}text"):  # every label was cut to end inside the picture
        start = float(text.get("x")) - (len(text.text) * CHAR / 2 if text.get("text-anchor") == "middle" else 0)
        assert start + len(text.text) * CHAR <= long.width, text.text
    assert any(t.text.endswith("…") for t in root.iter(f"{SVG}text"))  # so some were cut
    full = "order_state returned: " + "A7: delivered, and a very long note about it " * 5
    assert full in texts(long.svg)  # and the whole text is in its tooltip


def test_out_of_steps_and_a_system_note_are_bands():
    agent = Agent(scripted(Action("look_up_order", {"order_id": "A1234"})), [look_up_order, final_answer],
                  max_steps=1, name="support")
    ctx = run_checked(agent, Context((Message(SYSTEM, "be kind"), Message(USER, QUESTION))))
    lanes, rows = read(draw(ctx).svg)
    # system, question, decision, result, remark (out of steps)
    assert [kind for n, kind, a, b in rows] == ["note", "question", "call", "result", "note"]
    assert "support: out of steps: stopped after 1 turn without an answer" in texts(draw(ctx).svg)


def test_a_reply_with_no_move_is_a_band_that_says_what_was_wrong():
    brain = scripted(Action(None, reasoning="your reply was cut off at 200 tokens"),
                     Action("final_answer", {"answer": "sorry, here it is"}))
    ctx = run_checked(Agent(brain, [final_answer], name="bot"), "hi")
    lanes, rows = read(draw(ctx).svg)
    # question, no_move, decision, result: no arrow to a tool for the no_move, and no lane for tool ""
    assert lanes == [("person", "asks"), ("bot", "agent"), ("final_answer", "tool")]
    assert rows == [("0", "question", "person", "bot"), ("1", "no_move", None, None),
                    ("2", "call", "bot", "final_answer"), ("3", "result", "final_answer", "bot")]
    assert "bot made no move: your reply was cut off at 200 tokens" in texts(draw(ctx).svg)


def test_jupyter_shows_the_picture_and_a_line_of_text_beside_it():
    shell = pytest.importorskip("IPython.core.interactiveshell").InteractiveShell.instance()
    picture = draw(paused_refund())
    shown, metadata = shell.display_formatter.format(picture)
    assert shown["image/svg+xml"] == picture.svg
    assert shown["text/plain"] == ("<picture, 844 x 242 px: 7 rows across 5 lanes "
                                   "(person, support, look_up_order, check_policy, issue_refund)>")


def test_saved_as_a_file_it_is_the_same_picture(tmp_path):
    picture = draw(paused_refund())
    picture.save(tmp_path / "run.svg")
    assert (tmp_path / "run.svg").read_text(encoding="utf-8") == picture.svg


def test_what_is_not_a_notebook_is_refused_with_the_way_to_get_one():
    with pytest.raises(TypeError, match=r"not a str: .*from_json\(text\)"):
        draw(to_json(paused_refund()))
    for step in office.steps(QUESTION):
        pass
    with pytest.raises(TypeError, match=r"not a Step: a Step's is step.context"):
        draw(step)
    assert draw(step.context).svg == draw(step.context.messages).svg  # the notes alone draw the same


def test_the_pictures_the_docs_show_are_what_the_script_draws_today(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "draw_runs.py"), str(tmp_path)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    for name in ("refund_run.svg", "long_run.svg"):
        assert (tmp_path / name).read_text() == (ROOT / "docs" / name).read_text(), (
            f"docs/{name} is stale: run python examples/draw_runs.py")
    # the README, or a page in docs/ it links to, shows the refund and says how big the long run is
    pages = {path.name: path.read_text().replace("\n", " ") for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]}
    assert [name for name, text in pages.items() if "refund_run.svg)" in text], "no page shows docs/refund_run.svg"
    long_size = out.stdout.splitlines()[1].removeprefix("long_run.svg: ")  # "81 rows, 684 x 2166 px"
    assert [name for name, text in pages.items() if f"40-step run, {long_size}" in text], (
        "no page gives the long run's size as it is drawn today")


def test_notebook_06_shows_the_refund_runs_as_they_are_drawn_today():
    # the notebook test compares only the text under a cell, so the pictures are checked here
    notebook = json.loads((ROOT / "notebooks" / "06_refund_demo.ipynb").read_text())
    shown = ["".join(out["data"]["image/svg+xml"]) for cell in notebook["cells"] for out in cell.get("outputs", [])
             if "image/svg+xml" in out.get("data", {})]
    paused = paused_refund()
    refused = run_checked(office, deny(paused, refund, "the customer must return the item first", by="alice"))
    assert shown == [(ROOT / "docs" / "refund_run.svg").read_text(), draw(refused).svg], (
        "notebook 06's pictures are stale: python tests/test_notebooks.py notebooks/06_refund_demo.ipynb")
    assert shown[0] == draw(run_checked(office, approve(paused, refund, by="alice"))).svg
