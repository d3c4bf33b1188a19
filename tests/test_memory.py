"""Memory: compact folds the middle of a notebook into one summary note; the brain reads the short one."""

import pytest
from hypothesis import given, settings, strategies as st

from hard_parts import run_checked
from microagent import (ASSISTANT, SYSTEM, TOOL, USER, Action, Agent, Context, Message, approve, as_tool,
                        final_answer, scripted)
from microagent.invariants import check
from microagent.memory import compact, digest, remembering, summary_by


@as_tool
def step(n: int) -> str:
    """Count one up from n."""
    return str(n + 1)


def counter(goal: int):
    """A brain that reads only the last note, to know where the count stands."""
    def brain(ctx, tools):
        last = ctx.last()
        n = int(last.content) if last.role == TOOL else 0
        if n >= goal:
            return Action("final_answer", {"answer": f"counted to {n}"}, "there")
        return Action("step", {"n": n}, "one more")
    return brain


def counted(goal: int) -> Context:
    return run_checked(Agent(counter(goal), [step, final_answer], system="Count.", max_steps=goal + 1),
                       f"count to {goal}")


def test_the_middle_is_folded_and_the_head_and_the_recent_turns_stay_whole():
    ctx = counted(5)  # system, question, 5 steps and the answer: 6 turns of 2 notes
    short = compact(ctx, keep=4)
    # system, question, the summary, then the last two turns whole
    assert [m.role for m in short] == [SYSTEM, USER, ASSISTANT, ASSISTANT, TOOL, ASSISTANT, TOOL]
    assert short[:2] == ctx[:2] and short[3:] == ctx[-4:]
    assert short[2] == Message(ASSISTANT, 'earlier, in 8 notes: 4 calls (step 4), no errors; '
                                          'the last result: step returned "4"', name="memory", notes=ctx[2:10])
    assert short.unfolded() == list(ctx)  # folding loses nothing: the summary keeps what it folded
    assert len(ctx) == 14  # the original is untouched: written in pen


def test_a_turn_is_never_cut_in_two():
    ctx = counted(5)
    for keep in range(1, len(ctx) + 1):
        short = compact(ctx, keep)
        recent = short[3:] if short[2].name == "memory" else short[2:]
        assert recent[0].role != TOOL, f"keep={keep} cut a decision from its result"
        assert len(recent) in (keep, keep + 1) or short == ctx
        check(short)


def test_a_paused_run_keeps_its_waiting_decision_and_the_verdict_with_it():
    @as_tool(needs_approval=True)
    def wire(amount: int) -> str:
        """Wire money."""
        return f"wired ${amount}"

    agent = Agent(scripted(*[Action("step", {"n": n}) for n in range(6)], Action("wire", {"amount": 5})),
                  [step, wire, final_answer])
    paused = approve(run_checked(agent, "count, then pay"), by="alice")
    short = compact(paused, keep=1)
    assert short[-2:] == paused[-2:] and short.pending == paused.pending  # the decision and its verdict
    assert check(short) and [m.role for m in short] == [USER, ASSISTANT, ASSISTANT, USER]


def test_nothing_to_fold_gives_the_same_notebook_back():
    ctx = counted(1)
    assert compact(ctx, keep=20) is ctx
    with pytest.raises(ValueError, match="keep is how many recent notes stay whole"):
        compact(ctx, keep=0)


def test_any_function_of_the_notes_can_write_the_summary():
    seen = []

    def tally(notes):
        seen.append(notes)
        return f"{len(notes)} notes folded"

    ctx = counted(5)
    short = compact(ctx, keep=2, summarise=tally)
    assert seen == [ctx[2:12]] and short[2].content == "10 notes folded"


def test_a_brain_can_write_the_summary():
    def scribe(ctx, tools):  # a stand-in for a language model: it reads the notes and sums them up
        steps = sum(m.role == TOOL for m in ctx)
        return Action("final_answer", {"answer": f"I counted {steps} times."}, "summarise")

    short = compact(counted(5), keep=2, summarise=summary_by(scribe))
    assert short[2] == Message(ASSISTANT, "I counted 5 times.", name="memory", notes=counted(5)[2:12])


def test_the_default_summary_stays_short_however_long_the_run():
    for goal in (10, 100, 1000):
        assert len(digest(counted(goal).messages)) < 200


def test_a_thousand_steps_the_brain_sees_a_short_notebook_and_the_agent_keeps_every_note():
    seen = []
    brain = counter(1000)

    def watched(ctx, tools):  # what the brain is shown, turn by turn
        seen.append(ctx)
        return brain(ctx, tools)

    agent = Agent(remembering(watched, keep=6), [step, final_answer], system="Count.", max_steps=1001)
    full = run_checked(agent, "count to 1000")  # the invariants checked after each of its 1,001 steps
    assert full.last().content == "counted to 1000"
    # system, question, then 1,001 turns of two notes: nothing is lost from the record
    assert len(full) == 2 + 2 * 1001 and check(full)
    assert len(seen) == 1001
    assert max(len(ctx) for ctx in seen) == 2 + 1 + 6  # head, summary, the recent turns: bounded
    assert max(sum(len(m.content) for m in ctx) for ctx in seen) < 400
    assert seen[-1][2].content.startswith("earlier, in 1994 notes: 997 calls (step 997), no errors")


