"""microagent.progress: reports from inside a tool, heard by whoever listens, kept when a tool fails."""

import contextvars
import threading

import pytest
from hypothesis import given, settings, strategies as st

from microagent import Action, Agent, Tool, error_note, final_answer, scripted
from microagent.progress import MAX_MESSAGE, keeping, listening, report, told
from microagent.parallel import at_once
from microagent.retry import hiding, retrying


def copy_files(count: int) -> str:
    """Copy `count` files, telling how far it has got."""
    for i in range(1, count + 1):
        report(i, count, f"copying file {i}")
    return f"copied {count} files"


def test_a_tool_reports_to_whoever_listens_and_outside_a_listener_to_nobody():
    assert copy_files(2) == "copied 2 files"  # nobody listens: nothing happens
    heard = []
    with listening(lambda *said: heard.append(said)) as listener:
        copy_files(2)
    assert heard == [(1, 2, "copying file 1"), (2, 2, "copying file 2")]
    assert listener.last == (2, 2, "copying file 2")
    copy_files(2)
    assert len(heard) == 2  # the block is over: nobody listens again


def test_a_run_with_a_listener_hears_its_tools_progress_and_the_notebook_stays_as_it_was():
    agent = Agent(scripted(Action("copy_files", {"count": 3}), Action("final_answer", {"answer": "done"})),
                  [Tool("copy_files", "Copy files", copy_files), final_answer])
    heard = []
    with listening(lambda done, total, message: heard.append(told(done, total, message))):
        ctx = agent.run("copy them")
    assert heard == ["1 of 3: copying file 1", "2 of 3: copying file 2", "3 of 3: copying file 3"]
    # question, decision, result, decision, result: a report is no note
    assert [m.kind for m in ctx] == ["question", "decision", "result", "decision", "result"]
    assert ctx[2].content == "copied 3 files"


def test_progress_that_does_not_increase_is_a_value_error_that_says_so():
    heard = []
    with listening(lambda *said: heard.append(said)), pytest.raises(ValueError) as caught:
        report(2)
        report(2, message="again")
    assert str(caught.value).startswith("progress must increase: 2 came after 2.")
    assert heard == [(2, None, "")]


def test_a_report_that_is_not_numbers_and_text_is_a_type_error_with_or_without_a_listener():
    for bad in [("3",), (float("nan"),), (True,), (1, "10"), (1, 10, None)]:
        with pytest.raises(TypeError, match="report takes done and total, finite numbers"):
            report(*bad)
    with pytest.raises(TypeError, match="listening takes a function"):
        with listening("print"):
            pass


def test_a_long_message_is_cut_to_what_fits_on_a_status_line():
    heard = []
    with listening(lambda *said: heard.append(said)):
        report(1, message="x" * 10_000)
    assert heard == [(1, None, "x" * (MAX_MESSAGE - 3) + "...")]


def test_a_kept_tool_that_fails_says_how_far_it_got_in_its_error_note():
    def migrate(rows: int) -> str:
        for i in range(1, rows + 1):
            report(i, rows, f"row {i}")
            if i == 3:
                raise OSError("disk full")
        return "migrated"
    note = keeping(Tool("migrate", "Migrate the rows", migrate)).run('{"rows": 10}')
    assert note.error and note.content == ("error: migrate failed: RuntimeError: OSError: disk full "
                                           "(it got as far as 3 of 10: row 3)")
    # a failure before any progress is left as it was
    quiet = keeping(Tool("quiet", "Fail at once", lambda: 1 / 0)).run("{}")
    assert quiet.content == "error: quiet failed: ZeroDivisionError: division by zero"


def test_a_kept_tool_whose_error_note_comes_back_gets_the_same_words_and_a_success_none():
    def fetch(fail: bool):
        report(1, 2, "downloading")
        return error_note("fetch", "the server hung up") if fail else "fetched"
    fetch_tool = keeping(Tool("fetch", "Fetch", fetch))
    assert fetch_tool.run('{"fail": true}').content == ("error: the server hung up "
                                                         "(it got as far as 1 of 2: downloading)")
    assert fetch_tool.run('{"fail": false}').content == "fetched"


def test_a_kept_hidden_tool_hides_the_failures_words_and_keeps_how_far_it_got():
    def migrate(rows: int) -> str:
        report(1, rows, "row 1")
        raise OSError("password=hunter2 rejected")
    errors = []
    note = keeping(hiding(Tool("migrate", "Migrate the rows", migrate), errors.append)).run('{"rows": 4}')
    assert note.content == ("error: migrate failed: RuntimeError: it failed; the details went to the "
                            "developer (it got as far as 1 of 4: row 1)")
    assert [str(e) for e in errors] == ["password=hunter2 rejected"]


