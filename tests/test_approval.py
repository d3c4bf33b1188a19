"""Human approval that can wait: pause before a risky tool, resume later with a verdict, in another process too."""

import json
import os
import pathlib
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from hard_parts import checked, ledger_refund, refund, refund_agent, run_checked
from microagent import (ASSISTANT, DONE, OUT_OF_STEPS, PAUSED, TOOL, USER, Action, Agent, Context, Message,
                        approve, as_tool, deny, final_answer, scripted, story)
from microagent.demo import QUESTION
from microagent.invariants import check

TESTS = pathlib.Path(__file__).resolve().parent


def in_a_new_process(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    """One step of the refund flow (start, approve or deny) in a fresh Python process."""
    return subprocess.run([sys.executable, str(TESTS / "hard_parts.py"), *args], capture_output=True, text=True,
                          cwd=cwd, timeout=60, env={**os.environ, "PYTHONPATH": str(TESTS)})


def test_approved_in_another_process_the_refund_runs_exactly_once(tmp_path):
    saved, ledger = tmp_path / "run.json", tmp_path / "ledger.txt"
    started = in_a_new_process("start", str(saved), str(ledger), cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    assert not ledger.exists()  # paused before the refund: nothing paid yet
    paused = check(Context.from_json(saved.read_text()))
    assert paused.pending == paused.last() and paused.pending.tool == "issue_refund"

    approved = in_a_new_process("approve", str(saved), str(ledger), cwd=tmp_path)
    assert approved.returncode == 0, approved.stderr
    assert approved.stdout == "$79 refunded to the original card\n"
    assert ledger.read_text() == "A1234 79\n"

    again = in_a_new_process("approve", str(saved), str(ledger), cwd=tmp_path)  # a second click on "approve"
    assert again.returncode != 0 and "nothing in this notebook is waiting for approval" in again.stderr
    assert ledger.read_text() == "A1234 79\n"  # still once


def test_denied_in_another_process_the_refund_never_runs(tmp_path):
    saved, ledger = tmp_path / "run.json", tmp_path / "ledger.txt"
    assert in_a_new_process("start", str(saved), str(ledger), cwd=tmp_path).returncode == 0
    denied = in_a_new_process("deny", str(saved), str(ledger), cwd=tmp_path)
    assert denied.returncode == 0, denied.stderr
    assert denied.stdout == "Sorry, no refund: not today\n"  # the brain read the denial
    assert not ledger.exists()
    ctx = Context.from_json(saved.read_text())
    # ... decision, the verdict (a no), the result saying so, the reply
    assert ctx[-4:-2] == (Message(USER, "not today", name="bob", tool="issue_refund"),
                          Message(TOOL, "denied by bob: not today", name="issue_refund", error=True))


def test_the_pause_is_a_clear_last_step_and_the_notebook_says_what_waits():
    steps = list(checked(refund_agent().steps(QUESTION)))
    assert [s.stop for s in steps] == [None, None, PAUSED]
    paused = steps[-1].context
    assert paused.last() == paused.pending == Message(
        ASSISTANT, "it qualifies, and a refund needs a human", name="support", tool="issue_refund",
        args='{"order_id": "A1234", "amount": 79}')
    # handed back unanswered, the run just says again that it waits
    assert [s.stop for s in checked(refund_agent().steps(context=paused))] == [PAUSED]
    assert story(paused).endswith('.. issue_refund {"order_id": "A1234", "amount": 79} is waiting for a human to decide')


def test_edited_arguments_keep_what_was_asked_and_run_what_was_approved(tmp_path):
    ledger = tmp_path / "ledger.txt"
    seen = []

    def brain(ctx, tools):
        seen.append(ctx)
        return scripted(Action("issue_refund", {"order_id": "A1234", "amount": 79}, "refund it"),
                        Action("final_answer", {"answer": "done"}))(ctx, tools)

    agent = Agent(brain, [ledger_refund(ledger), final_answer], name="support")
    paused = run_checked(agent, "refund A1234")
    tool = agent.tools["issue_refund"]
    ctx = run_checked(agent, context=approve(paused, by="alice", args={"order_id": "A1234", "amount": 70}, tool=tool))
    # user, the brain's decision (what it asked for), alice's verdict (what she approved), the result, the answer
    assert ctx[1].args == '{"order_id": "A1234", "amount": 79}'
    assert ctx[2] == Message(USER, "approved", name="alice", tool="issue_refund",
                             args='{"order_id": "A1234", "amount": 70}')
    assert ctx[3] == Message(TOOL, "$70 refunded to the original card", name="issue_refund")
    assert ledger.read_text() == "A1234 70\n"
    assert seen[-1][1:4] == ctx[1:4]  # on its next turn the brain saw both
    assert "alice approved issue_refund with {\"order_id\": \"A1234\", \"amount\": 70}" in story(ctx)


def test_several_risky_calls_pause_in_turn():
    calls = []

    @as_tool(needs_approval=True)
    def pay(who: str, amount: int) -> str:
        """Pay someone."""
        calls.append(who)
        return f"paid {who} ${amount}"

    agent = Agent(scripted(Action("pay", {"who": "ann", "amount": 5}), Action("pay", {"who": "bo", "amount": 7}),
                           Action("final_answer", {"answer": "paid what I could"})), [pay, final_answer])
    first = run_checked(agent, "pay ann and bo")
    assert first.pending.args == '{"who": "ann", "amount": 5}' and calls == []
    second = run_checked(agent, context=approve(first, by="alice"))
    assert second.pending.args == '{"who": "bo", "amount": 7}' and calls == ["ann"]
    end = run_checked(agent, context=deny(second, "bo was paid last week", by="alice"))
    assert calls == ["ann"]
    # user, pay ann: decision, yes, paid; pay bo: decision, no, denied; the answer: decision, result
    assert [(m.role, m.content) for m in end if m.role != ASSISTANT] == [
        (USER, "pay ann and bo"),
        (USER, "approved"), (TOOL, "paid ann $5"),
        (USER, "bo was paid last week"), (TOOL, "denied by alice: bo was paid last week"),
        (TOOL, "paid what I could")]


def test_max_steps_counts_every_turn_across_resumes():
    calls = []

    @as_tool(needs_approval=True)
    def wipe(disk: str) -> str:
        """Wipe a disk."""
        calls.append(disk)
        return f"{disk} wiped"

    agent = Agent(scripted(*[Action("wipe", {"disk": d}) for d in "ABCD"]), [wipe, final_answer], max_steps=3)
    ctx = run_checked(agent, "wipe them all")
    for _ in range(3):  # approve whatever waits, until nothing does
        if ctx.pending is None:
            break
        ctx = run_checked(agent, context=approve(ctx, by="root"))
    assert calls == ["A", "B", "C"]  # the fourth was never even decided: the budget was spent
    assert ctx.last() == Message(ASSISTANT, "out of steps: stopped after 3 turns without an answer", name="agent")
    assert [s.stop for s in agent.steps(context=ctx)] == [OUT_OF_STEPS]  # resuming again changes nothing


# bad verdicts: each is a clear error, and nothing is written and nothing runs

def paused_refund() -> Context:
    return run_checked(refund_agent(), QUESTION)


@pytest.mark.parametrize("give, problem", [
    (lambda ctx: approve(ctx, by="alice", args={"order_id": "A1234", "amount": "79"}, tool=refund),
     "the edited arguments don't fit issue_refund: amount must be number, not str '79'"),
    (lambda ctx: approve(ctx, by="alice", args={"order_id": "A1234"}, tool=refund),
     "the edited arguments don't fit issue_refund: missing amount (it takes: order_id, amount)"),
    (lambda ctx: approve(ctx, by="alice", args={"order_id": "A1234", "amount": 1, "tip": 5}, tool=refund),
     "the edited arguments don't fit issue_refund: unexpected tip (it takes: order_id, amount)"),
    (lambda ctx: approve(ctx, by="alice", args=["A1234", 79], tool=refund),
     "the edited arguments don't fit issue_refund: the arguments must be object, not list ['A1234', 79]"),
    (lambda ctx: approve(ctx, by="alice", args={"order_id": "A1234", "amount": 70}),
     "to check the edited arguments, approve needs the issue_refund tool: approve(ctx, by=..., args=..., tool=...)"),
    (lambda ctx: approve(ctx, by="alice", tool=final_answer),
     "the run is waiting for a verdict on issue_refund, not on final_answer"),
    (lambda ctx: deny(ctx, "no", tool=final_answer),
     "the run is waiting for a verdict on issue_refund, not on final_answer"),
    (lambda ctx: approve(approve(ctx, by="alice"), by="alice"),
     "issue_refund has a verdict already: resume the run with agent.run(context=ctx)"),
    (lambda ctx: deny(refund_agent().run(context=approve(ctx, by="alice")).context, "too late"),
     "nothing in this notebook is waiting for approval"),
    (lambda ctx: approve(Context().add(Message(USER, "hi")), by="alice"),
     "nothing in this notebook is waiting for approval"),
    (lambda ctx: approve(Context(ctx[:2] + (Message(TOOL, "$79 refunded", name="issue_refund"),) + ctx[2:]), by="alice"),
     "message 2 (a result from issue_refund): a result with no decision before it"),
])
def test_a_verdict_that_cannot_be_right_is_refused_and_changes_nothing(give, problem):
    ctx = paused_refund()
    before = ctx.to_json()
    with pytest.raises(ValueError) as e:
        give(ctx)
    assert str(e.value) == problem
    assert ctx.to_json() == before


def test_approving_as_proposed_needs_no_tool_and_edits_that_fit_pass():
    ctx = paused_refund()
    assert approve(ctx, by="alice").last().args == ctx.pending.args
    edited = approve(ctx, by="alice", args={"order_id": "A1234", "amount": 70.5}, tool=refund)
    assert json.loads(edited.last().args) == {"order_id": "A1234", "amount": 70.5}


# a property: whatever the brain does and whatever the humans say

ACTIONS = st.one_of(  # half the time the risky tool; otherwise anything else a brain might do
    st.builds(lambda n: Action("wire", {"amount": n}, "send money"), st.integers(0, 3)),
    st.sampled_from([Action("wire", {"amount": "lots"}),  # arguments that don't fit: an error note, no pause
                     Action("look", {}), Action("nonexistent", {}), Action("final_answer", {"answer": "bye"})]),
)


@settings(max_examples=200, deadline=None)
@given(script=st.lists(st.lists(ACTIONS, min_size=1, max_size=3), min_size=1, max_size=8),
       humans=st.lists(st.one_of(st.none(), st.integers(0, 9)), max_size=10),
       max_steps=st.integers(1, 8))
def test_a_tool_that_needs_approval_never_runs_without_one_and_every_run_ends_in_budget(script, humans, max_steps):
    wired = []

    @as_tool(needs_approval=True)
    def wire(amount: int) -> str:
        """Wire money."""
        wired.append(amount)
        return f"wired ${amount}"

    @as_tool
    def look() -> str:
        """Look around."""
        return "nothing to see"

    def brain(ctx, tools):  # plays a random script, one or several actions per turn, round and round
        n = sum(m.role == ASSISTANT and m.tool is not None for m in ctx)
        return script[n % len(script)]

    agent = Agent(brain, [wire, look, final_answer], max_steps=max_steps)
    ctx = run_checked(agent, "go")
    for human in humans:  # None denies; a number approves, edited to that amount when it is odd
        if ctx.pending is None:
            break
        ctx = check(Context.from_json(ctx.to_json()))  # each verdict comes from a saved file
        if human is None:
            ctx = deny(ctx, "no", by="bob")
        else:
            ctx = approve(ctx, by="alice", args={"amount": human} if human % 2 else None, tool=wire)
        ctx = run_checked(agent, context=ctx)

    # every wire that ran was approved, right before it, with exactly the amount it ran with
    ran = [i for i, m in enumerate(ctx) if m.role == TOOL and m.name == "wire" and m.content.startswith("wired")]
    assert [json.loads(ctx[i - 1].args)["amount"] for i in ran] == wired
    assert all(ctx[i - 1].role == USER and ctx[i - 1].content == "approved" for i in ran)
    assert len(wired) == sum(m.role == USER and m.args is not None for m in ctx)
    # and the run stayed within its budget, however many times it was resumed
    assert sum(m.role == ASSISTANT and m.tool is not None for m in ctx) <= max_steps
    again = list(agent.steps(context=ctx))  # handed back, a finished (or waiting) run only says why it stopped
    assert len(again) == 1 and again[0].context == ctx and again[0].stop in (DONE, OUT_OF_STEPS, PAUSED)
