"""scripted: a brain that needs no model, and reads its place off the notebook."""


import pytest

from microagent.context import Context
from microagent.message import ASSISTANT, TOOL, USER, Message
from microagent.policy import Action
from microagent.script import actions, scripted

def test_a_script_counts_the_moves_in_the_notebook_so_it_resumes_in_place():
    brain = scripted(Action("a"), Action(None, reasoning="?"), Action("b"))
    ctx = Context((Message(USER, "go"), Message(ASSISTANT, "", "x", "a", "{}"), Message(TOOL, "1", "a"),
                   Message(ASSISTANT, "?", "x", error=True)))
    assert brain(ctx, {}) == Action("b")
    assert actions(ctx) == [Action("a"), Action(None, reasoning="?")]
    with pytest.raises(IndexError, match="the script is over: the run asked for move 4"):
        brain(ctx.add(Message(ASSISTANT, "", "x", "b", "{}"), Message(TOOL, "2", "b")), {})
    with pytest.raises(TypeError, match="scripted takes Actions"):
        scripted("look_up_order")
