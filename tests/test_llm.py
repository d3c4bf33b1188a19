"""The book's LLM brain (microagent.llm, with its plain `post`) against a stand-in model server on 127.0.0.1.

The hardened transport has its own tests (transport/test_transport.py); the wire format too (test_chat.py).
"""

import functools
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

import microagent.llm
from microagent.agent import CANCELLED, DONE, Agent
from microagent.chat import to_action
from microagent.context import Context
from microagent.demo import QUESTION, check_policy, look_up_order, support_agent
from microagent.llm import LLMError, chat_policy, post
from microagent.message import ASSISTANT, TOOL, USER, Message
from microagent.policy import Action
from microagent.saving import from_json, to_json
from microagent.script import actions, replay
from microagent.tool import final_answer
from microagent.trace import story
from microagent.transport import hardened
from microagent.transport.stand_in import chunks, drip, error, moved, raw, reply, stream_of

from conftest import KEY, add, yes  # the brain's one tool, its approver and a key, shared with test_llm/test_transport

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "llm_agent.py"


def ask(policy, tools=(final_answer,)) -> Action:
    """One move of a brain, by hand, on a notebook that holds only a question."""
    return policy(Context((Message(USER, "hi"),)), {t.name: t for t in tools})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def office_replies(final_as_words: bool) -> list[dict]:
    """The stand-in model makes the very moves the rule-based support_policy makes."""
    answer = "Good news, A1234 qualifies. I refunded $79 to your card, here in 3 to 5 days."
    last = reply(answer) if final_as_words else reply(
        "all set, time to reply to the customer", calls=[("final_answer", json.dumps({"answer": answer}))])
    return [reply("let me pull up the order first", calls=[("look_up_order", '{"order_id": "A1234"}')]),
            reply("now check if it qualifies", calls=[("check_policy", '{"order_id": "A1234"}')]),
            reply("it qualifies, and a refund needs a human to sign off",
                  calls=[("issue_refund", '{"order_id": "A1234", "amount": 79}')]),
            last]


# --- the idea in a dozen lines, and the brain that grows it ----------------------------------------

def test_the_dozen_line_brain_in_the_docstring_runs_and_writes_what_chat_policy_writes(stand_in):
    block = microagent.llm.__doc__.split("reply as the next Action:\n\n")[1].split("\n\n`chat_policy")[0]
    code = "\n".join(line.removeprefix("    ") for line in block.splitlines())
    server = stand_in(*office_replies(final_as_words=True), *office_replies(final_as_words=True))
    names = {"json": json, "urllib": __import__("urllib.request"), "LOCAL": server.url,
             "to_request": microagent.chat.to_request, "to_action": to_action}
    exec(compile(code, "microagent/llm.py", "exec"), names)
    by_tiny = support_agent(policy=names["tiny_brain"], approver=yes).run(QUESTION)
    by_chat_policy = support_agent(policy=chat_policy("llama3.1", server.url, stream=False), approver=yes).run(QUESTION)
    assert by_tiny == by_chat_policy and by_tiny.last().content.startswith("Good news, A1234 qualifies.")
    assert server.requests[:4] == server.requests[4:]  # and it sent the very same requests


@pytest.mark.parametrize("stream", [True, False])
def test_the_refund_office_runs_unchanged_with_an_llm_brain(stand_in, stream):
    by_rules = support_agent(approver=yes).run(QUESTION)
    server = stand_in(*office_replies(final_as_words=False))
    agent = support_agent(policy=chat_policy("stand-in", server.url, stream=stream), approver=yes)
    assert agent.tools["look_up_order"] is look_up_order and agent.tools["check_policy"] is check_policy
    assert agent.run(QUESTION) == by_rules  # the same notebook, note for note
    # the model saw each coworker's result; final_answer was shown to it too? no: words are the answer
    assert server.requests[3]["messages"][-1] == {
        "role": "tool", "tool_call_id": "call_3", "content": "approved by a human, $79 refunded to the original card"}
    assert [s["function"]["name"] for s in server.requests[0]["tools"]] == ["look_up_order", "check_policy",
                                                                            "issue_refund"]


def test_a_model_that_answers_in_words_ends_the_run_through_the_same_final_answer(stand_in):
    by_rules = support_agent(approver=yes).run(QUESTION)
    server = stand_in(*office_replies(final_as_words=True))
    by_model = support_agent(policy=chat_policy("stand-in", server.url), approver=yes).run(QUESTION)
    assert by_model.messages[:-2] == by_rules.messages[:-2]
    assert by_model.last() == by_rules.last()  # the same answer, through the same final_answer tool
    assert by_model[-2] == Message(ASSISTANT, "", "support", "final_answer", json.dumps(
        {"answer": by_rules.last().content}))  # the call it stands for, with nothing made up as its reasoning


def test_a_recorded_live_run_is_a_saved_notebook_that_replays_offline(stand_in):
    server = stand_in(*office_replies(final_as_words=True))
    live = support_agent(policy=chat_policy("stand-in", server.url), approver=yes).run(QUESTION)
    text = to_json(live)  # the recording: no second file format for decisions
    server.close()  # offline from here on
    assert support_agent(policy=replay(from_json(text)), approver=yes).run(QUESTION) == live


