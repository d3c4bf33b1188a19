"""The brain you train yourself: learned from the office's notebooks, dropped into the same office."""

import contextlib
import dataclasses
import functools
import io
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from microagent import DONE, OUT_OF_STEPS, PAUSED, Context
from microagent.approval import approve, deny, waiting
from microagent.demo import QUESTION, issue_refund, support_agent, support_policy
from microagent.invariants import check
from microagent.learned import (Case, Net, arguments, brain, cases, features, guessing, loss, network, owed,
                                pairs, right, success_rate, train)
from microagent.saving import from_json, to_json
from microagent.tool import final_answer

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEMO_CASE = Case(QUESTION, ("A1234", "Wireless Headphones", 79, "delivered, reported defective"), yes=True)


def served(case: Case, policy=support_policy) -> Context:
    """One customer's run through their office, with `policy` as its brain."""
    return case.office(policy).run(case.question)


def trained(n: int = 60, seed: int = 0):
    """A network trained on the notebooks of n made-up customers, and its losses."""
    data = [p for c in cases(n, seed=1) for p in pairs(served(c))]
    net = network(data, seed=seed)
    return net, train(net, data, seed=seed)


@functools.cache
def trained_net():
    """The network most tests share, trained once."""
    return trained()[0]


@pytest.fixture
def net():
    return trained_net()


def yes(tool_name: str, args: dict) -> bool:
    return True


def refunds(ctx: Context) -> list[str]:
    return [m.content for m in ctx if m.kind == "result" and m.name == "issue_refund"]


def test_a_notebook_becomes_pairs_of_what_the_brain_saw_and_what_it_did():
    ctx = served(DEMO_CASE)
    assert pairs(ctx) == [
        (["last: the question"], "look_up_order"),
        (["last: look_up_order", "word: defective", "word: delivered", "word: headphones", "word: reported",
          "word: wireless"], "check_policy"),
        (["last: check_policy", "word: and", "word: day", "word: defective", "word: eligible", "word: reported",
          "word: the", "word: window", "word: within"], "issue_refund"),
        (["last: issue_refund", "word: a", "word: approved", "word: by", "word: card", "word: human",
          "word: original", "word: refunded", "word: the", "word: to"], "final_answer"),
    ]


def test_a_customers_office_holds_their_order_and_their_human():
    no = Case("Refund B2222, it broke.", ("B2222", "Kettle", 30, "delivered, reported defective"), yes=False)
    ctx = served(no)
    assert [m.content for m in ctx if m.kind == "result"] == [
        "B2222, Kettle, $30, delivered, reported defective",
        "eligible, within the 30 day window and reported defective",
        "denied by a human: issue_refund did not run",
        "Sorry, I can't refund B2222 right now. A teammate will follow up by email within a day."]
    assert no.office().why_stop(ctx) == DONE and not owed(no) and right(no, ctx)
    assert no.office().run("Refund A1234, it broke.")[2].content == "no order A1234"  # only theirs


def test_the_made_up_customers_are_the_same_for_a_seed_and_mixed():
    assert cases(50, seed=3) == cases(50, seed=3) and cases(50, seed=3) != cases(50, seed=4)
    made = cases(300, seed=3)
    typos = [c for c in made if c.order[0] not in c.question]
    due = [c for c in made if owed(c)]
    assert 20 < len(typos) < 80 and 50 < len(due) < 150  # some of each kind, none dominant
    assert all(right(c, served(c)) for c in made)  # the teacher serves them all right
    assert any(not c.yes for c in made) and any("defective" not in c.order[3] for c in made)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32))
def test_for_any_seed_the_teacher_serves_every_made_up_customer_right(seed):
    made = cases(15, seed=seed)
    assert all(right(case, served(case)) for case in made)  # so the rules really are the ceiling
    assert all(right(case, served(case, brain(trained_net()))) for case in made[:5])


def test_a_run_is_served_right_only_if_it_ends_with_an_answer_and_the_refund_owed():
    ctx = served(DEMO_CASE)
    assert owed(DEMO_CASE) and right(DEMO_CASE, ctx)
    assert not right(DEMO_CASE, Context(ctx.messages[:-2]))  # no answer yet: not served
    unpaid = dataclasses.replace(DEMO_CASE, order=("A1234", "Wireless Headphones", 80, "delivered"))
    assert not right(unpaid, ctx)  # it paid $79 where nothing was owed
    agent = support_agent(brain(trained_net()))  # the refund waits for a verdict
    paused, refund = agent.run(QUESTION), agent.tools["issue_refund"]
    assert not right(DEMO_CASE, paused)  # waiting for a human is not an answer
    said_no = dataclasses.replace(DEMO_CASE, yes=False)
    assert right(DEMO_CASE, agent.run(approve(paused, refund))) and not right(said_no, paused)
    denied = agent.run(deny(paused, refund, "send it back first"))  # a verdict, then no money
    assert right(said_no, denied) and not right(DEMO_CASE, denied)
    edited = agent.run(approve(paused, refund, args={"order_id": "A1234", "amount": 70}))
    assert not right(DEMO_CASE, edited)  # $70 went out, where $79 was owed


