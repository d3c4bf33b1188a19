"""The refund demo and the small examples run as a reader would run them, and print their stories."""

import dataclasses
import json
import pathlib
import subprocess
import sys

import pytest

from microagent import ASSISTANT, DONE, PAUSED, Agent, Context, Message
from microagent.approval import approve, deny, waiting
from microagent.demo import (ORDERS, QUESTION, check_policy, issue_refund, look_up_order, price, support_agent,
                             support_policy)
from microagent.saving import from_json, to_json
from microagent.schema import as_tool
from microagent.tool import final_answer
from microagent.trace import story

ROOT = pathlib.Path(__file__).resolve().parent.parent

REFUND_STORY = """\
you asked: "Can I get a refund for order A1234? It arrived broken."
  support thought: let me pull up the order first
    -> look_up_order returned: A1234, Wireless Headphones, $79, delivered, reported defective
  support thought: now check if it qualifies
    -> check_policy returned: eligible, within the 30 day window and reported defective
  support thought: it qualifies, and a refund needs a human to sign off
    -> issue_refund returned: approved by a human, $79 refunded to the original card
  support thought: all set, time to reply to the customer
    -> final_answer returned: Good news, A1234 qualifies. I refunded $79 to your card, here in 3 to 5 days.
"""


def run(*args: str) -> str:
    """Run a command the way a reader would, from a folder that is not the project's."""
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT.parent, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def yes(tool_name: str, args: dict) -> bool:
    return True


def test_python_dash_m_microagent_prints_the_refund_story():
    assert run("-m", "microagent") == REFUND_STORY


def test_the_readme_shows_the_refund_story_as_it_prints():
    shown = [path.name for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
             if "```text\n" + REFUND_STORY + "```" in path.read_text()]
    assert shown, "the README (or a page in docs/) shows the story python -m microagent prints"


def test_the_refund_demo_example_prints_the_same_story():
    assert run(str(ROOT / "examples" / "refund_demo.py")) == REFUND_STORY


def test_when_the_human_says_no_the_refund_never_runs_and_the_customer_is_told():
    lines = run(str(ROOT / "examples" / "refund_demo.py"), "--deny").splitlines()
    assert lines[:6] == REFUND_STORY.splitlines()[:6]
    assert lines[6:] == [
        "    -> issue_refund returned: denied by a human: issue_refund did not run",
        "  support thought: no refund this time, so tell the customer honestly",
        "    -> final_answer returned: Sorry, I can't refund A1234 right now. A teammate will follow up by email within a day.",
    ]
    assert run("-m", "microagent", "--deny").splitlines() == lines


def test_the_demo_asks_the_approver_with_the_exact_refund():
    asked = []
    support_agent(approver=lambda name, args: asked.append((name, args)) or True).run(QUESTION)
    assert asked == [("issue_refund", {"order_id": "A1234", "amount": 79})]


def test_the_demo_notebook_survives_a_trip_through_json():
    ctx = support_agent(approver=yes).run(QUESTION)
    assert from_json(to_json(ctx)) == ctx
    assert story(from_json(to_json(ctx))) + "\n" == REFUND_STORY


def test_with_no_approver_the_refund_waits_for_a_verdict_and_goes_on_after_it():
    agent = support_agent()
    assert agent.tools["issue_refund"].needs_approval and not issue_refund.needs_approval
    paused = agent.run(QUESTION)
    assert agent.why_stop(paused) == PAUSED
    assert story(paused) + "\n" == "".join(REFUND_STORY.splitlines(keepends=True)[:6]) + (
        '    .. issue_refund {"order_id": "A1234", "amount": 79} is waiting for a human to decide\n')
    assert waiting(paused) is paused.last() and json.loads(paused.last().args) == {"order_id": "A1234", "amount": 79}

    refund = agent.tools["issue_refund"]
    done = agent.run(approve(paused, refund, by="alice"))
    assert agent.why_stop(done) == DONE
    assert [m.content for m in done.messages[-3:]] == [
        "$79 refunded to the original card", "all set, time to reply to the customer",
        "Good news, A1234 qualifies. I refunded $79 to your card, here in 3 to 5 days."]
    edited = agent.run(approve(paused, refund, by="alice", args={"order_id": "A1234", "amount": 70}))
    assert edited.last().content.startswith("Good news, A1234 qualifies. I refunded $70 to your card")
    denied = agent.run(deny(paused, refund, "send it back first", by="bob"))
    assert [m.content for m in denied.messages[-3:]] == [
        "denied by bob: send it back first", "no refund this time, so tell the customer honestly",
        "Sorry, I can't refund A1234 right now. A teammate will follow up by email within a day."]


def test_another_order_table_and_another_refund_tool_make_the_same_office():
    paid = []

    @as_tool
    def ledger(order_id: str, amount: float) -> str:
        """Refund an amount in dollars, written in a ledger."""
        paid.append((order_id, amount))
        return f"${amount:g} refunded to the original card (receipt R{len(paid)})"

    refund = dataclasses.replace(ledger, name="issue_refund")
    agent = support_agent(approver=yes, orders={"B2222": ("Kettle", 30, "delivered, reported defective")},
                          refund=refund)
    ctx = agent.run("Refund B2222, it broke.")
    assert paid == [("B2222", 30)]
    assert ctx[2].content == "B2222, Kettle, $30, delivered, reported defective"
    assert ctx[6].content == "approved by a human, $30 refunded to the original card (receipt R1)"
    assert ctx.last().content == "Good news, B2222 qualifies. I refunded $30 to your card, here in 3 to 5 days."
    assert agent.run("Refund A1234, it broke.")[2].content == "no order A1234"  # only the table given
    assert support_agent(refund=refund).tools["issue_refund"].needs_approval  # no approver: it waits
    assert ORDERS == {"A1234": ("Wireless Headphones", 79, "delivered, reported defective")}  # untouched
    with pytest.raises(ValueError, match="refund= must be a Tool named issue_refund: that is the name"):
        support_agent(refund=ledger)