@pytest.mark.parametrize("stream", [True, False])
def test_a_system_prompt_goes_first_and_nothing_else_is_added(stand_in, stream):
    server = stand_in(reply("It is 5."))
    Agent(chat_policy("tiny", server.url, stream=stream, system="You add."), [add, final_answer]).run("2 + 3?")
    sent = server.requests[0]
    assert sent["messages"] == [{"role": "system", "content": "You add."}, {"role": "user", "content": "2 + 3?"}]
    assert set(sent) == ({"model", "tools", "messages", "stream", "stream_options"} if stream
                         else {"model", "tools", "messages"})
    assert server.headers[0]["Content-Type"] == "application/json" and "Authorization" not in server.headers[0]


# --- one move a reply ----------------------------------------------------------------------------

def test_a_reply_with_two_calls_is_one_move_and_the_model_is_asked_again(stand_in):
    server = stand_in(reply(calls=[("add", '{"a": 1, "b": 1}'), ("add", '{"a": 2, "b": 2}')]),
                      reply(calls=[("add", '{"a": 2, "b": 2}')]), reply("2 and 4"))
    ctx = Agent(chat_policy("tiny", server.url), [add, final_answer]).run("1 + 1 and 2 + 2?")
    # user, assistant, tool (the first call only), assistant, tool (asked again), assistant, tool
    assert [(m.kind, m.tool or m.name, m.content) for m in ctx][1:5] == [
        ("decision", "add", ""), ("result", "add", "2"), ("decision", "add", ""), ("result", "add", "4")]
    assert ctx[1].args == '{"a": 1, "b": 1}' and len(server.requests) == 3
    # what the model was shown: its first call and the result, and nothing of the call that was dropped
    assert [m.get("tool_calls", [{}])[0].get("id") for m in server.requests[1]["messages"]] == [None, "call_1", None]


@pytest.mark.parametrize("stream", [True, False])
def test_a_run_paused_between_the_calls_of_one_reply_ends_as_the_run_that_never_stopped(stand_in, stream):
    # the defect: the second call of a reply lived only in memory, so a run saved after the first was
    # resumed without it, and ended differently. Now a reply is one move, so the notebook is the whole state
    script = [reply(calls=[("add", '{"a": 1, "b": 1}'), ("add", '{"a": 2, "b": 2}')]),
              reply(calls=[("add", '{"a": 2, "b": 2}')]), reply("2 and 4")]
    straight_server, paused_server = stand_in(*script), stand_in(*script)
    straight = Agent(chat_policy("tiny", straight_server.url, stream=stream), [add, final_answer]).run("1+1, 2+2?")
    first = next(Agent(chat_policy("tiny", paused_server.url, stream=stream), [add, final_answer]).steps("1+1, 2+2?"))
    saved = to_json(first.context)  # another process, later: a fresh agent, a fresh brain
    resumed = Agent(chat_policy("tiny", paused_server.url, stream=stream), [add, final_answer]).run(from_json(saved))
    assert resumed == straight
    assert paused_server.requests == straight_server.requests  # the model was asked the very same things


# --- the model's mistakes come back to it as notes -------------------------------------------------

def test_the_models_mistakes_come_back_to_it_as_notes_and_it_gets_to_fix_them(stand_in):
    server = stand_in(reply(calls=[("add", '{"a": 2, "b": ')]),   # broken JSON
                      reply(calls=[("subtract", '{"a": 2}')]),     # no such tool
                      reply(calls=[("add", '{"a": 2, "b": "3"}')]),  # does not fit the schema
                      reply(calls=[("add", '{"a": 2, "b": 3}')]), reply("5"))
    ctx = Agent(chat_policy("tiny", server.url), [add, final_answer]).run("2 + 3?")
    errors = [m.content for m in ctx if m.error]
    assert errors[0].startswith("error: bad arguments for add: the text is not valid JSON")
    assert errors[1] == "error: there is no tool named 'subtract'; the tools are: add, final_answer"
    assert errors[2] == "error: bad arguments for add: b must be integer, not str '3'"
    assert ctx.last().content == "5"
    # the model read each error as the result of its own call, with the call as it sent it
    assert server.requests[1]["messages"][1:] == [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": '}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": errors[0]}]


@pytest.mark.parametrize("stream", [True, False])
def test_an_empty_reply_is_a_no_move_note_and_the_model_is_told_so(stand_in, stream):
    server = stand_in(reply(""), reply("It is 5."))
    ctx = Agent(chat_policy("tiny", server.url, stream=stream), [add, final_answer]).run("2 + 3?")
    # user, no_move (what was wrong, in words), assistant, tool
    assert ctx[1] == Message(ASSISTANT, "your reply was empty: call one of the tools, or answer in words",
                             "agent", error=True)
    assert ctx[1].kind == "no_move" and ctx.last() == Message(TOOL, "It is 5.", "final_answer")
    assert "made no move: your reply was empty" in story(ctx)  # never "there is no tool named ''"
    assert server.requests[1]["messages"][1:] == [
        {"role": "user", "content": "error: your reply was empty: call one of the tools, or answer in words"}]


@pytest.mark.parametrize("stream", [True, False])
def test_a_tool_name_that_is_not_text_is_a_no_move_the_model_reads(stand_in, stream):
    server = stand_in(reply(calls=[(7, '{"a": 1, "b": 1}')]), reply("gave up"))
    ctx = Agent(chat_policy("tiny", server.url, stream=stream), [add, final_answer]).run("1 + 1?")
    assert (ctx[1].kind, ctx[1].content) == ("no_move", "your tool call named no tool: call one of add, "
                                                        "final_answer by its name")
    assert ctx.last().content == "gave up"


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_cut_off_by_the_token_limit_is_a_no_move_not_an_answer(stand_in, stream):
    server = stand_in(reply("The refund policy says that", finish="length", usage=(20, 8)), reply("Yes."))
    ctx = Agent(chat_policy("tiny", server.url, stream=stream, max_tokens=8), [add, final_answer]).run("refund?")
    said = ("your reply was cut off at 8 tokens, before it was whole (it began: The refund policy says that...): "
            "write a shorter one")
    assert (ctx[1].kind, ctx[1].content) == ("no_move", said) and ctx.last() == Message(TOOL, "Yes.", "final_answer")
    assert server.requests[1]["messages"][1:] == [{"role": "user", "content": "error: " + said}]
    assert server.requests[0]["max_tokens"] == 8