def test_training_is_deterministic_same_seed_same_weights():
    one, losses_one = trained(seed=0)
    two, losses_two = trained(seed=0)
    other, _ = trained(seed=1)
    assert one == two and losses_one == losses_two
    assert one.w1 != other.w1


def test_training_gives_the_same_weights_in_any_process():
    # Python orders a set of strings differently in each process (PYTHONHASHSEED);
    # the features and the network's inputs must not depend on that order
    code = ("import json; from microagent.learned import *; "
            "data = [p for c in cases(20, seed=1) for p in pairs(c.office().run(c.question))]; "
            "net = network(data); train(net, data, epochs=3); print(json.dumps([net.inputs, net.w1, net.w2]))")
    outs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                           env={**os.environ, "PYTHONHASHSEED": seed}) for seed in ("1", "2")]
    assert all(out.returncode == 0 for out in outs), outs[0].stderr + outs[1].stderr
    assert outs[0].stdout == outs[1].stdout


def test_the_loss_falls_from_knowing_nothing_to_knowing_the_job():
    data = [p for c in cases(60, seed=1) for p in pairs(served(c))]
    net = network(data)
    before = loss(net, data)
    losses = train(net, data)
    assert 1.0 < before < 2.0  # near log(4): four tools, about a quarter each
    assert losses[-1] < 0.05 and losses[-1] < losses[0]  # measured: about 0.003


def test_held_out_customers_are_served_right_at_the_measured_rate(net):
    seen = {c.order[0] for c in cases(60, seed=1)}
    held_out = [c for c in cases(200, seed=2) if c.order[0] not in seen]
    assert len(held_out) > 190
    assert success_rate(support_policy, held_out) == 1.0  # the teacher: the ceiling
    assert success_rate(brain(net), held_out) >= 0.95  # measured: 100% (benchmarks/learned_brain.py)
    assert success_rate(guessing(0), held_out) < 0.75  # measured: about 59%
    # the hard part: customers owed a refund, where guessing almost never gets it right
    due = [c for c in held_out if owed(c)]
    assert len(due) > 40
    assert success_rate(brain(net), due) >= 0.95  # measured: 100%
    assert success_rate(guessing(0), due) < 0.4  # measured: about 12%


def test_the_trained_brain_runs_the_demo_office_unchanged(net):
    agent = support_agent(brain(net), approver=yes)
    ctx = agent.run(QUESTION)
    # question, then four decisions, each with its result
    assert [m.tool for m in ctx if m.kind == "decision"] == [
        "look_up_order", "check_policy", "issue_refund", "final_answer"]
    assert refunds(ctx) == ["approved by a human, $79 refunded to the original card"]
    assert agent.why_stop(ctx) == DONE
    assert ctx.last().content == "Done: $79 is on its way back to your card."

    agent = support_agent(brain(net), approver=lambda tool_name, args: False)
    no = agent.run(QUESTION)
    assert agent.why_stop(no) == DONE and refunds(no) == ["denied by a human: issue_refund did not run"]
    assert no.last().content == "Sorry, I can't refund this order. A teammate will follow up by email."


def test_the_trained_brain_pauses_for_a_human_and_goes_on_after_a_verdict(net):
    agent = support_agent(brain(net))  # no approver: the refund waits for a verdict
    paused = agent.run(QUESTION)
    assert agent.why_stop(paused) == PAUSED
    assert json.loads(waiting(paused).args) == {"order_id": "A1234", "amount": 79}
    saved = to_json(paused)  # a human decides later, from the saved notebook
    refund = agent.tools["issue_refund"]

    approved = agent.run(approve(from_json(saved), refund, by="alice"))
    assert agent.why_stop(approved) == DONE and refunds(approved) == ["$79 refunded to the original card"]
    assert approved.last().content == "Done: $79 is on its way back to your card."
    denied = agent.run(deny(from_json(saved), refund, "send it back first", by="bob"))
    assert agent.why_stop(denied) == DONE and refunds(denied) == ["denied by bob: send it back first"]
    assert denied.last().content.startswith("Sorry")


