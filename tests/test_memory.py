"""Memory: compact makes a short view of a notebook for a brain to read; the notebook keeps every note."""

import json

import pytest
from hypothesis import given, settings, strategies as st

from microagent.agent import DONE, OUT_OF_STEPS, Agent
from microagent.approval import verdict
from microagent.context import Context
from microagent.invariants import check
from microagent.memory import compact, plain_summary, remembering, summary_by
from microagent.message import ASSISTANT, SYSTEM, TOOL, USER, Message
from microagent.policy import Action
from microagent.saving import from_json, to_json
from microagent.schema import as_tool
from microagent.script import actions, replay, scripted
from microagent.tool import final_answer
from hard_parts import run_checked



@as_tool
def step(n: int) -> str:
    """Count one up from n."""
    return str(n + 1)


def counter(goal: int):
    """A brain that reads only the last note, to know where the count stands."""
    def brain(ctx, tools):
        last = ctx.last()
        n = int(last.content) if last.kind == "result" else 0
        if n >= goal:
            return Action("final_answer", {"answer": f"counted to {n}"}, "there")
        return Action("step", {"n": n}, "one more")
    return brain


def counted(goal: int) -> Context:
    told = Context((Message(SYSTEM, "Count."), Message(USER, f"count to {goal}")))
    return run_checked(Agent(counter(goal), [step, final_answer], goal + 1), told)


def turn(n: int) -> tuple[Message, Message]:
    return (Message(ASSISTANT, "", "clerk", "step", json.dumps({"n": n})),
            Message(TOOL, str(n + 1), "step"))


def test_the_middle_is_summed_up_and_the_head_and_the_recent_turns_stay_whole():
    ctx = counted(5)  # system, question, 5 steps and the answer: 6 turns of 2 notes
    view = compact(ctx, keep=4)
    # system, question, the summary, then the last two turns whole
    assert [m.kind for m in view] == ["system", "question", "remark", "decision", "result",
                                      "decision", "result"]
    assert view[:2] == ctx[:2] and view[3:] == ctx[-4:]
    assert view[2] == Message(ASSISTANT, 'earlier, in 8 notes: 4 calls (step 4), no errors; '
                                         'the last result: step returned "4"', "memory")
    assert len(ctx) == 14  # the notebook is untouched: written in pen


def test_a_turn_is_never_cut_in_two():
    ctx = counted(5)
    for keep in range(1, len(ctx) + 1):
        view = compact(ctx, keep)
        recent = view[3:] if view[2].name == "memory" else view[2:]
        assert recent[0].kind != "result", f"keep={keep} cut a decision from its result"
        assert len(recent) in (keep, keep + 1) or view is ctx
        check(view)


def test_a_paused_run_keeps_its_waiting_decision_and_the_verdict_with_it():
    @as_tool(needs_approval=True)
    def wire(amount: int) -> str:
        """Wire money."""
        return f"wired ${amount}"

    agent = Agent(scripted(*[Action("step", {"n": n}) for n in range(6)], Action("wire", {"amount": 5})),
                  [step, wire, final_answer])
    ruled = verdict(run_checked(agent, "count, then pay"), wire, True, by="alice")
    view = check(compact(ruled, keep=1))
    assert [m.kind for m in view] == ["question", "remark", "decision", "verdict"]
    assert view[-2:] == ruled[-2:]  # the decision and the verdict on it, together


def test_nothing_to_sum_up_gives_the_same_notebook_back():
    ctx = counted(1)
    assert compact(ctx, keep=20) is ctx
    with pytest.raises(ValueError, match="keep is how many recent notes stay whole"):
        compact(ctx, keep=0)


def test_any_function_of_the_notes_can_write_the_summary():
    seen = []

    def tally(notes):
        seen.append(notes)
        return f"{len(notes)} notes summed up"

    ctx = counted(5)
    view = compact(ctx, keep=2, summarise=tally)
    assert seen == [ctx[2:12]] and view[2] == Message(ASSISTANT, "10 notes summed up", "memory")


