"""Pause anywhere: stop a run at any step, save it, go on in a new process, and nothing changes.

For a scripted brain and fixed verdicts, the notebook is the whole state of a
run. So cutting the run at any boundary (a step, a verdict written, a verdict
carried out), saving the notebook as JSON and finishing it in a fresh Python
process must give exactly the notebook of a run that never stopped. And a
process killed outright, even while it pays a refund, leaves a file that the
next `approve` finishes, paying once.
"""

import json
import os
import pathlib
import signal
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from hard_parts import PLANS, finish, refund_agent, stops
from microagent.agent import Agent
from microagent.approval import verdict, waiting
from microagent.context import Context
from microagent.demo import QUESTION
from microagent.invariants import check
from microagent.policy import Action
from microagent.saving import from_json, to_json
from microagent.schema import as_tool
from microagent.tool import final_answer

TESTS = pathlib.Path(__file__).resolve().parent
EXAMPLES = TESTS.parent / "examples"


def finish_elsewhere(ctx: Context, plan: str, cwd: pathlib.Path) -> Context:
    """Finish a saved run in a new Python process, with the same agent and the same verdicts."""
    out = subprocess.run([sys.executable, str(TESTS / "hard_parts.py"), "finish", plan], input=to_json(ctx),
                         capture_output=True, text=True, cwd=cwd, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(TESTS)})
    assert out.returncode == 0, out.stderr
    return from_json(out.stdout)


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_every_boundary_of_the_refund_flow_finishes_the_same_in_a_new_process(plan, tmp_path):
    agent = refund_agent()
    seen = stops(agent, QUESTION, PLANS[plan])
    whole = finish(agent, seen[0], PLANS[plan])
    assert seen[-1] == whole
    # start, look_up_order, check_policy, paused on issue_refund, the verdict written, carried out, final_answer
    assert [len(ctx) for ctx in seen] == [2, 4, 6, 7, 8, 9, 11]
    for i, ctx in enumerate(seen):
        assert finish_elsewhere(ctx, plan, tmp_path) == whole, f"stopped after state {i}, it ended differently"


def test_the_three_plans_really_differ():
    agent = refund_agent()
    ends = {plan: finish(agent, stops(agent, QUESTION, [])[0], PLANS[plan]) for plan in PLANS}
    # ... decision to refund, verdict, result, decision to answer, answer
    verdict, result = {p: ends[p][-4] for p in PLANS}, {p: ends[p][-3] for p in PLANS}
    assert {p: ends[p][-5].args for p in PLANS} == dict.fromkeys(PLANS, '{"order_id": "A1234", "amount": 79}')
    assert verdict["approve"].args == '{"order_id": "A1234", "amount": 79}'
    assert verdict["edit"].args == '{"order_id": "A1234", "amount": 70}'
    assert verdict["deny"].args is None
    assert {p: result[p].content for p in PLANS} == {
        "approve": "$79 refunded to the original card",
        "edit": "$70 refunded to the original card",
        "deny": "denied by bob: send the item back first"}


# a property: any run, any verdicts, cut at any state and finished by an agent built afresh
# from the saved text alone, ends with the notebook of the run that was never cut

MOVES = st.one_of(
    st.builds(lambda n: Action("wire", {"amount": n}, "send money"), st.integers(0, 3)),
    st.sampled_from([Action("wire", {"amount": "lots"}), Action("look"), Action("nope"),
                     Action(None, reasoning="cut off"), Action("final_answer", {"answer": "bye"})]),
)
RULINGS = st.lists(st.one_of(st.none(), st.integers(0, 5)), max_size=6)  # None: a no; a number: a yes


@as_tool(needs_approval=True)
def wire(amount: int) -> str:
    """Wire money."""
    return f"wired ${amount}"


@as_tool
def look() -> str:
    """Look around."""
    return "nothing to see"


def wiring_agent(script: list, max_steps: int) -> Agent:
    def brain(ctx, tools):  # plays the script round and round
        return script[sum(m.kind in ("decision", "no_move") for m in ctx) % len(script)]
    return Agent(brain, [wire, look, final_answer], max_steps)


def ruling(human: int | None):
    """A verdict of a plan (it only writes the note): odd numbers edit the amount."""
    if human is None:
        return lambda ctx: verdict(ctx, wire, False, by="bob", reason="no")
    return lambda ctx: verdict(ctx, wire, True, by="alice", args={"amount": human} if human % 2 else None)


@settings(max_examples=100, deadline=None)
@given(script=st.lists(MOVES, min_size=1, max_size=8), humans=RULINGS, max_steps=st.integers(1, 8),
       data=st.data())
def test_a_run_cut_anywhere_and_finished_from_its_saved_text_ends_the_same(script, humans, max_steps, data):
    plan = [ruling(h) for h in humans]
    seen = stops(wiring_agent(script, max_steps), "go", plan)
    cut = data.draw(st.integers(0, len(seen) - 1), label="cut after state")
    fresh = wiring_agent(script, max_steps)  # another agent, as another process would build it
    assert finish(fresh, check(from_json(to_json(seen[cut]))), plan) == seen[-1]