def test_a_kept_tool_kept_again_says_how_far_it_got_once_and_through_hiding_too():
    def migrate(rows: int, fail: str):
        report(1, rows, "row 1")
        report(2, rows, "row 2")
        if fail == "note":
            return error_note("migrate", "the server hung up")
        raise OSError("password=hunter2 rejected")
    kept = keeping(Tool("migrate", "Migrate the rows", migrate))
    assert keeping(kept).run('{"rows": 5, "fail": "raise"}').content == (
        "error: migrate failed: RuntimeError: OSError: password=hunter2 rejected (it got as far as 2 of 5: row 2)")
    assert keeping(kept).run('{"rows": 5, "fail": "note"}').content == (
        "error: the server hung up (it got as far as 2 of 5: row 2)")
    # as a host keeps every tool it hides, a tool kept by its office: the inner words hidden, how far kept
    errors = []
    note = keeping(hiding(kept, errors.append, "the tool failed")).run('{"rows": 5, "fail": "raise"}')
    assert note.content == "error: migrate failed: RuntimeError: the tool failed (it got as far as 2 of 5: row 2)"
    assert [str(e) for e in errors] == ["OSError: password=hunter2 rejected (it got as far as 2 of 5: row 2)"]


def test_kept_calls_report_from_one_again_and_pass_it_on_to_the_listener_outside():
    tool = keeping(Tool("copy_files", "Copy files", copy_files))
    heard = []
    with listening(lambda done, total, message: heard.append(done)):
        tool.run('{"count": 2}')
        tool.run('{"count": 2}')  # a second call counts from 1 again: its own listener checks it
    assert heard == [1, 2, 1, 2]


def test_a_kept_tool_retried_reports_each_try_from_one_and_its_last_failure_says_how_far():
    tries = []

    def flaky(rows: int) -> str:
        tries.append(1)
        for i in range(1, rows + 1):
            report(i, rows)
            if len(tries) < 3 and i == 2:
                raise ConnectionError("reset")
        return "done"
    heard = []
    with listening(lambda done, total, message: heard.append(done)):
        note = retrying(keeping(Tool("flaky", "Flaky", flaky))).run('{"rows": 3}')
    assert heard == [1, 2, 1, 2, 1, 2, 3]
    assert note.content == ("done (on attempt 3 of 3; the last failure: RuntimeError: ConnectionError: reset "
                            "(it got as far as 2 of 3))")


def test_tools_called_at_once_report_through_one_listener_when_each_is_kept():
    tool = keeping(Tool("copy_files", "Copy files", copy_files))
    heard, lock = [], threading.Lock()

    def listener(done, total, message):
        with lock:
            heard.append(message)
    both = at_once([tool])
    with listening(listener):
        note = both.run('{"calls": [{"tool": "copy_files", "args": {"count": 2}}, '
                        '{"tool": "copy_files", "args": {"count": 3}}]}')
    assert note.content == "copy_files: copied 2 files\ncopy_files: copied 3 files"
    assert sorted(heard) == sorted(["copying file 1", "copying file 2"] + ["copying file 1", "copying file 2",
                                                                           "copying file 3"])


def test_a_thread_the_tool_starts_hears_nothing_unless_it_runs_in_a_copy_of_the_context():
    heard = []
    with listening(lambda *said: heard.append(said)):
        plain = threading.Thread(target=report, args=(1,))
        plain.start(), plain.join()
        copied = threading.Thread(target=contextvars.copy_context().run, args=(report, 2))
        copied.start(), copied.join()
    assert heard == [(2, None, "")]


def test_told_says_a_report_in_words():
    assert told(3, 10, "copying") == "3 of 10: copying"
    assert told(3.0, 10.0) == "3 of 10"
    assert told(0.25, message="halfway to halfway") == "0.25: halfway to halfway"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(-1000, 1000) | st.floats(-1e6, 1e6, allow_nan=False), max_size=12))
def test_a_listener_hears_each_report_above_all_before_it_and_any_other_is_a_value_error(values):
    heard, refused = [], 0
    with listening(lambda done, total, message: heard.append(done)):
        for value in values:
            try:
                report(value)
            except ValueError:
                refused += 1
    above_all_before = [v for i, v in enumerate(values) if all(v > w for w in values[:i])]
    assert heard == above_all_before and refused == len(values) - len(heard)