def test_a_brain_can_write_the_summary():
    def scribe(ctx, tools):  # a stand-in for a language model: it reads the notes and sums them up
        steps = sum(m.kind == "result" for m in ctx)
        return Action("final_answer", {"answer": f"I counted {steps} times."}, "summarise")

    view = compact(counted(5), keep=2, summarise=summary_by(scribe))
    assert view[2] == Message(ASSISTANT, "I counted 5 times.", "memory")


def test_the_plain_summary_stays_short_however_long_the_run():
    for goal in (10, 100, 1000):
        assert len(plain_summary(counted(goal).messages)) < 200


def test_a_thousand_steps_the_brain_sees_a_short_view_and_the_agent_keeps_every_note():
    seen = []
    brain = counter(1000)

    def watched(ctx, tools):  # what the brain is shown, turn by turn
        seen.append(ctx)
        return brain(ctx, tools)

    agent = Agent(remembering(watched, keep=6), [step, final_answer], 1001)
    full = run_checked(agent, Context((Message(SYSTEM, "Count."), Message(USER, "count to 1000"))))
    assert full.last().content == "counted to 1000" and agent.why_stop(full) == DONE
    # system, question, then 1,001 turns of two notes: nothing is missing from the record
    assert len(full) == 2 + 2 * 1001
    assert len(seen) == 1001
    assert max(len(ctx) for ctx in seen) == 2 + 1 + 6  # head, summary, the recent turns: bounded
    assert max(sum(len(m.content) for m in ctx) for ctx in seen) < 400
    assert seen[-1][2] == Message(ASSISTANT, 'earlier, in 1994 notes: 997 calls (step 997), no errors; '
                                             'the last result: step returned "997"', "memory")
    assert from_json(to_json(full)) == full  # the whole record saves, flat: no note holds another


def test_the_full_notebook_replays_note_for_note_without_memory():
    agent = Agent(remembering(counter(30), keep=3), [step, final_answer], 31)
    full = agent.run("count to 30")
    assert Agent(replay(full), [step, final_answer], 31).run("count to 30") == full


def test_a_scripted_brain_under_remembering_sees_only_the_view_and_loses_its_place():
    # memory's docstring says so: a script counts the moves it is shown, and a view hides some
    moves = [Action("step", {"n": n}, f"step {n}") for n in range(4)]
    script = scripted(*moves, Action("final_answer", {"answer": "4"}, "done"))
    plain = Agent(script, [step, final_answer], 6).run("count to 4")
    assert plain.last().content == "4"
    forgetful = Agent(remembering(script, keep=2), [step, final_answer], 6)
    ctx = forgetful.run("count to 4")
    assert forgetful.why_stop(ctx) == OUT_OF_STEPS
    assert [a.reasoning for a in actions(ctx)] == ["step 0", "step 1", "step 1", "step 1",
                                                  "step 1", "step 1"]


# a property: whatever the notebook and however much is kept, the view keeps the rules

ACTIONS = st.sampled_from([Action("step", {"n": 1}), Action("step", {"n": "x"}), Action("nope"),
                           Action(None, reasoning="the reply was cut off"),
                           Action("final_answer", {"answer": "ok"})])


@settings(max_examples=150, deadline=None)
@given(script=st.lists(ACTIONS, min_size=1, max_size=12), questions=st.integers(1, 3),
       keep=st.integers(1, 30), system=st.booleans())
def test_compact_keeps_the_rules_the_head_and_the_recent_notes(script, questions, keep, system):
    def brain(ctx, tools):  # plays the script round and round
        return script[len(actions(ctx)) % len(script)]

    agent = Agent(brain, [step, final_answer], 4)
    ctx = Context((Message(SYSTEM, "Count."),)) if system else Context()
    for q in range(questions):  # a conversation: one question after another
        ctx = run_checked(agent, ctx.add(Message(USER, f"question {q}")))
    view = check(compact(ctx, keep))
    head = 2 if system else 1
    assert view[:head] == ctx[:head]  # the system note and the first question, as they were
    summaries = [i for i, m in enumerate(view) if m.name == "memory"]
    assert all(view[i].kind == "remark" and not view[i].notes for i in summaries)  # words only
    kept = [m for m in view if m.name != "memory"]
    rest = iter(ctx)
    assert all(m in rest for m in kept)  # every other note is the notebook's, in its order
    recent = view[max(summaries, default=head - 1) + 1:]  # after the last summary: the end, whole
    assert ctx[len(ctx) - len(recent):] == recent and (len(recent) >= keep or view is ctx)
    latest = [m for m in ctx if m.kind == "question"][-1]
    assert latest in view.messages  # the question being worked on is never summed away


