"""Message: one note, written in pen; every note is one of seven kinds."""

import dataclasses

import pytest
from hypothesis import given, strategies as st

from microagent.message import ASSISTANT, ROLES, SYSTEM, TOOL, USER, Message
from microagent.tool import error_note

KINDS = ("system", "question", "decision", "verdict", "result", "remark", "no_move")


def test_a_message_is_frozen_and_compares_by_value():
    note = Message(USER, "hello")
    with pytest.raises(dataclasses.FrozenInstanceError):
        note.content = "changed"
    assert note == Message(USER, "hello")
    assert len({note, Message(USER, "hello"), Message(USER, "bye")}) == 2  # it hashes


def test_the_articles_three_field_note_is_a_message():
    assert Message("tool", "A1234, $79", name="look_up_order") == Message(TOOL, "A1234, $79", "look_up_order")


@pytest.mark.parametrize("make, error, says", [
    (lambda: Message("boss", "hi"), ValueError, "role must be one of system, user, assistant, tool"),
    (lambda: Message(USER, {"text": "hi"}), TypeError, "content must be a string"),
    (lambda: Message(USER, None), TypeError, "content must be a string"),
    (lambda: Message(ASSISTANT, "", tool="t", args={"a": 1}), TypeError, "args must be a string"),
    (lambda: Message(TOOL, "x", name=7), TypeError, "name must be a string"),
    (lambda: Message(TOOL, "x", notes=[Message(USER, "hi")]), TypeError, "notes must be a tuple of Messages"),
    (lambda: Message(TOOL, "x", notes=("hi",)), TypeError, "notes must be a tuple of Messages"),
    (lambda: Message(TOOL, "x", error=1), TypeError, "error must be True or False"),
    (lambda: Message(TOOL, "x", error=[]), TypeError, "error must be True or False"),
    (lambda: Message(TOOL, "x", error="yes"), TypeError, "error must be True or False"),
])
def test_a_message_refuses_what_it_cannot_hold(make, error, says):
    with pytest.raises(error, match=says):
        make()


@pytest.mark.parametrize("note, kind", [
    (Message(SYSTEM, "be kind"), "system"),
    (Message(USER, "refund A1234?"), "question"),
    (Message(ASSISTANT, "pull it up", "support", "look_up_order", '{"order_id": "A1234"}'), "decision"),
    (Message(USER, "approved", "alice", "issue_refund", '{"amount": 79}'), "verdict"),
    (Message(USER, "send it back first", "alice", "issue_refund"), "verdict"),
    (Message(TOOL, "A1234, $79", "look_up_order"), "result"),
    (error_note("look_up_order", "no order A9"), "result"),
    (Message(ASSISTANT, "out of steps: stopped after 3 turns", "support"), "remark"),
    (Message(ASSISTANT, "your reply was cut off at 200 tokens", "support", error=True), "no_move"),
])
def test_every_note_is_one_of_seven_kinds(note, kind):
    assert note.kind == kind


@given(st.sampled_from(ROLES), st.none() | st.text(max_size=3), st.booleans())
def test_every_possible_note_has_exactly_one_kind(role, tool, error):
    assert Message(role, "", tool=tool, error=error).kind in KINDS