def test_the_rules_refund_no_price_too_long_to_read_and_ask_no_human():
    asked = []
    digits = "9" * 5000  # more than Python reads as a number (4,300 by default)
    agent = support_agent(approver=lambda name, args: asked.append(args) or True,
                          orders={"A1234": ("Kettle", digits, "delivered, reported defective")})
    ctx = agent.run(QUESTION)  # before the fix: ValueError out of the brain, and the loop
    assert asked == [] and [m.tool for m in ctx if m.kind == "decision"] == [
        "look_up_order", "check_policy", "final_answer"]
    assert ctx.last().content == "Sorry, I can't refund A1234 right now. A teammate will follow up by email within a day."
    assert agent.why_stop(ctx) == DONE
    assert price(f"A1234, Kettle, ${digits}, delivered") is None and price("no order A1") is None
    assert price("A1234, Kettle, $30, delivered") == 30


def test_the_rules_call_only_the_tools_the_office_has():
    # an office with no refund desk: the rules tell the customer, and call no missing tool
    agent = Agent(support_policy, [look_up_order, check_policy, final_answer], name="support")
    ctx = agent.run(QUESTION)
    assert [m.tool for m in ctx if m.kind == "decision"] == ["look_up_order", "check_policy", "final_answer"]
    assert not any(m.error for m in ctx) and ctx.last().content.startswith("Sorry, I can't refund A1234")


@pytest.mark.parametrize("example, printed", [
    ("hello_agent.py", """\
you asked: "Hi there"
  greeter thought: a greeting deserves a reply
    -> final_answer returned: Hello! You said: Hi there
the answer: Hello! You said: Hi there
"""),
    ("tool_use.py", """\
you asked: "How long is a double marathon, in miles?"
  runner thought: a double marathon is twice 42.195 km
    -> multiply returned: 84.39
  runner thought: now in miles
    -> km_to_miles returned: error: bad arguments for km_to_miles: km must be number, not str '84.39'
  runner thought: the converter wants a number, not text
    -> km_to_miles returned: 52.4
  runner thought: that's the answer
    -> final_answer returned: A double marathon is 84.39 km, about 52.4 miles.
"""),
    ("approval_gate.py", """\
you asked: "Please refund $30"
  support thought: the customer asked for a refund
    -> refund returned: approved by the manager, $30 refunded for A1234
  support thought: it went through
    -> final_answer returned: Your refund is on its way.

you asked: "Please refund $300"
  support thought: the customer asked for a refund
    -> refund returned: denied by the manager: refund did not run
  support thought: it was refused
    -> final_answer returned: A teammate needs to look at this refund first.
"""),
])
def test_each_small_example_runs_offline_and_prints_its_story(example, printed):
    assert run(str(ROOT / "examples" / example)) == printed


def test_the_demo_brain_replies_well_after_a_refund_approved_later():
    waiting_refund = dataclasses.replace(issue_refund, needs_approval=True)
    agent = Agent(support_policy, [look_up_order, check_policy, waiting_refund, final_answer], name="support")
    ctx = agent.run(approve(agent.run(QUESTION), waiting_refund, by="alice"))
    assert ctx.last().content.startswith("Good news, A1234 qualifies.")


def test_the_demo_brain_finds_the_latest_answer_by_kind_not_by_position():
    # another brain's reply held no move (a model cut off), and then the rule brain takes over
    # the notebook: it reads the policy's yes under that note, as it reads any verdict or summary
    checked = Context(support_agent(approver=lambda name, args: False).run(QUESTION).messages[:5])
    # user, assistant, tool, assistant, tool (eligible), and a no_move
    stalled = checked.add(Message(ASSISTANT, "the reply was cut off", "support", error=True))
    assert [m.kind for m in stalled][-2:] == ["result", "no_move"]
    move = support_policy(stalled, support_agent().tools)
    assert (move.tool, json.loads(move.args)) == ("issue_refund", {"order_id": "A1234", "amount": 79})


def test_the_pause_resume_brain_finds_the_verdict_by_kind_not_by_position():
    # a denied refund, then another brain's reply that held no move: the verdict is no longer
    # ctx[-2], and the example's brain still passes bob's reason on to the customer
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        import pause_resume
    finally:
        sys.path.remove(str(ROOT / "examples"))
    denied = deny(pause_resume.agent.run(QUESTION), pause_resume.refund, "send it back first", by="bob")
    stalled = denied.add(Message(ASSISTANT, "the reply was cut off", "support", error=True))
    # ..., assistant (the refund), user (bob's no), tool (denied), assistant (no move)
    assert [m.kind for m in stalled][-4:] == ["decision", "verdict", "result", "no_move"]
    move = pause_resume.policy(stalled, pause_resume.agent.tools)
    assert json.loads(move.args) == {"answer": "Sorry, I can't refund this yet: send it back first."}
