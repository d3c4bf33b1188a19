"""Context: the notebook you never erase."""

import dataclasses

import pytest

from microagent.context import Context
from microagent.message import ASSISTANT, TOOL, USER, Message

def test_add_hands_back_a_new_notebook_and_leaves_the_old_one():
    empty = Context()
    one = empty.add(Message(USER, "hi"))
    two = one.add(Message(TOOL, "hello", name="final_answer"))
    assert (len(empty), len(one), len(two)) == (0, 1, 2)
    assert empty.last() is None and one.last().content == "hi" and two.last().content == "hello"
    assert [m.role for m in two] == [USER, TOOL] and [m.role for m in two.messages] == [USER, TOOL]
    assert two[0] is one[0]  # the old notes are shared, never copied or changed
    with pytest.raises(dataclasses.FrozenInstanceError):
        two.messages = ()
    with pytest.raises(TypeError, match="takes Messages"):
        one.add("not a note")
    with pytest.raises(TypeError, match="holds a tuple of Messages"):
        Context([Message(USER, "hi")])


def test_in_jupyter_a_context_shows_as_its_story():
    pretty = pytest.importorskip("IPython.lib.pretty")
    ctx = Context().add(Message(USER, "hi"), Message(ASSISTANT, "say hello", name="bot", tool="final_answer",
                                                     args='{"answer": "hello"}'),
                        Message(TOOL, "hello", name="final_answer"))
    assert pretty.pretty(ctx) == 'you asked: "hi"\n  bot thought: say hello\n    -> final_answer returned: hello'
