"""Evals: cases graded off each run's notebook (the answer and the working), repeats, and the table."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from microagent.agent import Agent
from microagent.context import Context
from microagent.demo import support_agent, support_policy
from microagent.evals import Case, Trial, attempt, evaluate, grade, pass_rates, table
from microagent.learned import guessing
from microagent.llm import chat_policy
from microagent.policy import Action
from microagent.script import scripted
from microagent.tool import final_answer
from microagent.transport.stand_in import reply

ORDERS = {"A1234": ("Wireless Headphones", 79, "delivered, reported defective"),
          "B2001": ("Desk Lamp", 25, "delivered"),
          "C3002": ("Kettle", 30, "delivered, reported defective")}
REFUND = ("look_up_order", "check_policy", "issue_refund")
PAID = Case("Can I get a refund for order A1234? It arrived broken.", says=("$79",), calls=REFUND,
            ordered=True, asks_first=("issue_refund",), name="refund, yes")
DENIED = Case("My kettle (order C3002) broke. Money back, please.", says=("sorry",), calls=REFUND,
              ordered=True, yes=False, name="refund, no")
NOT_OWED = Case("Refund B2001 please, the lamp is not what I hoped.", says=("sorry",),
                calls=("look_up_order", "check_policy"), never=("issue_refund",), name="not eligible")
CASES = [PAID, DENIED, NOT_OWED]


def office(policy=support_policy, **settings):
    return support_agent(policy, orders=ORDERS, **settings)


def hasty(ctx, tools):
    """The rules, changed for the worse: a defective order is refunded without checking the policy."""
    last = ctx.last()
    if last.name == "look_up_order" and "defective" in last.content:
        order_id = last.content.split(",")[0]
        return Action("issue_refund", {"order_id": order_id, "amount": int(last.content.split("$")[1][:2])},
                      "defective: no need to check")
    return support_policy(ctx, tools)


def test_the_rules_pass_every_refund_case_and_a_human_rules_on_each_refund():
    trials = evaluate(office(), CASES)
    assert [(t.case.name, t.attempt, t.failures) for t in trials] == [
        ("refund, yes", 1, ()), ("refund, no", 1, ()), ("not eligible", 1, ())]
    paid = trials[0].ctx
    # question, then look up, check, refund (the human's yes between its call and its result), answer
    assert [m.kind for m in paid] == ["question", "decision", "result", "decision", "result",
                                      "decision", "verdict", "result", "decision", "result"]
    assert paid[6].content == "approved" and paid[-1].content.startswith("Good news, A1234 qualifies.")
    denied = trials[1].ctx
    assert denied[7].error and denied[7].content == "denied by a human: not this time"


def test_a_run_with_the_right_answer_and_the_wrong_working_fails_and_says_why():
    trials = evaluate(office(hasty), CASES)
    assert [t.failures for t in trials] == [("check_policy was never called",),
                                            ("check_policy was never called",), ()]
    assert trials[0].ctx[-1].content.startswith("Good news, A1234 qualifies. I refunded $79")


def test_calls_out_of_order_fail_an_ordered_case_and_pass_an_unordered_one():
    moves = [Action("check_policy", {"order_id": "A1234"}), Action("look_up_order", {"order_id": "A1234"}),
             Action("issue_refund", {"order_id": "A1234", "amount": 79}),
             Action("final_answer", {"answer": "I refunded $79."})]
    agent = office(scripted(*moves))
    ctx, error = attempt(agent, PAID)
    assert error is None
    assert grade(PAID, agent, ctx) == ("the calls were check_policy, look_up_order, issue_refund, final_answer, "
                                       "not in the order look_up_order, check_policy, issue_refund",)
    unordered = Case(PAID.question, says=("$79",), calls=REFUND)
    assert grade(unordered, agent, ctx) == ()


def test_money_moved_with_no_humans_verdict_fails_a_case_that_asks_first():
    # an office whose refund asks an approver on the spot writes no verdict note before the money moves
    agent = office(approver=lambda tool_name, args: True)
    (trial,) = evaluate(agent, [PAID])
    assert trial.failures == ("issue_refund ran with no human's yes just before it",)
    assert "approved by a human" in trial.ctx[6].content and trial.ctx[5].kind == "decision"


def test_a_tool_that_must_never_be_called_and_was_fails_the_case():
    moves = [Action("look_up_order", {"order_id": "B2001"}), Action("issue_refund", {"order_id": "B2001",
                                                                                    "amount": 25}),
             Action("final_answer", {"answer": "Sorry, no refund."})]
    (trial,) = evaluate(office(scripted(*moves)), [NOT_OWED])
    assert trial.failures == ("check_policy was never called", "issue_refund was called")


def test_a_run_that_ends_without_an_answer_fails_on_its_outcome():
    looping = office(lambda ctx, tools: Action("look_up_order", {"order_id": "A1234"}))
    (trial,) = evaluate(looping, [Case("Refund A1234?", says=("$79",))])
    assert trial.failures == ("it gave no answer (out_of_steps)",)


def test_a_brain_that_raises_fails_its_case_with_the_error_and_the_evaluation_goes_on():
    def fussy(ctx, tools):
        if "B2001" in ctx[0].content:
            raise KeyError("the brain lost its place")
        return support_policy(ctx, tools)
    trials = evaluate(office(fussy), CASES, repeat=2)
    assert [t.failures for t in trials] == [(), (), ("the run raised KeyError: 'the brain lost its place'",)] * 2
    assert [m.kind for m in trials[2].ctx] == ["question"]  # the run so far


def test_a_brain_that_raises_mid_run_keeps_the_notebook_so_far():
    brain = scripted(Action("look_up_order", {"order_id": "A1234"}))  # one move, then the script is over
    (trial,) = evaluate(office(brain), [PAID])
    assert trial.failures == ("the run raised IndexError: the script is over: the run asked for move 2, "
                              "and the script holds 1",)
    assert [m.kind for m in trial.ctx] == ["question", "decision", "result"]


def test_repeats_give_a_pass_rate_per_attempt_and_the_table_shows_its_spread():
    runs = []

    def flaky(ctx, tools):  # skips the policy check on every second run of the refund case
        if len(ctx) == 1:
            runs.append(ctx[0].content)
        if ctx[0].content == PAID.question and runs.count(PAID.question) % 2 == 0:
            return hasty(ctx, tools)
        return support_policy(ctx, tools)
    trials = evaluate(office(flaky), CASES, repeat=4)
    assert [t.attempt for t in trials] == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
    assert pass_rates(trials) == [1.0, 2 / 3, 1.0, 2 / 3]
    assert table({"rules": evaluate(office(), CASES, repeat=4), "flaky": trials}) == "\n".join([
        "                    rules     flaky",
        "refund, yes           4/4       2/4",
        "refund, no            4/4       4/4",
        "not eligible          4/4       4/4",
        "pass rate            100%       83%",
        "lowest-highest  100%-100%  67%-100%"])


def test_the_llm_brain_is_graded_like_any_brain(stand_in):
    server = stand_in(
        reply("look it up", calls=[("look_up_order", '{"order_id": "A1234"}')]),
        reply("check", calls=[("check_policy", '{"order_id": "A1234"}')]),
        reply("refund", calls=[("issue_refund", '{"order_id": "A1234", "amount": 79}')]),
        reply("Done: I refunded $79 to your card."),
        reply("look it up", calls=[("look_up_order", '{"order_id": "B2001"}')]),
        reply("Sorry, that lamp is not refundable."))  # and then the script is over
    trials = evaluate(office(chat_policy("stand-in", server.url)), [PAID, NOT_OWED, DENIED])
    assert [t.failures for t in trials] == [
        (), ("check_policy was never called",),
        (f"the run raised LLMError: {server.url}/chat/completions answered HTTP 400 (the server said: "
         "the stand-in's script is over: give it more replies): the server refused the request as it is: "
         "a setting may not suit it",)]


def test_bad_cases_and_bad_settings_are_refused_with_what_to_do():
    with pytest.raises(ValueError, match="a case needs a question"):
        Case("  ")
    with pytest.raises(ValueError, match="a case needs a question"):
        Case(None)
    with pytest.raises(TypeError, match=r"a case's calls is a tuple of strings, like \('look_up_order',\)"):
        Case("Refund A1234?", calls="look_up_order")
    with pytest.raises(ValueError, match="no run can both call and never call issue_refund"):
        Case("Refund A1234?", calls=REFUND, never=("issue_refund",))
    assert Case("Refund A1234?", calls=["look_up_order"]).calls == ("look_up_order",)  # a list is kept as a tuple
    with pytest.raises(ValueError, match="repeat is how many times to run each case: a whole number from 1 up, not 0"):
        evaluate(office(), CASES, repeat=0)
    with pytest.raises(ValueError, match="not True"):
        evaluate(office(), CASES, repeat=True)
    with pytest.raises(TypeError, match="evaluate takes a list of Cases"):
        evaluate(office(), [])
    with pytest.raises(TypeError, match="evaluate runs an Agent"):
        evaluate(support_policy, CASES)
    with pytest.raises(TypeError, match="a case's ordered and yes are True or False"):
        Case("Refund A1234?", yes="no")
    with pytest.raises(ValueError, match="two cases share a name"):
        evaluate(office(), [PAID, Case("Refund A1234?", name="refund, yes")])
    with pytest.raises(ValueError, match="table takes"):
        table({"rules": ()})
    with pytest.raises(ValueError, match="the case 'typo' names issue_refnd, and the agent's tools are look_up_order"):
        evaluate(office(), [Case("Refund A1234?", never=("issue_refnd",), name="typo")])


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), repeat=st.integers(1, 3))
def test_pass_rates_are_shares_one_per_attempt(seed, repeat):
    trials = evaluate(office(guessing(seed)), CASES, repeat)
    rates = pass_rates(trials)
    assert len(rates) == repeat and all(0 <= r <= 1 for r in rates)
    assert sum(rates) / repeat == sum(t.passed for t in trials) / len(trials)


@settings(max_examples=10, deadline=None)
@given(order=st.permutations(range(len(CASES))))
def test_a_case_is_graded_the_same_whatever_order_the_cases_run_in(order):
    # a brain that reads only the notebook gives each case the same run, and so the same grade, in any order
    first = {t.case.name: (t.ctx, t.failures) for t in evaluate(office(hasty), CASES, repeat=2)}
    shuffled = evaluate(office(hasty), [CASES[i] for i in order], repeat=2)
    assert all((t.ctx, t.failures) == first[t.case.name] for t in shuffled)
    # and a grade is the notebook's alone: grading a trial again, in any office of the same tools, agrees
    assert all(grade(t.case, office(), t.ctx) == t.failures for t in shuffled)


def test_pass_rates_of_a_trial_by_hand():
    c = Case("Hi?")
    done = Context()
    assert pass_rates((Trial(c, 1, done, ()), Trial(c, 1, done, ("x",)), Trial(c, 2, done, ()))) == [0.5, 1.0]


def test_an_agent_of_any_office_can_be_evaluated():
    agent = Agent(scripted(Action("final_answer", {"answer": "It is 5."})), [final_answer])
    (trial,) = evaluate(agent, [Case("What is 2 + 3?", says=("5",), calls=("final_answer",))])
    assert trial.passed and json.loads(trial.ctx[1].args) == {"answer": "It is 5."}


# ----------------------------------------------------------------------------------------------
# an independent check: pydantic-evals grades the same cases, with evaluators of its own kind that
# read the notebook, written here apart from evals.grade, and agrees with ours case by case


def pydantic_grades(cases: list[Case], run) -> dict[str, bool]:
    """Each case's pass or fail, as pydantic-evals finds it: `run(case)` gives the notebook."""
    pydantic_evals = pytest.importorskip("pydantic_evals")
    from dataclasses import dataclass

    from pydantic_evals.evaluators import Evaluator, EvaluatorContext

    def called(ctx):
        return [m.tool for m in ctx if m.kind == "decision"]

    @dataclass
    class Answered(Evaluator):
        def evaluate(self, ctx: EvaluatorContext) -> bool:
            last = ctx.output.last()
            return last.kind == "result" and last.name == "final_answer" and not last.error

    @dataclass
    class Says(Evaluator):
        def evaluate(self, ctx: EvaluatorContext) -> bool:
            answer = ctx.output.last().content.casefold()
            return all(word.casefold() in answer for word in ctx.expected_output)

    @dataclass
    class CallsInOrder(Evaluator):
        def evaluate(self, ctx: EvaluatorContext) -> bool:
            made, want = called(ctx.output), ctx.metadata["calls"]
            if not ctx.metadata["ordered"]:
                return set(want) <= set(made)
            place = 0
            for tool in made:  # walk the calls made, ticking off the wanted ones in turn
                if place < len(want) and tool == want[place]:
                    place += 1
            return place == len(want)

    @dataclass
    class NeverCalled(Evaluator):
        def evaluate(self, ctx: EvaluatorContext) -> bool:
            return not set(ctx.metadata["never"]) & set(called(ctx.output))

    @dataclass
    class HumanFirst(Evaluator):
        def evaluate(self, ctx: EvaluatorContext) -> bool:
            notes = ctx.output.messages
            return all(notes[i - 1].kind == "verdict" for i, m in enumerate(notes)
                       if m.kind == "result" and not m.error and m.name in ctx.metadata["asks_first"])

    dataset = pydantic_evals.Dataset(
        name="refund office",
        cases=[pydantic_evals.Case(name=c.name, inputs=c, expected_output=c.says,
                                   metadata={"calls": c.calls, "ordered": c.ordered, "never": c.never,
                                             "asks_first": c.asks_first})
               for c in cases],
        evaluators=[Answered(), Says(), CallsInOrder(), NeverCalled(), HumanFirst()])
    report = dataset.evaluate_sync(run, max_concurrency=1, progress=False)
    graded = {case.name: all(a.value for a in case.assertions.values()) for case in report.cases}
    graded.update({failure.name: False for failure in report.failures})  # the run raised
    return graded


