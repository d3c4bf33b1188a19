"""Action: a move, frozen."""

import dataclasses

import pytest

from microagent.policy import Action

def test_an_action_keeps_its_arguments_as_json_text_so_it_stays_frozen():
    action = Action("refund", {"order_id": "A1", "amount": 79}, "it qualifies")
    assert action.args == '{"order_id": "A1", "amount": 79}'
    assert action == Action("refund", '{"order_id": "A1", "amount": 79}', "it qualifies")
    assert hash(action) == hash(Action("refund", {"order_id": "A1", "amount": 79}, "it qualifies"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        action.tool = "other"
    assert Action("refund", "{broken").args == "{broken"  # kept raw: the loop reports it


def test_an_action_with_no_tool_is_a_brain_saying_it_has_no_move():
    assert Action(None, reasoning="cut off").tool is None


@pytest.mark.parametrize("make, says", [
    (lambda: Action(5, {}), "an Action's tool is a string"),
    (lambda: Action("t", {}, None), "an Action's tool is a string"),
    (lambda: Action("t", {"when": object()}), "not JSON serializable"),
])
def test_a_malformed_action_is_refused_when_it_is_made(make, says):
    with pytest.raises(TypeError, match=says):
        make()