@pytest.mark.parametrize("stream", [True, False])
def test_a_tool_call_cut_off_by_the_token_limit_is_a_no_move_too(stand_in, stream):
    server = stand_in(reply(calls=[("add", '{"a": 2, "b"')], finish="length", usage=(20, 8)), reply("5"))
    ctx = Agent(chat_policy("tiny", server.url, stream=stream), [add, final_answer]).run("2 + 3?")
    assert ctx[1].content == "your reply was cut off at 8 tokens, before it was whole: write a shorter one"
    assert ctx[1].kind == "no_move" and ctx.last().content == "5"


def test_an_agent_with_no_answer_tool_hears_that_words_end_nothing(stand_in):
    server = stand_in(reply("It is 2."), reply(calls=[("add", '{"a": 1, "b": 1}')]))
    ctx = Agent(chat_policy("tiny", server.url), [add], max_steps=2).run("1 + 1?")
    assert ctx[1].content == "you answered in words (It is 2.), but no tool here takes an answer: call one of add"
    assert [m.kind for m in ctx] == ["question", "no_move", "decision", "result", "remark"]


@pytest.mark.parametrize("stream", [True, False])
def test_without_native_tools_the_model_moves_by_one_json_object_a_turn(stand_in, stream):
    server = stand_in(reply('Sure!\n```json\n{"tool": "add", "args": {"a": 2, "b": 3}, "reasoning": "sum it"}\n```'),
                      reply('{"tool": "add", "args": {"a": 1,}}'),  # unreadable: a no move
                      reply("It is 5."))  # words: the answer
    ctx = Agent(chat_policy("tiny", server.url, stream=stream, native=False), [add, final_answer]).run("2 + 3?")
    assert actions(ctx) == [Action("add", {"a": 2, "b": 3}, "sum it"), Action(None, reasoning=(
        'your reply held no JSON object with a tool (it began: {"tool": "add", "args": {"a": 1,}}): reply with one '
        'JSON object: {"tool": ..., "args": {...}, "reasoning": ...}')), Action("final_answer", {"answer": "It is 5."})]
    assert "tools" not in server.requests[0]
    assert server.requests[2]["messages"][2:] == [
        {"role": "assistant", "content": '{"tool":"add","args":{"a":2,"b":3},"reasoning":"sum it"}'},
        {"role": "user", "content": "add returned: 5"}, {"role": "user", "content": "error: " + ctx[3].content}]


# --- streaming: the words as they come ------------------------------------------------------------

SCRIPTS = {
    "words": [reply("Good news: it is 5, my friend.")],
    "one call, words around it": [reply("Let me add.", calls=[("add", '{"a": 2, "b": 3}')]), reply("5")],
    "two calls": [reply(calls=[("add", '{"a": 10, "b": 20}'), ("add", '{"a": 1, "b": 2}')]), reply("30, 3")],
    "unicode split": [reply("Voilà: ½ of 10 is 5 ✓")],
    "broken arguments": [reply(calls=[("add", '{"a": 2,, "b": 3}')]), reply("gave up")],
    "llama.cpp's verbose deltas": [reply("Let me add.", calls=[("add", '{"a": 2, "b": 3}')], verbose=True),
                                   reply("5", verbose=True)],
}


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_streamed_reply_gives_exactly_the_notebook_and_the_words_a_whole_one_gives(stand_in, name):
    whole, streamed = stand_in(*SCRIPTS[name]), stand_in(*SCRIPTS[name])
    slow_words, fast_words = [], []
    slow = Agent(chat_policy("tiny", whole.url, stream=False, on_text=slow_words.append), [add, final_answer]).run("go")
    fast = Agent(chat_policy("tiny", streamed.url, on_text=fast_words.append), [add, final_answer]).run("go")
    assert fast == slow
    assert "".join(fast_words) == "".join(slow_words)  # the same words, in more pieces
    assert len(fast_words) > len(slow_words) == len(whole.requests)  # a whole reply: one piece each
    assert streamed.requests[0]["stream"] is True and streamed.requests[0]["stream_options"] == {"include_usage": True}


def test_on_text_hears_each_piece_as_it_comes_and_an_empty_one_for_a_chunk_without_words(stand_in):
    server = stand_in(reply("Good news: it is 5."))
    pieces = []
    Agent(chat_policy("tiny", server.url, on_text=pieces.append), [final_answer]).run("2 + 3?")
    # the first chunk says only who speaks; the last two, why it stopped and the tokens
    assert pieces == ["", "Goo", "d n", "ews", ": i", "t i", "s 5", ".", "", ""]


def test_streamed_tool_call_arguments_are_put_back_together_from_fragments(stand_in):
    fragments = [c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                 for c in chunks(reply(calls=[("add", '{"a": 12, "b": 30}')])["message"], None)
                 if "tool_calls" in c["choices"][0]["delta"]]
    assert fragments == ["", '{"a', '": ', "12,", ' "b', '": ', "30}"]  # split mid-token
    server = stand_in(reply(calls=[("add", '{"a": 12, "b": 30}')]), reply("42"))
    ctx = Agent(chat_policy("tiny", server.url), [add, final_answer]).run("12 + 30?")
    assert ctx[1].args == '{"a": 12, "b": 30}' and ctx[2].content == "42"