@settings(max_examples=100, deadline=None)
@given(budget=st.integers(1, 8), pauses=st.lists(st.integers(1, 6), max_size=4),
       keep=st.integers(1, 6))
def test_the_step_budget_counts_every_move_of_the_full_notebook(budget, pauses, keep):
    # a brain that never finishes, reading a short view, its run stopped and resumed again
    # and again: it still makes exactly `budget` moves on its question, never more
    endless = Agent(remembering(lambda ctx, tools: Action("step", {"n": 1}), keep),
                    [step, final_answer], budget)
    ctx = Context((Message(USER, "count forever"),))
    for stop_after in pauses:
        for n, walked in enumerate(endless.steps(ctx), start=1):
            ctx = walked.context
            if n == stop_after:
                break
    ctx = endless.run(ctx)
    assert endless.why_stop(ctx) == OUT_OF_STEPS
    assert sum(m.kind == "decision" for m in ctx) == budget
    turns = "1 turn" if budget == 1 else f"{budget} turns"
    assert ctx.last().content == f"out of steps: stopped after {turns} without an answer"


def test_a_view_compacted_a_thousand_times_stays_flat_and_saves():
    # issue 16: a summary kept the notes it folded, so compacting a compacted notebook nested
    # summaries, and after about 500 compactions to_json raised RecursionError
    view = Context((Message(USER, "count forever"),))
    for n in range(1000):
        view = compact(view.add(*turn(n)), keep=4)
    assert view == Context((Message(USER, "count forever"),
                            Message(ASSISTANT, 'earlier, in 3 notes: 1 call (step 1), no errors; '
                                               'the last result: step returned "998"', "memory"),
                            *turn(998), *turn(999)))
    assert from_json(to_json(view)) == view


@pytest.mark.parametrize("keep", [0, 2.5, "3", None, True])
def test_keep_must_be_a_whole_number_of_notes(keep):
    with pytest.raises(ValueError, match="a whole number from 1 up"):
        compact(Context((Message(USER, "hi"),)), keep)


def test_a_summariser_must_return_text():
    ctx = Context((Message(USER, "hi"), *turn(1) * 5))
    with pytest.raises(TypeError, match="returns a string"):
        compact(ctx, 2, summarise=lambda notes: None)


def test_a_summarising_brain_with_no_answer_falls_back_to_the_plain_summary():
    def mute(ctx, tools):
        return Action("nothing", {})
    notes = turn(1)
    assert summary_by(mute)(notes) == "(the summariser gave no answer) " + plain_summary(notes)


def test_in_a_conversation_the_question_being_worked_on_stays_whole():
    now = Message(USER, "Now cancel my subscription number 12345, please, and confirm by email.")
    ctx = Context((Message(USER, "first question"), *turn(1) * 3, now, *turn(2) * 3))
    view = check(compact(ctx, keep=2))
    # question, summary, now (in its place), a summary of its turns so far, the last turn
    assert view == Context((
        Message(USER, "first question"),
        Message(ASSISTANT, 'earlier, in 6 notes: 3 calls (step 3), no errors; '
                           'the last result: step returned "2"', "memory"),
        now,
        Message(ASSISTANT, 'earlier, in 4 notes: 2 calls (step 2), no errors; '
                           'the last result: step returned "3"', "memory"),
        *turn(2)))


def test_the_plain_summary_counts_errors_by_their_flag_a_denial_and_a_no_move_too():
    denial = Message(TOOL, "denied by alice: not today", "refund", error=True)
    no_move = Message(ASSISTANT, "the reply was cut off at 200 tokens", "clerk", error=True)
    said = plain_summary((Message(ASSISTANT, "", "clerk", "refund", "{}"), denial, no_move))
    assert said == ('earlier, in 3 notes: 1 call (refund 1), 2 errors; '
                    'the last result: refund returned "denied by alice: not today"')
