"""The article is the first test: its code runs on the library, as printed or with one line changed.

Readers arrive from "Every AI agent framework hides the same 5 ideas. Here they are
in 200 lines." (Rahul Choudhary, DEV Community, 2026-07-29). Its five code blocks,
quoted below exactly as the article prints them (it leaves out the one import they
need, `from dataclasses import dataclass, field`), define the five pieces. Then a
reader uses them. The same use, written the way the article writes it, must run
against microagent and come out the same: the same notes, in the same order, saying
the same things.

Two places need a one-line change on the library, and each is a test here: the
unchanged line fails as a reader would see it fail, the changed line works.
- The article's loop calls `tool(**action.args)`; the library keeps a move's
  arguments as JSON text, so it is `tool(**json.loads(action.args))` (the library's
  own loop says `tool.run(action.args)`, which reads and checks them).
- The article's brain is `agent.brain`; the library's is `agent.policy`.
Where microagent differs on purpose, notebooks/00_from_the_article.ipynb shows the
difference and says why; README.md and that notebook name both changes.
"""

import contextlib
import dataclasses
import io
import json
import pathlib

import pytest

import microagent
from microagent.trace import show

ARTICLE = {
    "Message": '''
@dataclass(frozen=True)
class Message:
    role: str            # "user", "assistant", or "tool"
    content: str
    name: str | None = None
''',
    "Context": '''
@dataclass(frozen=True)
class Context:
    messages: tuple = ()

    def add(self, *msgs):
        # We do not change this notebook. We hand back a new one.
        return Context(self.messages + tuple(msgs))

    def last(self):
        return self.messages[-1] if self.messages else None
''',
    "Tool": '''
@dataclass
class Tool:
    name: str
    description: str
    fn: object                 # the function to run
    terminal: bool = False     # does calling this end the job?

    def __call__(self, **kwargs):
        return str(self.fn(**kwargs))
''',
    "Action": '''
@dataclass(frozen=True)
class Action:
    tool: str
    args: dict = field(default_factory=dict)
    reasoning: str = ""
''',
    "Agent": '''
class Agent:
    def __init__(self, brain, tools, max_steps=6):
        self.brain = brain
        self.tools = {t.name: t for t in tools}
        self.max_steps = max_steps

    def run(self, user_input):
        ctx = Context().add(Message("user", user_input))
        for _ in range(self.max_steps):
            action = self.brain(ctx, self.tools)      # decide
            tool = self.tools[action.tool]
            result = tool(**action.args)              # act
            ctx = ctx.add(                            # write it down
                Message("assistant", action.reasoning),
                Message("tool", result, name=action.tool),
            )
            if tool.terminal:                         # are we done?
                break
        return ctx
''',
}


def the_articles_pieces() -> dict:
    """The five pieces as the article defines them, each block run as it is printed."""
    names = {}
    exec("from dataclasses import dataclass, field", names)
    for block in ARTICLE.values():
        exec(compile(block, "the article", "exec"), names)
    return names


def the_librarys_pieces() -> dict:
    return {name: getattr(microagent, name) for name in ARTICLE}


# The refund office of the article's "Watch it do real work", written the way the article
# writes its code: tools made with Tool(name, description, fn), a brain that reads the
# notebook and the tools by name, Agent(brain, tools, max_steps=6), ctx = agent.run(...).
REFUND = '''
def look_up_order(order_id):
    return f"{order_id}, Wireless Headphones, $79, delivered, reported defective"

def check_policy(order_id):
    return "eligible, within the 30 day window and reported defective"

def issue_refund(order_id, amount):
    return f"approved by a human, ${amount} refunded to the original card"

def reply(answer):
    return answer

tools = [
    Tool("look_up_order", "Look up an order by its id", look_up_order),
    Tool("check_policy", "Check the refund policy for an order", check_policy),
    Tool("issue_refund", "Refund an order, once a human signs off", issue_refund),
    Tool("final_answer", "Reply to the customer", reply, terminal=True),
]

def brain(ctx, tools):
    last = ctx.last()
    if last.role == "user":
        return Action("look_up_order", {"order_id": "A1234"}, "let me pull up the order first")
    if last.name == "look_up_order" and "check_policy" in tools:
        return Action("check_policy", {"order_id": "A1234"}, "now check if it qualifies")
    if last.name == "check_policy" and last.content.startswith("eligible"):
        return Action("issue_refund", {"order_id": "A1234", "amount": 79},
                      "it qualifies, and a refund needs a human to sign off")
    if last.name == "issue_refund" and tools["final_answer"].terminal:
        return Action("final_answer", {"answer": "Good news, A1234 qualifies. I refunded $79 "
                                       "to your card, here in 3 to 5 days."},
                      "all set, time to reply to the customer")
    return Action("final_answer", {"answer": "Sorry, I can't help with that."}, "fallback")

agent = Agent(brain, tools, max_steps=6)
ctx = agent.run("Can I get a refund for order A1234? It arrived broken.")
'''