# --- killed outright: examples/pause_resume.py pays a refund once ------------------------------------

# a copy of examples/pause_resume.py that does what the real one does, except where it is told to stop
PATCHED = """
import os, signal, sys, time
sys.path.insert(0, sys.argv[1])
import pause_resume

how, where = sys.argv[2], int(sys.argv[3])
if how == "hang-in-pay":  # pay the refund, say so, then wait to be killed before the tool returns
    real_pay = pause_resume.pay
    def pay(*args):
        receipt = real_pay(*args)
        print("paid", flush=True)
        time.sleep(60)
    pause_resume.pay = pay
else:  # die by SIGKILL just before the where-th save: the work before it is done, never saved
    real_save, saves = pause_resume._save, []
    def save(path, ctx):
        if len(saves) == where:
            os.kill(os.getpid(), signal.SIGKILL)
        saves.append(path)
        real_save(path, ctx)
    pause_resume._save = save
sys.exit(pause_resume.main(sys.argv[4:]))
"""


def pause_resume(*args: str, cwd: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(EXAMPLES / "pause_resume.py"), *args], capture_output=True,
                          text=True, cwd=cwd, timeout=60)


def paid(folder: pathlib.Path) -> list[dict]:
    ledger = folder / "run.json.ledger"
    return [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []


def test_killed_while_the_refund_is_paid_approve_again_finishes_and_pays_once(tmp_path):
    # issue 17: kill -9 during the refund, then approve again, paid twice
    assert pause_resume("start", "run.json", cwd=tmp_path).returncode == 0
    hanging = subprocess.Popen([sys.executable, "-c", PATCHED, str(EXAMPLES), "hang-in-pay", "0",
                                "approve", "run.json", "--by", "alice"], cwd=tmp_path, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        assert hanging.stdout.readline() == "paid\n"  # the money is out; the tool has not returned
    finally:
        hanging.send_signal(signal.SIGKILL)
        hanging.communicate(timeout=60)
    assert hanging.returncode == -signal.SIGKILL
    left = check(from_json((tmp_path / "run.json").read_text()))
    assert left.last().kind == "verdict" and left.last().name == "alice"  # saved before the refund ran
    assert [(p["order_id"], p["amount"]) for p in paid(tmp_path)] == [("A1234", 79)]

    again = pause_resume("approve", "run.json", "--by", "bob", cwd=tmp_path)  # someone tries again
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-4:] == [  # alice's verdict carried out (again), bob not asked
        '    alice approved issue_refund with {"order_id": "A1234", "amount": 79}',
        "    -> issue_refund returned: $79 refunded to the original card",
        "  support thought: the refund went through, so tell the customer what was refunded",
        "    -> final_answer returned: Done: $79 refunded to the original card, there in 3 to 5 days."]
    assert [(p["order_id"], p["amount"]) for p in paid(tmp_path)] == [("A1234", 79)]  # paid once


def test_killed_before_any_save_of_approve_the_next_approve_ends_the_same_and_pays_once(tmp_path):
    whole = tmp_path / "whole"
    whole.mkdir()
    pause_resume("start", "run.json", cwd=whole)
    assert pause_resume("approve", "run.json", "--by", "alice", cwd=whole).returncode == 0
    finished = from_json((whole / "run.json").read_text())
    # approve saves four times: the verdict, the refund carried out, the answer, the stop
    for where in range(4):
        folder = tmp_path / f"killed_before_save_{where}"
        folder.mkdir()
        pause_resume("start", "run.json", cwd=folder)
        killed = subprocess.run([sys.executable, "-c", PATCHED, str(EXAMPLES), "die-before-save", str(where),
                                 "approve", "run.json", "--by", "alice"], cwd=folder, capture_output=True,
                                timeout=60)
        assert killed.returncode == -signal.SIGKILL
        again = pause_resume("approve", "run.json", "--by", "alice", cwd=folder)
        done_already = again.stderr == "pause_resume.py: error: nothing in this notebook is waiting for approval\n"
        assert again.returncode == 0 or (where == 3 and done_already), (where, again.stderr)
        assert from_json((folder / "run.json").read_text()) == finished, f"killed before save {where}"
        assert paid(folder) == paid(whole) and len(paid(folder)) == 1, f"killed before save {where}"


def test_a_verdict_saved_by_a_run_that_died_is_carried_out_and_never_asked_again(tmp_path):
    pause_resume("start", "run.json", cwd=tmp_path)
    saved = tmp_path / "run.json"
    refund = refund_agent().tools["issue_refund"]
    saved.write_text(to_json(verdict(from_json(saved.read_text()), refund, True, by="alice")))
    out = pause_resume("deny", "run.json", "--reason", "too late", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "alice approved issue_refund" in out.stdout and "too late" not in out.stdout  # alice's yes stands
    ctx = check(from_json(saved.read_text()))
    assert [m.name for m in ctx if m.kind == "result"].count("issue_refund") == 1 and waiting(ctx) is None