def run_with_a_human(agent: Agent):
    """The cases' runner for pydantic-evals, written apart from evals.attempt."""
    from microagent.approval import approve, deny, waiting

    def run(case: Case) -> Context:
        ctx = agent.run(case.question)
        while (asked := waiting(ctx)) is not None:
            tool = agent.tools[asked.tool]
            ctx = agent.run(approve(ctx, tool) if case.yes else deny(ctx, tool, "no"))
        return ctx
    return run


def hurried(ctx, tools):
    """Answers the lamp's customer at once, without looking anything up."""
    if "B2001" in ctx[0].content:
        return Action("final_answer", {"answer": "Sorry, no."})
    return support_policy(ctx, tools)


def fussy(ctx, tools):
    """Raises on the kettle's customer."""
    if "C3002" in ctx[0].content:
        raise KeyError("lost")
    return support_policy(ctx, tools)


@pytest.mark.parametrize("agent", [office(), office(hasty), office(hurried), office(fussy),
                                   office(approver=lambda tool_name, args: True)],
                         ids=["rules", "hasty", "hurried", "raises", "no human"])
def test_pydantic_evals_agrees_with_our_grades_case_by_case(agent):
    ours = {t.case.name: t.passed for t in evaluate(agent, CASES)}
    assert pydantic_grades(CASES, run_with_a_human(agent)) == ours


def test_pydantic_evals_agrees_on_the_random_brains_notebooks():
    # the random brain's runs depend on what it drew before, so both graders read the same notebooks
    trials = [t for seed in range(8) for t in evaluate(office(guessing(seed)), CASES)]
    for n in range(0, len(trials), len(CASES)):
        run = {t.case.question: t.ctx for t in trials[n:n + len(CASES)]}
        ours = {t.case.name: t.passed for t in trials[n:n + len(CASES)]}
        assert pydantic_grades(CASES, lambda case, notebooks=run: notebooks[case.question]) == ours
    assert 0 < sum(t.passed for t in trials) < len(trials)  # some passed and some failed