def test_streamed_calls_without_an_index_stay_apart_and_the_first_is_the_move(stand_in):
    one, two = ({"id": f"c{n}", "type": "function", "function": {"name": "add", "arguments": f'{{"a": {n}, "b": {n}}}'}}
                for n in (1, 2))
    server = stand_in(stream_of({"tool_calls": [one]}, {"tool_calls": [two]}),  # a new id: a new call
                      stream_of({"tool_calls": [two, one]}),  # two in one delta: their places tell them apart
                      reply("done"))
    ctx = Agent(chat_policy("tiny", server.url), [add, final_answer]).run("1 + 1 and 2 + 2?")
    assert [m.args for m in ctx if m.kind == "decision"][:2] == ['{"a": 1, "b": 1}', '{"a": 2, "b": 2}']


@pytest.mark.parametrize("stream", [True, False])
def test_arguments_sent_as_an_object_and_words_as_parts_read_the_same_streamed_or_whole(stand_in, stream):
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1, "b": 1}}}
    parts = [{"type": "text", "text": "It is "}, {"type": "image_url", "image_url": {"url": "x"}},
             {"type": "text", "text": "2."}]
    server = stand_in(*([stream_of({"tool_calls": [{"index": 0, **call}]}),
                         stream_of({"content": parts[:2]}, {"content": parts[2:]})] if stream else
                        [raw(json.dumps({"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]})),
                         reply(parts)]))
    ctx = Agent(chat_policy("tiny", server.url, stream=stream), [add, final_answer]).run("1 + 1?")
    assert ctx[1].args == '{"a": 1, "b": 1}'  # JSON text, as Action writes it
    assert ctx.last() == Message(TOOL, "It is 2.", "final_answer")  # the text parts only, in order


def chunked_replies(message: dict) -> st.SearchStrategy:
    """The chunks of a stream of `message`, cut into pieces of any size."""
    return st.integers(1, 9).flatmap(lambda piece: st.just(chunks(message, None, piece)))


@settings(max_examples=60)
@given(data=st.data(), text=st.text(max_size=40), calls=st.lists(st.tuples(
    st.sampled_from(["add", "nope", ""]), st.text(max_size=30)), max_size=3), verbose=st.booleans())
def test_any_reply_cut_anywhere_gives_the_action_and_the_words_the_whole_reply_gives(data, text, calls, verbose):
    message = reply(text, calls=calls)["message"]
    pieces = chunks(message, None, data.draw(st.integers(1, 9)), verbose=verbose)
    tools = {"add": add, "final_answer": final_answer}
    words = {"whole": [], "streamed": []}

    def sends(objects):  # a send that hands over these objects: the brain's one seam, with no HTTP
        return lambda url, body, headers: iter(objects)
    whole = chat_policy("m", "http://127.0.0.1:1/v1", on_text=words["whole"].append, stream=False,
                        send=sends([{"choices": [{"message": message, "finish_reason": "stop"}]}]))
    streamed = chat_policy("m", "http://127.0.0.1:1/v1", on_text=words["streamed"].append, send=sends(pieces))
    ctx = Context((Message(USER, "go"),))
    assert streamed(ctx, tools) == whole(ctx, tools) == to_action(message, tools)
    assert "".join(words["streamed"]) == "".join(words["whole"]) == text


# --- stopping mid-reply -----------------------------------------------------------------------------

class Enough(Exception):
    """What a caller raises in on_text to stop the brain."""


@pytest.mark.parametrize("send", ["post", "hardened"])
def test_raising_in_on_text_stops_the_brain_mid_reply_closes_the_response_and_writes_nothing(stand_in, send):
    server = stand_in(reply("A long answer that takes a while to write, piece by piece. " * 4, pause=0.05),
                      reply("Short."))
    heard = []

    def on_text(piece):
        heard.append(piece)
        if piece:  # the caller has seen enough after the first words
            raise Enough
    transport = {"post": post, "hardened": hardened(timeout=5, deadline=30)}[send]
    agent = Agent(chat_policy("tiny", server.url, on_text=on_text, send=transport), [final_answer])
    start, steps = time.monotonic(), agent.steps("tell me")
    with pytest.raises(Enough):
        next(steps)
    assert heard[-1] == "A l" and time.monotonic() - start < 5  # long before the reply would have ended
    assert server.hung_up.wait(10)  # the HTTP response was closed: the server saw us go
    # nothing was written: the notebook is the question, and it goes on later with a fresh request
    again = Agent(chat_policy("tiny", server.url), [final_answer]).run("tell me")
    assert again.last().content == "Short." and len(again) == 3 and len(server.requests) == 2


def test_a_cancel_between_steps_starts_no_further_model_call(stand_in):
    server = stand_in(reply(calls=[("add", '{"a": 1, "b": 1}')]), reply("2"))
    cancel, steps = threading.Event(), []
    for step in Agent(chat_policy("tiny", server.url), [add, final_answer]).steps("1 + 1?", cancel=cancel):
        steps.append(step)
        cancel.set()
    assert steps[-1].stop == CANCELLED and len(server.requests) == 1
    assert [m.kind for m in steps[-1].context] == ["question", "decision", "result"]


# --- settings that can't work are refused when the brain is made --------------------------------------

@pytest.mark.parametrize("setting, problem", [
    ({"model": ""}, "model is the model's name on the server, not ''"),
    ({"base_url": "http://[::1/v1"}, "base_url is the server's address, http:// or https://, like "
                                     "'http://localhost:11434/v1', not 'http://[::1/v1'"),
    ({"base_url": "localhost:11434/v1"}, "base_url is the server's address, http:// or https://"),
    ({"base_url": "http://localhost:99999/v1"}, "base_url is the server's address"),
    ({"base_url": "http:///v1"}, "base_url is the server's address"),
    ({"base_url": None}, "base_url is the server's address"),
    ({"messages": []}, "the brain writes messages itself: leave them out"),
    ({"stream_options": {}}, "the brain writes stream_options itself"),
    ({"cache_prompt": object}, "request fields must be plain JSON values"),
    ({"temperature": float("nan")}, "request fields must be plain JSON values"),
    ({"native": False, "response_format": "json"}, "response_format is json_schema, json_object or None"),
    ({"response_format": "json_schema"}, "response_format describes a move as JSON text: it goes with native=False"),
])
def test_settings_that_cannot_work_are_refused_when_the_brain_is_made(setting, problem):
    with pytest.raises(ValueError) as e:
        chat_policy(**{"model": "tiny", "base_url": "http://127.0.0.1:1/v1", **setting})
    assert str(e.value).startswith(problem)


def test_a_base_url_that_once_failed_only_at_the_first_request_is_refused_up_front(stand_in):
    # the defect: "http://[::1/v1" passed the check, and the first request died with a bare ValueError
    with pytest.raises(ValueError, match="base_url is the server's address"):
        chat_policy("tiny", "http://[::1/v1")
    assert chat_policy("tiny", "http://[::1]:8080/v1")  # a well-formed IPv6 address is fine


@pytest.mark.parametrize("base_url", ["htp://bob:hunter2@x/v1", "http://bob:hunter2@127.0.0.1:9/v1",
                                      "https://bob:hunter2@[::1]:8/v1?x=1"])
def test_a_password_in_the_base_url_is_refused_up_front_and_never_echoed(base_url):
    # the defect: the first was quoted whole in the ValueError, and the second was taken,
    # then every request failed with "could not reach http://bob:hunter2@..."
    with pytest.raises(ValueError, match="base_url is the server's address; send credentials") as e:
        chat_policy("tiny", base_url)
    assert "hunter2" not in str(e.value) and "bob" not in str(e.value)


def test_a_query_in_the_base_url_stays_at_the_end_of_the_address_it_posts_to(stand_in):
    # the defect: ".../v1?api-version=2024-10-21" posted to "/v1?api-version=.../chat/completions"
    server = stand_in(reply(calls=[("final_answer", '{"answer": "hi"}')]))
    brain = chat_policy("tiny", server.url + "?api-version=2024-10-21", stream=False)
    assert Agent(brain, [final_answer]).run("hello").last().content == "hi"
    assert server.paths == ["/v1/chat/completions?api-version=2024-10-21"]
    with pytest.raises(ValueError, match="base_url is the server's address"):
        chat_policy("tiny", server.url + "#part")  # a fragment is never sent: refused


@pytest.mark.parametrize("key", [KEY + "\n", KEY + " ", "sk-ключ-1234", 12345])
def test_a_malformed_key_is_refused_up_front_without_showing_it(key):
    with pytest.raises(ValueError) as e:
        chat_policy("tiny", "http://127.0.0.1:1/v1", api_key=key)
    assert "no space, line break or character outside plain ASCII" in str(e.value)
    assert str(key).strip() not in str(e.value) and "1234" not in str(e.value)


def test_a_system_prompt_that_is_not_text_is_refused_up_front():
    with pytest.raises(TypeError, match="system is a prompt, a string, not 5"):
        chat_policy("tiny", "http://127.0.0.1:1/v1", system=5)


# --- failures through post: each says what to do, and never shows the key ----------------------------

def test_nobody_listening_asks_whether_the_server_is_running():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(LLMError) as e:
        ask(chat_policy("tiny", url))
    assert str(e.value) == (f"could not connect to {url}/chat/completions: connection refused. Is the model "
                            "server running, at that address?")


@pytest.mark.parametrize("status, said, problem", [
    (400, "tool_choice is not supported", "answered HTTP 400 (the server said: tool_choice is not supported): the "
                                          "server refused the request as it is: a setting may not suit it"),
    (404, "model 'lama3' not found", "answered HTTP 404 (the server said: model 'lama3' not found): check the "
                                     "model's name (is it served there?) and the base URL (it usually ends in /v1)"),
    (422, "bad field", "answered HTTP 422 (the server said: bad field): the server refused the request as it is: "
                       "a setting may not suit it"),
    (429, "slow down", "answered HTTP 429 (the server said: slow down): the server is rate limiting: wait, then "
                       "try again"),
    (503, "overloaded", "answered HTTP 503 (the server said: overloaded): the server failed: try again later"),
])
def test_an_error_status_says_what_it_means_and_what_to_do_quoting_the_server(stand_in, status, said, problem):
    server = stand_in(error(status, said), reply("never asked"))
    with pytest.raises(LLMError) as e:
        ask(chat_policy("tiny", server.url))
    assert str(e.value) == f"{server.url}/chat/completions {problem}"
    assert len(server.requests) == 1  # the book's post tries once: retries are the workshop's


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_says_check_the_key_and_quotes_nothing_of_what_the_server_said(stand_in, status):
    server = stand_in(error(status, f"Incorrect API key provided: {KEY[:3]}...{KEY[-4:]}"))
    with pytest.raises(LLMError) as e:
        ask(chat_policy("tiny", server.url, api_key=KEY))
    assert str(e.value) == f"{server.url}/chat/completions answered HTTP {status}: check the API key"
    assert server.headers[0]["Authorization"] == f"Bearer {KEY}"  # it was sent, and is never shown


ODD_KEY = 'sk-ab/cd"ef\\gh'  # a key with the characters JSON escapes: / " and \\


@pytest.mark.parametrize("spelled", [ODD_KEY, json.dumps(ODD_KEY)[1:-1], json.dumps(ODD_KEY)[1:-1].replace("/", "\\/")])
def test_a_key_the_server_repeats_in_an_error_is_blanked_as_sent_and_as_json_escapes_it(stand_in, spelled):
    # a server that quotes a JSON text in its error words, the key in it escaped: sk-ab\/cd\"ef\\gh
    server = stand_in(error(400, f"bad request from key {spelled}, see the docs"))
    with pytest.raises(LLMError) as e:
        ask(chat_policy("tiny", server.url, api_key=ODD_KEY))
    assert "(the server said: bad request from key [the key], see the docs)" in str(e.value)


def test_an_error_text_is_cut_short_only_after_the_key_is_blanked(stand_in):
    cut_through_the_key = "x" * 280 + KEY + " more words"  # the key straddles character 300, where quotes end
    server = stand_in(error(400, cut_through_the_key), raw(json.dumps({"error": {"message": cut_through_the_key}})))
    for _ in range(2):  # an error status; an error in a 200 answer
        with pytest.raises(LLMError) as e:
            ask(chat_policy("tiny", server.url, api_key=KEY, stream=False))
        assert "[the key]" in str(e.value)
        assert not any(KEY[i:i + 8] in str(e.value) for i in range(len(KEY) - 8))  # no piece of it either


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_and_the_key_never_reaches_the_other_host(stand_in, status):
    elsewhere = stand_in(reply("I got your key"))
    server = stand_in(moved(status, elsewhere.url + "/chat/completions"))
    with pytest.raises(LLMError) as e:
        ask(chat_policy("tiny", server.url, api_key=KEY))
    assert str(e.value) == (f"{server.url}/chat/completions answered HTTP {status} (the server said: "
                            f"go to {elsewhere.url}/chat/completions): it was not followed, since the key and the "
                            "notebook go only to base_url: if the new address is right, make it the base_url")
    assert elsewhere.requests == []  # nothing went there: no key, no notebook


NO_PROXY_BRAIN = """
import sys
from microagent.context import Context
from microagent.llm import chat_policy
from microagent.message import Message
from microagent.tool import final_answer
brain = chat_policy("tiny", sys.argv[1], api_key=sys.argv[2])
print(brain(Context((Message("user", "hi"),)), {"final_answer": final_answer}).args)
"""


@pytest.mark.parametrize("variable", ["http_proxy", "HTTP_PROXY"])
def test_a_proxy_in_the_environment_never_sees_the_key_or_the_notebook(stand_in, variable):
    proxy, server = stand_in(reply("I am the proxy, and I read your key")), stand_in(reply("It is 5."))
    env = {name: value for name, value in os.environ.items() if name.lower() not in ("no_proxy", "http_proxy")}
    env[variable] = proxy.url.removesuffix("/v1")  # set before the brain's process starts, as a user's would be
    done = subprocess.run([sys.executable, "-c", NO_PROXY_BRAIN, server.url, KEY], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout == '{"answer": "It is 5."}\n', done.stderr
    assert proxy.requests == [] and server.headers[0]["Authorization"] == f"Bearer {KEY}"


def test_a_slow_server_is_cut_off_by_the_timeout_which_is_named(stand_in):
    server = stand_in(reply("late", delay=5))
    start = time.monotonic()
    with pytest.raises(LLMError, match=r"sent nothing for timeout=0.2s: is the model still loading\? raise the"):
        ask(chat_policy("tiny", server.url, stream=False, send=functools.partial(post, timeout=0.2)))
    assert time.monotonic() - start < 4


@pytest.mark.parametrize("stream", [True, False])
def test_a_server_that_does_not_speak_chat_completions_is_told_apart(stand_in, stream):
    server = stand_in(raw("<html>a web page, not a model</html>"), raw('{"models": ["a", "b"]}', "application/json"))
    for _ in range(2):
        with pytest.raises(LLMError, match="did not answer like a chat completions API: check the base URL"):
            ask(chat_policy("tiny", server.url, stream=stream))


MALFORMED = [
    raw('{"choices": [{"message": null}]}', "application/json"),
    raw('{"choices": [{"message": {"content": 7}}]}', "application/json"),
    raw('{"choices": [{"message": {"tool_calls": {"id": "c1"}}}]}', "application/json"),
    raw('{"choices": [{"message": {"tool_calls": ["add"]}}]}', "application/json"),
    raw('{"choices": {"message": {}}}', "application/json"),
    raw("[1, 2]", "application/json"),
    stream_of({"tool_calls": {"index": 0}}),
    stream_of({"content": {"text": "hi"}}),
    stream_of({"tool_calls": [{"index": [0], "function": {"name": "add"}}]}),
]


@pytest.mark.parametrize("entry", MALFORMED)
def test_a_malformed_reply_is_an_llm_error_that_says_so(stand_in, entry):
    server = stand_in(entry)
    with pytest.raises(LLMError, match=rf"^{re.escape(server.url)}/chat/completions sent a reply that is not well "
                                       r"formed \("):
        ask(chat_policy("tiny", server.url, stream="event-stream" in entry["content_type"]), (add, final_answer))


def test_an_error_in_a_successful_answer_or_mid_stream_is_an_error(stand_in):
    server = stand_in(raw('{"error": {"message": "the model crashed"}}', "application/json"),
                      raw('data: {"error": {"message": "out of memory"}}\n\n', "text/event-stream"))
    for said in ("the model crashed", "out of memory"):
        with pytest.raises(LLMError, match=f"answered with an error: {said}$"):
            ask(chat_policy("tiny", server.url))


def test_a_stream_cut_before_done_is_an_error_and_never_an_answer(stand_in):
    server = stand_in(reply("Good news: your refund is on its way", cut_after=4),
                      reply(calls=[("add", '{"a": 1, "b": 1}')], cut_after=5))
    for _ in range(2):  # cut mid-words, and mid-call
        with pytest.raises(LLMError, match=r"stopped mid-reply, before data: \[DONE\]: try again, or try stream=False"):
            ask(chat_policy("tiny", server.url), (add, final_answer))


def test_a_send_of_your_own_plugs_into_the_one_seam():
    said, closed = [], []

    def send(url, body, headers):  # a recorded reply, played back: no HTTP at all
        said.append((url, json.loads(body), headers))
        try:
            yield {}  # a wait: on_text hears "", a chance to stop
            yield {"choices": [{"delta": {"content": "It is "}}]}
            yield {"choices": [{"delta": {"content": "5."}, "finish_reason": "stop"}]}
        finally:
            closed.append(True)
    heard = []
    brain = chat_policy("m", "http://127.0.0.1:1/v1/", api_key="sk-1", on_text=heard.append, send=send)
    assert ask(brain) == Action("final_answer", {"answer": "It is 5."})
    assert heard == ["", "It is ", "5."] and closed == [True]
    url, body, headers = said[0]
    assert url == "http://127.0.0.1:1/v1/chat/completions"  # one slash
    assert headers == {"Content-Type": "application/json", "Authorization": "Bearer sk-1"}
    assert body["messages"] == [{"role": "user", "content": "hi"}] and body["stream"] is True


# --- the example script ---------------------------------------------------------------------------------

def run_example(*args, env=None):
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize("flags", [[], ["--no-stream"]])
def test_the_example_prints_the_words_as_they_stream_then_the_story(stand_in, flags):
    server = stand_in(*office_replies(final_as_words=True))
    done = run_example("--base-url", server.url, "--model", "stand-in", "--system", "You refund.", *flags)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[:5] == [
        f'you asked: "{QUESTION}"',
        "  ... let me pull up the order first",  # the model's words, as they came
        "      (tokens: 20 in, 5 out)",
        "  support thought: let me pull up the order first",
        "    -> look_up_order returned: A1234, Wireless Headphones, $79, delivered, reported defective"]
    assert done.stdout.splitlines()[-1] == ("    -> final_answer returned: Good news, A1234 qualifies. I refunded $79 "
                                            "to your card, here in 3 to 5 days.")
    assert server.requests[0]["messages"][0] == {"role": "system", "content": "You refund."}
    assert server.requests[0].get("stream", False) is (flags == [])


def test_the_example_sends_the_key_from_the_named_variable(stand_in):
    server = stand_in(*office_replies(final_as_words=True))
    env = {**os.environ, "EXAMPLE_KEY": "sk-example"}
    done = run_example("--base-url", server.url, "--model", "m", "--api-key-env", "EXAMPLE_KEY", env=env)
    assert done.returncode == 0, done.stderr
    assert server.headers[0]["Authorization"] == "Bearer sk-example"


def test_the_example_passes_the_settings_a_server_needs(stand_in):
    server = stand_in(*office_replies(final_as_words=True))
    done = run_example("--base-url", server.url, "--model", "m", "--tool-choice", "required", "--max-tokens", "64",
                       "--extra", '{"cache_prompt": true}')
    assert done.returncode == 0, done.stderr
    sent = server.requests[0]
    assert (sent["tool_choice"], sent["max_tokens"], sent["cache_prompt"]) == ("required", 64, True)
    server = stand_in(reply('{"tool": "final_answer", "args": {"answer": "ok"}, "reasoning": "done"}'))
    done = run_example("--base-url", server.url, "--model", "m", "--json-tools", "--response-format", "json_object",
                       "--tool-choice", "look_up_order")
    assert done.returncode == 0, done.stderr
    assert server.requests[0]["response_format"]["type"] == "json_object" and "tool_choice" not in server.requests[0]
    server = stand_in(drip(f"data: {json.dumps(chunks({'content': 'x' * 3000}, None)[1])}\n\n", 0.05))
    done = run_example("--base-url", server.url, "--model", "m", "--deadline", "1")
    assert done.returncode == 1 and "was still sending its reply at the deadline" in done.stderr


@pytest.mark.parametrize("flags, problem", [
    (["--api-key-env", "NO_SUCH_KEY_VAR"], "the environment variable NO_SUCH_KEY_VAR is not set"),
    (["--timeout", "0"], "timeout must be a number of seconds above 0"),
    (["--response-format", "json_object"], "response_format describes a move as JSON text"),
])
def test_the_example_says_in_one_line_what_is_wrong_with_a_setting(flags, problem):
    env = {k: v for k, v in os.environ.items() if k != "NO_SUCH_KEY_VAR"}
    done = run_example("--base-url", f"http://127.0.0.1:{free_port()}/v1", "--model", "m", *flags, env=env)
    assert done.returncode == 2
    assert done.stderr.startswith(f"error: {problem}") and done.stderr.count("\n") == 1  # no traceback


def test_the_example_says_what_to_do_when_the_server_is_not_there():
    done = run_example("--base-url", f"http://127.0.0.1:{free_port()}/v1", "--model", "m")
    assert done.returncode == 1
    assert "connection refused. Is the model server running" in done.stderr


# --- the stand-in speaks like the real servers: an independent client agrees -------------------------------

@pytest.mark.parametrize("verbose", [False, True])
@pytest.mark.parametrize("stream", [True, False])
def test_every_reply_and_chunk_of_the_stand_in_passes_the_official_clients_strict_validation(stand_in, stream,
                                                                                           verbose):
    from openai.types.chat import ChatCompletion, ChatCompletionChunk  # a dev dependency: an outside oracle
    server = stand_in(*[dict(r, verbose=verbose) for r in office_replies(final_as_words=True)],
                      reply("cut", finish="length", verbose=verbose))
    support_agent(policy=chat_policy("stand-in", server.url, stream=stream), approver=yes).run(QUESTION)
    ask(chat_policy("stand-in", server.url, stream=stream))
    kind = ChatCompletionChunk if stream else ChatCompletion
    assert len(server.sent) > (20 if stream else 4)
    for sent in server.sent:
        kind.model_validate(sent, strict=True)
    finishes = [c["finish_reason"] for s in server.sent for c in s["choices"] if c.get("finish_reason")]
    assert finishes == ["tool_calls"] * 3 + ["stop", "length"]


@pytest.mark.parametrize("stream", [True, False])
def test_the_four_turn_refund_runs_against_the_stand_in_speaking_like_llama_cpp(stand_in, stream):
    by_rules = support_agent(approver=yes).run(QUESTION)
    replies = [dict(r, verbose=True) for r in office_replies(final_as_words=False)]
    for r in replies:  # a model that calls tools writes no words with them, as small local models do
        r["message"]["content"] = None
    server = stand_in(*replies)  # and it refuses a request with an assistant content of null
    brain = chat_policy("stand-in", server.url, stream=stream, tool_choice="required")
    ctx = support_agent(policy=brain, approver=yes).run(QUESTION)
    assert [(m.role, m.tool, m.args) for m in ctx] == [(m.role, m.tool, m.args) for m in by_rules]
    assert all(m["content"] == "" for r in server.requests[1:] for m in r["messages"] if m["role"] == "assistant")
    assert "final_answer" in [s["function"]["name"] for s in server.requests[0]["tools"]]  # forced: shown


# --- the leanest request ---------------------------------------------------------------------------------

def test_the_refund_run_sends_fewer_bytes_than_any_framework_measured():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import request_size  # benchmarks/request_size.py: the bytes each request of a refund run sends
    for native in (True, False):
        rows = request_size.measure(native=native)
        assert len(rows) == 4
        assert all(reused > 0.99 for *_, reused in rows[1:])  # each request reuses the one before
    assert sum(size for size, *_ in request_size.measure(native=True)) < 5_656  # LangGraph's, the smallest of four


# --- against a real model server, when one is given (MICROAGENT_LLM_URL) -------------------------------------

REAL = os.environ.get("MICROAGENT_LLM_URL")  # an OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1
REAL_MODEL = os.environ.get("MICROAGENT_LLM_MODEL", "smollm2")
real_server = pytest.mark.skipif(not REAL, reason="no real model server: set MICROAGENT_LLM_URL")
STEPS = ["look_up_order", "check_policy", "issue_refund", "final_answer"]  # the refund, in order


def each_tool_in_turn(**settings):
    """A brain that forces the next tool of the refund each turn (tool_choice), so a small model walks it.

    The next tool is the one after the last that worked: a call that failed (a small model may
    fumble the JSON of its arguments) is asked for again, and the loop's error note says why.
    """
    def policy(ctx, tools):
        turn = STEPS[min(sum(m.kind == "result" and not m.error for m in ctx), len(STEPS) - 1)]
        forced = {"type": "function", "function": {"name": turn}}
        return chat_policy(REAL_MODEL, REAL, tool_choice=forced, send=hardened(timeout=300), **settings)(ctx, tools)
    return policy


@real_server
@pytest.mark.parametrize("stream", [False, True])
def test_the_refund_office_runs_through_all_four_tools_against_a_real_server(stream):
    agent = support_agent(policy=each_tool_in_turn(stream=stream, max_tokens=200), approver=yes)
    ctx = agent.run(QUESTION)
    worked = [m.name for m in ctx if m.kind == "result" and not m.error]
    assert worked == STEPS and agent.why_stop(ctx) == DONE, story(ctx)  # each of the four, once, in order
    assert all(m.content.startswith(("error: bad arguments", "your reply")) for m in ctx if m.error), story(ctx)


@real_server
def test_with_the_schema_of_a_move_every_reply_of_a_real_small_model_is_a_valid_move():
    policy = chat_policy(REAL_MODEL, REAL, native=False, response_format="json_object", max_tokens=200,
                         stream=False, send=hardened(timeout=300))
    ctx = Agent(policy, [look_up_order, check_policy, final_answer], max_steps=4).run(QUESTION)
    moves = [m for m in ctx if m.kind == "decision"]
    assert moves and all(m.tool in STEPS for m in moves), story(ctx)
    assert not any(m.error for m in ctx), story(ctx)
    assert Agent(policy, [look_up_order, check_policy, final_answer]).why_stop(ctx) in (DONE, None)