# a property: whatever the notebook and however much is kept, compact keeps the rules

ACTIONS = st.sampled_from([Action("step", {"n": 1}), Action("step", {"n": "x"}), Action("nope"),
                           Action("final_answer", {"answer": "ok"})])


@settings(max_examples=150, deadline=None)
@given(script=st.lists(ACTIONS, min_size=1, max_size=12), questions=st.integers(1, 3), keep=st.integers(1, 30),
       system=st.booleans())
def test_compact_keeps_the_rules_the_head_and_the_recent_notes(script, questions, keep, system):
    def brain(ctx, tools):  # plays the script round and round
        return script[sum(m.role == ASSISTANT and m.tool is not None for m in ctx) % len(script)]

    agent = Agent(brain, [step, final_answer], system="Count." if system else None, max_steps=4)
    ctx = None
    for q in range(questions):  # a conversation: one question after another
        ctx = run_checked(agent, f"question {q}", context=ctx)
    short = compact(ctx, keep)
    check(short)
    assert short.unfolded() == list(ctx)  # nothing lost, nothing added: only folded
    head = 2 if system else 1
    assert short[:head] == ctx[:head]  # the system note and the first question, as they were
    last_summary = max((i for i, m in enumerate(short) if m.name == "memory"), default=head - 1)
    recent = short[last_summary + 1:]  # the notes after the last summary: the end of the notebook, whole
    assert ctx[len(ctx) - len(recent):] == recent and (len(recent) >= keep or short.messages == ctx.messages)
    latest = [m for m in ctx if m.is_question][-1]
    assert latest in short.messages  # the question being worked on is never folded away


@settings(max_examples=100, deadline=None)
@given(budget=st.integers(1, 8), pauses=st.lists(st.integers(1, 6), max_size=4), keep=st.integers(1, 6))
def test_the_step_budget_holds_across_compaction(budget, pauses, keep):
    # a brain that never finishes, a run stopped and compacted again and again:
    # it still makes exactly `budget` decisions on its question, never more
    endless = Agent(lambda ctx, tools: Action("step", {"n": 1}), [step, final_answer], max_steps=budget)
    ctx = Context((Message(USER, "count forever"),))
    for stop_after in pauses:
        for n, walked in enumerate(endless.steps(context=ctx), start=1):
            ctx = walked.context
            if n == stop_after:
                break
        ctx = compact(ctx, keep)
    last = endless.run(context=compact(ctx, keep))
    assert sum(m.is_decision for m in last.context.unfolded()) == budget
    assert last.stop == "out of steps" and last.context.last().content.startswith(f"out of steps: stopped after {budget}")


@pytest.mark.parametrize("keep", [0, 2.5, "3", None, True])
def test_keep_must_be_a_whole_number_of_notes(keep):
    with pytest.raises(ValueError, match="a whole number from 1 up"):
        compact(Context((Message(USER, "hi"),)), keep)


def test_a_summariser_must_return_text():
    ctx = Context((Message(USER, "hi"),) + (Message(ASSISTANT, "", name="a", tool="t", args="{}"),
                                             Message(TOOL, "x", name="t")) * 5)
    with pytest.raises(TypeError, match="returns a string"):
        compact(ctx, 2, summarise=lambda notes: None)


def test_a_summarising_brain_with_no_answer_falls_back_to_the_digest():
    def mute(ctx, tools):
        return Action("nothing", {})
    notes = (Message(ASSISTANT, "", name="a", tool="t", args="{}"), Message(TOOL, "x", name="t"))
    assert summary_by(mute)(notes) == "(the summariser gave no answer) " + digest(notes)


def test_in_a_conversation_the_question_being_worked_on_stays_whole():
    turn = (Message(ASSISTANT, "", name="a", tool="t", args="{}"), Message(TOOL, "x", name="t"))
    now = Message(USER, "Now cancel my subscription number 12345, please, and confirm by email.")
    ctx = Context((Message(USER, "first question"),) + turn * 3 + (now,) + turn * 3)
    short = check(compact(ctx, keep=2))
    assert now in short.messages and short[0].content == "first question"
    # question, summary, now (in its place), summary of its turns so far, the last turn
    assert [m.role for m in short] == [USER, ASSISTANT, USER, ASSISTANT, ASSISTANT, TOOL]
    assert short.unfolded() == list(ctx)


def test_digest_counts_errors_by_their_flag_a_denial_too():
    denial = Message(TOOL, "denied by alice: not today", name="refund", error=True)
    assert ", 1 error;" in digest((Message(ASSISTANT, "", name="a", tool="refund", args="{}"), denial))