def test_arguments_come_from_the_notebook_and_are_left_out_when_it_has_none(net):
    ctx = support_agent(brain(net), approver=yes).run("I want a refund for my kettle, it broke.")
    # the question names no order, so order_id is left out and the loop says so in a note
    assert ctx[1].tool == "look_up_order" and ctx[1].args == "{}"
    assert ctx[2].content == "error: bad arguments for look_up_order: missing order_id (it takes: order_id)"
    assert arguments(ctx, issue_refund) == {}  # no order, no price: nothing to fill
    done = served(DEMO_CASE)
    assert arguments(done, issue_refund) == {"order_id": "A1234", "amount": 79}
    assert arguments(done, final_answer) == {"answer": "Done: $79 is on its way back to your card."}
    assert arguments(done, None) == {}


LONG_PRICE = "9" * 5000  # more digits than Python reads as a number (4,300 by default)


def test_a_price_of_5000_digits_leaves_the_amount_out_and_the_loop_says_so(net):
    # a shop's table that holds the price as it came, its digits: the lookup writes all 5,000
    asked = []
    agent = support_agent(brain(net), approver=lambda tool_name, args: asked.append(args) or True,
                          orders={"A1234": ("Kettle", LONG_PRICE, "delivered, reported defective")})
    ctx = agent.run(QUESTION)  # before the fix: ValueError, out of the brain and the loop
    assert ctx[2].content == f"A1234, Kettle, ${LONG_PRICE}, delivered, reported defective"
    assert arguments(ctx, issue_refund) == {"order_id": "A1234"}  # the amount can't be filled
    assert json.loads(ctx[5].args) == {"order_id": "A1234"}
    assert ctx[6].content == "error: bad arguments for issue_refund: missing amount (it takes: order_id, amount)"
    assert asked == [] and refunds(ctx) == [ctx[6].content]  # no human asked, no money out
    assert agent.why_stop(ctx) == DONE and ctx.last().content.startswith("Sorry, I can't refund")
    check(ctx)


def untrained(seed: int):
    data = [p for c in cases(20, seed=1) for p in pairs(served(c))]
    return network(data, seed=seed)


def shuffled_labels():
    """A network trained on the right features with the wrong tools: confidently wrong."""
    data = [p for c in cases(40, seed=1) for p in pairs(served(c))]
    tools = [tool for _, tool in data]
    wrong = list(zip([on for on, _ in data], tools[7:] + tools[:7], strict=True))
    net = network(wrong, seed=0)
    train(net, wrong)
    return net


def far_too_fast():
    """A network trained with a learning rate a million times too large: its weights blow up."""
    data = [p for c in cases(20, seed=1) for p in pairs(served(c))]
    net = network(data)
    train(net, data, epochs=2, lr=1e6)
    return net


@pytest.mark.parametrize("make", [lambda: untrained(0), lambda: untrained(1), lambda: untrained(2), shuffled_labels,
                                  far_too_fast],
                         ids=["untrained-0", "untrained-1", "untrained-2", "shuffled-labels", "far-too-fast"])
def test_a_wrong_trained_brain_never_crashes_the_loop(make):
    policy = brain(make())
    stops, served_wrong = set(), 0
    for case in cases(40, seed=5):
        office = case.office(policy)
        ctx = office.run(case.question)  # raises if the loop crashes
        check(ctx)  # the notebook keeps the rules, whatever the brain did
        stops.add(office.why_stop(ctx))
        served_wrong += not right(case, ctx)
    assert stops <= {DONE, OUT_OF_STEPS}
    assert served_wrong > 0  # it really is a wrong brain


def test_a_tool_the_office_lacks_becomes_an_error_note():
    data = [(on, "check_rules" if tool == "check_policy" else tool)
            for c in cases(20, seed=1) for on, tool in pairs(served(c))]
    net = network(data)
    train(net, data)
    office = DEMO_CASE.office(brain(net))
    ctx = office.run(QUESTION)
    assert ctx[3].tool == "check_rules" and ctx[3].args == "{}"  # it takes nothing the office knows of
    assert ctx[4].content == ("error: there is no tool named 'check_rules'; "
                              "the tools are: look_up_order, check_policy, issue_refund, final_answer")
    assert office.why_stop(ctx) in (DONE, OUT_OF_STEPS)


ANY_TEXT = st.text(st.characters(blacklist_categories=()), max_size=40)  # lone surrogates too