def run_refund(pieces: dict) -> dict:
    names = dict(pieces)
    exec(compile(REFUND, "the refund, as the article writes it", "exec"), names)
    return names


@pytest.mark.parametrize("name", ARTICLE)
def test_each_block_of_the_article_runs_as_it_is_printed(name):
    assert isinstance(the_articles_pieces()[name], type)


def test_the_articles_note_and_notebook_work_the_same_on_the_library():
    for pieces in (the_articles_pieces(), the_librarys_pieces()):
        Message, Context = pieces["Message"], pieces["Context"]
        note = Message("tool", "A1234, Wireless Headphones, $79", name="look_up_order")
        empty = Context()
        one = empty.add(Message("user", "Where is A1234?"))
        two = one.add(note)
        assert (empty.messages, empty.last()) == ((), None)
        assert len(two.messages) == 2 and two.last() == note and one.last().content == "Where is A1234?"
        assert (note.role, note.content, note.name) == ("tool", "A1234, Wireless Headphones, $79", "look_up_order")
        with pytest.raises(dataclasses.FrozenInstanceError):  # written in pen, in both
            note.content = "changed"


def test_the_articles_tool_and_move_work_the_same_on_the_library():
    for pieces in (the_articles_pieces(), the_librarys_pieces()):
        Tool, Action = pieces["Tool"], pieces["Action"]
        double = Tool("double", "Double a number", lambda n: n * 2)
        done = Tool("final_answer", "Say we are done", lambda answer: answer, terminal=True)
        assert double(n=21) == "42" and (double.terminal, done.terminal) == (False, True)
        move = Action("double", {"n": 21}, "twice as much")
        assert (move.tool, move.reasoning) == ("double", "twice as much")
        assert Action("final_answer").reasoning == ""


def test_the_articles_refund_office_runs_on_the_library_and_writes_the_same_story():
    theirs, ours = run_refund(the_articles_pieces()), run_refund(the_librarys_pieces())
    # the same notes, in the same order, saying the same things; the library's say more
    # (which tool a decision called and with what), which the article's do not record
    assert [(m.role, m.content) for m in ours["ctx"].messages] == [(m.role, m.content) for m in theirs["ctx"].messages]
    assert [m.name for m in ours["ctx"].messages if m.role == "tool"] == \
        [m.name for m in theirs["ctx"].messages if m.role == "tool"]
    ctx = ours["ctx"]
    assert len(ctx) == 9 and ctx.last().content.startswith("Good news, A1234 qualifies")
    assert [m.role for m in ctx] == ["user"] + ["assistant", "tool"] * 4
    assert ours["agent"].why_stop(ctx) == "done"


def test_the_library_prints_the_articles_story():
    ours = run_refund(the_librarys_pieces())
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        show(ours["agent"].run("Can I get a refund for order A1234? It arrived broken."))
    assert printed.getvalue().splitlines() == [
        'you asked: "Can I get a refund for order A1234? It arrived broken."',
        "  agent thought: let me pull up the order first",
        "    -> look_up_order returned: A1234, Wireless Headphones, $79, delivered, reported defective",
        "  agent thought: now check if it qualifies",
        "    -> check_policy returned: eligible, within the 30 day window and reported defective",
        "  agent thought: it qualifies, and a refund needs a human to sign off",
        "    -> issue_refund returned: approved by a human, $79 refunded to the original card",
        "  agent thought: all set, time to reply to the customer",
        "    -> final_answer returned: Good news, A1234 qualifies. I refunded $79 to your card, here in 3 to 5 days.",
    ]


