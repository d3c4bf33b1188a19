"""The refund demo and the small examples run as a reader would run them, and print their stories."""

import dataclasses
import pathlib
import subprocess
import sys

import pytest

from microagent import Agent, Context, approve, final_answer, story
from microagent.demo import QUESTION, check_policy, issue_refund, look_up_order, support_agent, support_policy

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


def test_python_dash_m_microagent_prints_the_refund_story():
    assert run("-m", "microagent") == REFUND_STORY


def test_the_refund_demo_example_prints_the_same_story():
    assert run(str(ROOT / "examples" / "refund_demo.py")) == REFUND_STORY


def test_when_the_human_says_no_the_refund_never_runs_and_the_customer_is_told():
    lines = run(str(ROOT / "examples" / "refund_demo.py"), "--deny").splitlines()
    assert lines[6:] == [
        "    -> issue_refund returned: denied by a human: issue_refund did not run",
        "  support thought: no refund this time, so tell the customer honestly",
        "    -> final_answer returned: Sorry, I can't refund A1234 right now. A teammate will follow up by email within a day.",
    ]


def test_the_demo_asks_the_approver_with_the_exact_refund():
    asked = []
    support_agent(lambda name, args: asked.append((name, args)) or True).run(QUESTION)
    assert asked == [("issue_refund", {"order_id": "A1234", "amount": 79})]


def test_the_demo_notebook_survives_a_trip_through_json():
    ctx = support_agent().run(QUESTION).context
    assert story(Context.from_json(ctx.to_json())) + "\n" == REFUND_STORY


@pytest.mark.parametrize("example, last_lines", [
    ("hello_agent.py", ["    -> final_answer returned: Hello! You said: Hi there", "the answer: Hello! You said: Hi there"]),
    ("tool_use.py", [
        "    -> km_to_miles returned: error: bad arguments for km_to_miles: km must be number, not str '84.39'",
        "  runner thought: the converter wants a number, not text",
        "    -> km_to_miles returned: 52.4",
        "  runner thought: that's the answer",
        "    -> final_answer returned: A double marathon is 84.39 km, about 52.4 miles."]),
    ("approval_gate.py", [
        "    -> refund returned: denied by the manager: refund did not run",
        "  support thought: it was refused",
        "    -> final_answer returned: A teammate needs to look at this refund first."]),
])
def test_each_small_example_runs_offline_and_prints_its_story(example, last_lines):
    out = run(str(ROOT / "examples" / example)).splitlines()
    assert out[-len(last_lines):] == last_lines


def test_the_demo_brain_replies_well_after_a_refund_approved_later():
    waiting = dataclasses.replace(issue_refund, needs_approval=True)
    agent = Agent(support_policy, [look_up_order, check_policy, waiting, final_answer], name="support")
    ctx = agent.run(context=approve(agent.run(QUESTION).context, by="alice")).context
    assert ctx.last().content.startswith("Good news, A1234 qualifies.")
