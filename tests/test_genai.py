"""genai: a run's words as the gen AI conventions write them, secrets hidden and long texts cut."""

from microagent.genai import answer, arguments, as_json, message, said
from microagent.message import ASSISTANT, TOOL, USER, Message


def test_each_kind_of_secret_is_hidden_and_the_words_around_it_stay():
    # a bearer token, keys known by their prefix, and values named like a secret
    assert said("Authorization: Bearer abc.def-123 for ann", 99) == "Authorization: Bearer [hidden] for ann"
    assert said("keys sk-live-123456 ghp_0123456789abcdef0123 AKIA0123456789ABCDEF", 99) == \
        "keys [hidden] [hidden] [hidden]"
    assert said("password=hunter2, token: t0k3n; id=A1", 99) == "password=[hidden], token: [hidden]; id=A1"


def test_a_long_text_is_cut_at_the_cap_saying_how_much_was_left_out_and_a_short_one_is_whole():
    assert said("x" * 12, 10) == "xxxxxxxxxx… [2 more characters left out]"
    assert said("x" * 10, 10) == "x" * 10


def test_a_tools_arguments_hide_a_value_under_a_secrets_name_whatever_the_value():
    assert arguments({"customer": "ann", "api_key": "plain", "Cookie": 7}) == \
        '{"customer": "ann", "api_key": "[hidden]", "Cookie": "[hidden]"}'


def test_each_kind_of_note_is_a_message_of_parts():
    decision = Message(ASSISTANT, "look it up", "agent", "look_up", '{"id": "A1", "token": "t"}')
    assert message(Message(USER, "hi"), 99) == {"role": "user", "parts": [{"type": "text", "content": "hi"}]}
    assert message(decision, 99, "tool_call") == {"role": "assistant", "finish_reason": "tool_call", "parts": [
        {"type": "text", "content": "look it up"},
        {"type": "tool_call", "name": "look_up", "arguments": '{"id": "A1", "token": "[hidden]"}'}]}
    assert message(Message(TOOL, "found", "look_up"), 3) == {"role": "tool", "parts": [
        {"type": "tool_call_response", "response": "fou… [2 more characters left out]"}]}
    assert as_json([answer("½ done")]) == \
        '[{"role": "assistant", "parts": [{"type": "text", "content": "½ done"}], "finish_reason": "stop"}]'