def test_where_the_article_crashes_the_library_writes_a_note():
    # a brain that names a coworker who does not exist: the article's loop raises KeyError,
    # the library writes an error note for the brain to read, and its budget still ends the run
    def lost(ctx, tools):
        return microagent.Action("look_up", {"order_id": "A1234"}, "find it")
    article = the_articles_pieces()
    with pytest.raises(KeyError):
        article["Agent"](lost, [], max_steps=2).run("hi")
    ctx = microagent.Agent(lost, [], max_steps=2).run("hi")
    assert [m.kind for m in ctx] == ["question", "decision", "result", "decision", "result", "remark"]
    assert ctx[2].error and "there is no tool named 'look_up'" in ctx[2].content


# --- the two places the article's code needs a one-line change on the library -------------

ACT = "result = tool(**action.args)              # act"
CHANGED = {  # the article's act line, changed in one line: either reads the JSON text
    "json.loads": "result = tool(**json.loads(action.args))  # act",
    "tool.run": "result = tool.run(action.args).content     # act",
}


def the_articles_loop_on_the_library(act: str = ACT) -> type:
    """The article's Agent, with its act line as given, over the library's note and notebook."""
    assert ACT in ARTICLE["Agent"]
    names = {"json": json, "Message": microagent.Message, "Context": microagent.Context}
    exec(compile(ARTICLE["Agent"].replace(ACT, act), "the article's loop", "exec"), names)
    return names["Agent"]


def test_the_articles_loop_as_printed_stops_at_its_act_line_on_the_library():
    # the library's Action keeps its arguments as JSON text (a dict would make it mutable)
    pieces = {**the_librarys_pieces(), "Agent": the_articles_loop_on_the_library()}
    with pytest.raises(TypeError, match=r"argument after \*\* must be a mapping, not str"):
        run_refund(pieces)
    move = microagent.Action("look_up_order", {"order_id": "A1234"})
    assert move.args == '{"order_id": "A1234"}'


@pytest.mark.parametrize("change", CHANGED)
def test_the_articles_loop_with_its_act_line_changed_runs_on_the_library(change):
    theirs = run_refund(the_articles_pieces())["ctx"]
    ours = run_refund({**the_librarys_pieces(), "Agent": the_articles_loop_on_the_library(CHANGED[change])})["ctx"]
    # user, assistant, tool, assistant, tool, assistant, tool, assistant, tool: the article's notes
    assert [(m.role, m.content, m.name) for m in ours] == [(m.role, m.content, m.name) for m in theirs.messages]
    assert len(ours) == 9 and ours.last().content.startswith("Good news, A1234 qualifies")


def test_the_librarys_act_line_reads_the_json_text_and_hands_back_the_whole_note():
    tools = run_refund(the_librarys_pieces())["tools"]
    assert tools[0].run('{"order_id": "A1234"}') == microagent.Message(
        "tool", "A1234, Wireless Headphones, $79, delivered, reported defective", "look_up_order")


def test_the_articles_agent_brain_is_agent_policy_on_the_library():
    refund = run_refund(the_librarys_pieces())
    brain, tools = refund["brain"], refund["tools"]
    agent = microagent.Agent(brain, tools, max_steps=6)  # built as the article builds it: runs
    with pytest.raises(AttributeError, match="'Agent' object has no attribute 'brain'"):
        assert agent.brain is brain  # as a reader of the article expects
    assert agent.policy is brain
    with pytest.raises(TypeError, match="unexpected keyword argument 'brain'"):
        microagent.Agent(brain=brain, tools=tools)
    assert microagent.Agent(policy=brain, tools=tools).policy is brain


def test_the_readme_and_notebook_00_name_both_changes():
    root = pathlib.Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text()
    cells = json.loads((root / "notebooks" / "00_from_the_article.ipynb").read_text())["cells"]
    notebook = "".join("".join(c["source"]) for c in cells)
    for text in (readme, notebook):
        assert "tool(**action.args)" in text and "json.loads(action.args)" in text
        assert "agent.brain" in text and "agent.policy" in text