@settings(max_examples=40, deadline=None)
@given(question=st.one_of(ANY_TEXT, st.builds(lambda a, b: f"{a} A1234 {b}", ANY_TEXT, ANY_TEXT)))
def test_any_question_at_all_ends_in_a_stop_with_a_sound_notebook(question):
    case = Case(question, ("A1234", "Kettle", 30, "delivered, reported defective"), yes=True)
    office = case.office(brain(trained_net()))
    ctx = office.run(question)
    check(ctx)
    assert office.why_stop(ctx) in (DONE, OUT_OF_STEPS)
    assert from_json(to_json(ctx)) == ctx


def test_mistakes_in_training_say_what_to_do():
    with pytest.raises(ValueError, match="needs pairs to learn from"):
        network([])
    net = network([(["last: the question"], "look_up_order")])
    with pytest.raises(ValueError, match="no output for final_answer: make it from these pairs"):
        train(net, [(["last: the question"], "final_answer")])


def test_nothing_to_learn_from_or_to_measure_on_is_a_value_error_that_says_what_to_give():
    net = network([(["last: the question"], "look_up_order")])
    with pytest.raises(ValueError) as e:
        train(net, [])
    assert str(e.value) == "no pairs to learn from or to score: pairs(notebook) gives some"
    with pytest.raises(ValueError) as e:
        loss(net, [])
    assert str(e.value) == "no pairs to learn from or to score: pairs(notebook) gives some"
    with pytest.raises(ValueError) as e:
        success_rate(support_policy, [])
    assert str(e.value) == "no customers to serve: cases(n, seed) makes n of them"


def test_a_trained_network_saves_as_json_and_loads_back_the_same_brain(net):
    loaded = Net(**json.loads(json.dumps(dataclasses.asdict(net))))
    assert loaded == net
    assert served(DEMO_CASE, brain(loaded)) == served(DEMO_CASE, brain(net))


def test_a_feature_the_network_never_saw_is_ignored(net):
    policy, tools = brain(net), support_agent().tools
    ctx = served(DEMO_CASE)
    plain = policy(Context(ctx.messages[:3]), tools)
    odd = dataclasses.replace(ctx[2], content=ctx[2].content + " zebra quokka")  # words it never saw
    assert "word: zebra" in features(Context(ctx.messages[:2] + (odd,)))
    assert policy(Context(ctx.messages[:2] + (odd,)), tools) == plain


def test_the_documented_example_runs_and_its_comments_are_true():
    # the README's example of the trained brain, or the manual's in docs/ if it moved there
    blocks = [block for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
              for block in re.findall(r"```python\n(.*?)```", path.read_text(), re.S)
              if "from microagent.learned import" in block]
    assert blocks, "the README (or a manual in docs/) shows the trained brain at work"
    block = blocks[0]
    code = "\n".join(line for line in block.splitlines() if not line.startswith("# "))
    promised = [line[2:] for line in block.splitlines() if line.startswith("# ")]
    printed, names = io.StringIO(), {}
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), names)
    assert printed.getvalue().splitlines() == promised
    net, losses = names["net"], names["losses"]
    assert "# 53 inputs, 8 hidden units, 4 outputs (one per tool): 468 weights" in block
    assert (len(net.inputs), len(net.b1), len(net.outputs), net.size()) == (53, 8, 4, 468)
    assert "the loss falls from 1.6 to 0.0014" in block
    assert f"{loss(network(names['data']), names['data']):.1f}" == "1.6" and f"{losses[-1]:.4f}" == "0.0014"


def test_the_module_stays_as_small_as_notebook_13_says():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import size  # benchmarks/size.py, the counter the README quotes

    notebook = (ROOT / "notebooks" / "13_train_a_brain.ipynb").read_text()
    assert "under 160 lines of code" in notebook
    assert size.measure(ROOT / "microagent" / "learned.py")[0] < 160


def test_the_example_trains_a_brain_and_runs_the_office_with_it():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "trained_brain.py")], capture_output=True,
                         text=True, cwd=ROOT.parent, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "trained on 327 pairs from 100 notebooks: 468 weights, loss 0.019 -> 0.0014"
    assert lines[1:] == [
        'you asked: "Can I get a refund for order A1234? It arrived broken."',
        "  support thought: the network is 100% sure",
        "    -> look_up_order returned: A1234, Wireless Headphones, $79, delivered, reported defective",
        "  support thought: the network is 100% sure",
        "    -> check_policy returned: eligible, within the 30 day window and reported defective",
        "  support thought: the network is 100% sure",
        "    -> issue_refund returned: approved by a human, $79 refunded to the original card",
        "  support thought: the network is 100% sure",
        "    -> final_answer returned: Done: $79 is on its way back to your card.",
    ]
