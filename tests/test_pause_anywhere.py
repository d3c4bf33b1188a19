"""Pause anywhere: stop a run at any step, save it, go on in a new process, and nothing changes.

For a scripted brain and fixed verdicts, the notebook is the whole state of a
run. So cutting the run at any step boundary, saving the notebook as JSON and
finishing it in a fresh Python process must give exactly the notebook of a run
that never stopped.
"""

import os
import pathlib
import subprocess
import sys

import pytest

from hard_parts import PLANS, finish, refund_agent, stops
from microagent import Context
from microagent.demo import QUESTION

TESTS = pathlib.Path(__file__).resolve().parent


def finish_elsewhere(ctx: Context, plan: str, cwd: pathlib.Path) -> Context:
    """Finish a saved run in a new Python process, with the same agent and the same verdicts."""
    out = subprocess.run([sys.executable, str(TESTS / "hard_parts.py"), "finish", plan], input=ctx.to_json(),
                         capture_output=True, text=True, cwd=cwd, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(TESTS)})
    assert out.returncode == 0, out.stderr
    return Context.from_json(out.stdout)


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_every_boundary_of_the_refund_flow_finishes_the_same_in_a_new_process(plan, tmp_path):
    agent = refund_agent()
    seen = stops(agent, QUESTION, PLANS[plan])
    whole = finish(agent, seen[0], PLANS[plan])
    assert seen[-1] == whole
    # start, look_up_order, check_policy, paused on issue_refund, verdict, issue_refund ran, final_answer
    assert len(seen) == 7
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
