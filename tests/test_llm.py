"""The LLM brain against a stand-in model server on 127.0.0.1: the wire, the office, every failure."""

import io
import json
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from llm_server import chunks, drip, error, keep_alives, moved, null_content, raw, reply, serve, stream_of
from microagent import (agent_tool, ASSISTANT, CANCELLED, SYSTEM, TOOL, USER, Action, Agent, Context,
                        Message, approve, as_tool, decisions, deny, final_answer, scripted, story)
from microagent.demo import QUESTION, check_policy, look_up_order, support_agent
from microagent.memory import remembering
from microagent.llm import (IN_WORDS, MAX_REPLY, LLMError, Usage, Waiting, _add_piece, _mended, _read_stream, described, encoded,
                            tool_spec, chat_policy, read_actions, read_move,
                            recorded, replayed, to_actions, to_messages, to_request)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "llm_agent.py"


@as_tool
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


@as_tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay an amount in dollars."""
    return f"paid ${amount}"


@pytest.fixture
def stand_in():
    """Start stand-in model servers with scripted replies; all are closed after the test."""
    started = []

    def start(*script):
        started.append(serve(list(script)))
        return started[-1]
    yield start
    for server in started:
        server.close()


def instant(waits: list):
    """A sleep that only writes down how long it was asked to wait."""
    return waits.append


def texts(steps) -> list[str]:
    return [s.event for s in steps if isinstance(s.event, str)]


# --- the wire: what goes out -------------------------------------------------------------

def test_the_request_is_the_notebook_as_chat_messages_and_the_tools_as_function_specs(stand_in):
    server = stand_in(reply("Adding.", calls=[("add", '{"a": 2, "b": 3}')]), reply("It is 5."))
    agent = Agent(chat_policy("tiny", server.url, stream=False), [add, final_answer], system="You add.")
    ctx = agent.run("2 + 3?").context
    # system, user, assistant, tool, assistant, tool
    assert [m.role for m in ctx] == [SYSTEM, USER, ASSISTANT, TOOL, ASSISTANT, TOOL]
    first, second = server.requests
    assert first == {
        "model": "tiny",
        "messages": [{"role": "system", "content": "You add."}, {"role": "user", "content": "2 + 3?"}],
        "tools": [  # not final_answer: with native tool calls, a reply in words is the final answer
            {"type": "function", "function": {"name": "add", "description": "Add two whole numbers.", "parameters": {
                "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"]}}}],
        "temperature": 0.0,
        "stream": False,
    }
    assert list(first)[-1] == "messages"  # last: the part that grows
    # the model's own id (call_abc0) is not kept: the id is the decision's position in the notebook
    assert second["messages"][2:] == [
        {"role": "assistant", "content": "Adding.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "5"}]
    assert server.headers[0]["Content-Type"] == "application/json"
    assert "Authorization" not in server.headers[0]  # no key given, none sent


def test_the_same_notebook_always_gives_the_same_request_even_after_a_save_and_load():
    ctx = Agent(scripted(Action("add", {"a": 1, "b": 2}), Action("add", {"a": 3, "b": 3}),
                         Action("final_answer", {"answer": "6"})), [add, final_answer]).run("1 + 2 + 3?").context
    request = to_request(ctx, (add, final_answer), "tiny")
    assert request == to_request(Context.from_json(ctx.to_json()), (add, final_answer), "tiny")
    ids = [(m.get("tool_calls") or [{}])[0].get("id") or m.get("tool_call_id") for m in request["messages"][1:]]
    assert ids == ["call_1", "call_1", "call_2", "call_2", "call_3", "call_3"]


def test_a_humans_approval_travels_inside_the_tool_result_with_the_arguments_approved():
    agent = Agent(scripted(Action("pay", {"amount": 90}, "pay it"), Action("final_answer", {"answer": "ok"})),
                  [pay, final_answer])
    paused = agent.run("pay the plumber").context
    ctx = agent.run(context=approve(paused, by="alice", args={"amount": 80}, tool=pay)).context
    messages = to_messages(ctx)
    # user, assistant (asked for 90), tool (alice approved 80), assistant, tool: no user note between
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert messages[1]["tool_calls"][0]["function"]["arguments"] == '{"amount": 90}'
    assert messages[2] == {"role": "tool", "tool_call_id": "call_1",
                           "content": 'approved by alice with {"amount": 80}: paid $80'}
    denied = agent.run(context=deny(paused, "too much", by="bob")).context
    assert to_messages(denied)[2] == {"role": "tool", "tool_call_id": "call_1", "content": "denied by bob: too much"}


def test_an_out_of_steps_note_is_a_plain_assistant_message_and_inner_notes_stay_home():
    helper = Agent(scripted(Action("add", {"a": 1, "b": 1}), Action("final_answer", {"answer": "2"})),
                   [add, final_answer], name="helper", description="adds for you")
    boss = Agent(scripted(Action("helper", {"request": "1 + 1"})), [agent_tool(helper), final_answer], max_steps=1)
    ctx = boss.run("ask the helper").context
    assert len(ctx[2].notes) == 5  # the helper's whole run is in the notebook...
    assert to_messages(ctx)[2:] == [  # ...but only its answer goes over the wire
        {"role": "tool", "tool_call_id": "call_1", "content": "2"},
        {"role": "assistant", "content": "out of steps: stopped after 1 turns without an answer"}]


# --- the reply: what comes back ------------------------------------------------------------

def test_several_tool_calls_in_one_reply_all_run_in_order(stand_in):
    server = stand_in(reply(calls=[("add", '{"a": 1, "b": 1}'), ("add", '{"a": 2, "b": 2}')]), reply("2 and 4"))
    ctx = Agent(chat_policy("tiny", server.url), [add, final_answer]).run("1 + 1 and 2 + 2?").context
    # user, assistant, tool, assistant, tool (both calls of the first reply), assistant, tool
    assert [(m.role, m.tool or m.name, m.content) for m in ctx][1:5] == [
        (ASSISTANT, "add", ""), (TOOL, "add", "2"), (ASSISTANT, "add", ""), (TOOL, "add", "4")]
    assert len(server.requests) == 2  # one request per reply, not per tool call


def test_the_models_mistakes_come_back_to_it_as_notes_and_it_gets_to_fix_them(stand_in):
    server = stand_in(reply(calls=[("add", '{"a": 2, "b": ')]),   # broken JSON
                      reply(calls=[("subtract", '{"a": 2}')]),     # no such tool
                      reply(calls=[("add", '{"a": 2, "b": "3"}')]),  # does not fit the schema
                      reply(calls=[("add", '{"a": 2, "b": 3}')]), reply("5"))
    ctx = Agent(chat_policy("tiny", server.url), [add, final_answer]).run("2 + 3?").context
    errors = [m.content for m in ctx if m.role == TOOL][:3]
    assert errors[0].startswith("error: bad arguments for add: the arguments are not valid JSON")
    assert errors[1] == "error: there is no tool named 'subtract'; the tools are: add, final_answer"
    assert errors[2] == "error: bad arguments for add: b must be integer, not str '3'"
    assert ctx.last().content == "5"
    # the model read each error as the result of its own call, with the call as it sent it
    assert server.requests[1]["messages"][1:] == [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": '}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": errors[0]}]


@pytest.mark.parametrize("stream", [True, False])
def test_a_tool_name_that_is_not_text_is_an_error_note_the_model_reads(stand_in, stream):
    server = stand_in(reply(calls=[(7, '{"a": 1, "b": 1}')]), reply("gave up"))
    ctx = Agent(chat_policy("tiny", server.url, stream=stream), [add, final_answer]).run("1 + 1?").context
    # user, assistant (a call to no tool), tool (the error), assistant, tool
    assert (ctx[1].tool, ctx[1].args) == ("", '{"a": 1, "b": 1}')
    assert ctx[2].content == "error: there is no tool named ''; the tools are: add, final_answer"
    assert ctx.last().content == "gave up"


def test_arguments_sent_as_an_object_are_written_the_same_streamed_or_whole(stand_in):
    call = {"id": "c1", "type": "function", "function": {"name": "final_answer", "arguments": {"answer": "½ off"}}}
    whole = stand_in(raw(json.dumps({"choices": [{"message": {"role": "assistant", "tool_calls": [call]}}]})))
    streamed = stand_in(stream_of({"tool_calls": [{"index": 0, **call}]}))
    runs = [Agent(chat_policy("tiny", s.url, stream=s is streamed), [final_answer]).run("?").context for s in (whole, streamed)]
    assert runs[0] == runs[1]
    assert runs[0][1].args == '{"answer": "½ off"}'  # JSON text, as Action writes it: no \u escapes


@pytest.mark.parametrize("stream", [True, False])
def test_words_sent_as_a_list_of_parts_are_joined(stand_in, stream):
    parts = [{"type": "text", "text": "It is "}, {"type": "image_url", "image_url": {"url": "x"}},
             {"type": "text", "text": "5."}]
    server = stand_in(reply(parts) if not stream else stream_of({"content": parts[:2]}, {"content": parts[2:]}))
    steps = list(Agent(chat_policy("tiny", server.url, stream=stream), [final_answer]).steps("2 + 3?"))
    assert "".join(texts(steps)) == "It is 5."  # the text parts only, in order
    assert steps[-1].context.last() == Message(TOOL, "It is 5.", name="final_answer")


MALFORMED = {  # (stream?, what the server sent) -> what the error says is wrong
    "no message": (False, raw('{"choices": [{"message": null}]}'), "its message is null"),
    "content neither text nor parts": (False, raw('{"choices": [{"message": {"content": 7}}]}'), "its content is 7"),
    "tool_calls not a list": (False, raw('{"choices": [{"message": {"tool_calls": {"id": "c1"}}}]}'),
                              'its tool_calls is {"id": "c1"}'),
    "a call that is not an object": (False, raw('{"choices": [{"message": {"tool_calls": ["add"]}}]}'),
                                     'its tool_calls is ["add"]'),
    "streamed tool_calls not a list": (True, stream_of({"tool_calls": {"index": 0}}), 'its tool_calls is {"index": 0}'),
    "streamed content neither": (True, stream_of({"content": {"text": "hi"}}), 'its content is {"text": "hi"}'),
}


@pytest.mark.parametrize("name", MALFORMED)
def test_a_malformed_reply_is_an_llm_error_that_says_what_is_wrong(stand_in, name):
    stream, entry, what = MALFORMED[name]
    server = stand_in(entry)
    with pytest.raises(LLMError) as e:
        ask(chat_policy("tiny", server.url, stream=stream))
    assert str(e.value) == f"{server.url}/chat/completions sent a reply that is not well formed: {what}"


def test_a_reply_in_words_is_the_final_answer_and_an_empty_one_is_an_error_note(stand_in):
    assert to_actions({"role": "assistant", "content": "  It is 5.\n"}) == [
        Action("final_answer", {"answer": "It is 5."}, IN_WORDS)]
    server = stand_in(reply(""), reply("It is 5."))
    ctx = Agent(chat_policy("tiny", server.url), [add, final_answer]).run("2 + 3?").context
    # user, assistant (no move: nothing was said), tool (the loop's error), assistant, tool
    assert (ctx[1].tool, ctx[1].content) == ("", "")  # no call the model never made
    assert ctx[2].error and ctx.last() == Message(TOOL, "It is 5.", name="final_answer")
    # the model reads what it really wrote (nothing), then what was wrong, in plain words
    assert server.requests[1]["messages"][1:] == [
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "error: your reply was empty: call one of the tools, or answer in words"}]


def test_an_llm_brain_without_final_answer_among_the_tools_says_so(stand_in):
    server = stand_in(reply("hi"))
    with pytest.raises(ValueError, match="needs the final_answer tool"):
        Agent(chat_policy("tiny", server.url), [add]).run("hello")
    assert server.requests == []  # said before any request


# --- streaming ----------------------------------------------------------------------------

SCRIPTS = {
    "words": [reply("Good news: it is 5, my friend.")],
    "one call, words around it": [reply("Let me add.", calls=[("add", '{"a": 2, "b": 3}')]), reply("5")],
    "two calls": [reply(calls=[("add", '{"a": 10, "b": 20}'), ("add", '{"a": 1, "b": 2}')]), reply("30, 3")],
    "unicode split": [reply("Voilà: ½ of 10 is 5 ✓")],
    "broken arguments": [reply(calls=[("add", '{"a": 2,, "b": 3}')]), reply("gave up")],
}


@pytest.mark.parametrize("name", SCRIPTS)
def test_a_streamed_reply_gives_exactly_the_notebook_a_whole_one_gives(stand_in, name):
    whole, streamed = stand_in(*SCRIPTS[name]), stand_in(*SCRIPTS[name])
    agent = Agent(chat_policy("tiny", whole.url, stream=False), [add, final_answer])
    slow = list(agent.steps("go"))
    agent.policy = chat_policy("tiny", streamed.url, stream=True)  # swap the brain, keep the body
    fast = list(agent.steps("go"))
    assert fast[-1].context == slow[-1].context
    assert "".join(texts(fast)) == "".join(texts(slow))  # the same words, in more pieces
    assert streamed.requests[0]["stream"] is True
    assert streamed.requests[0]["stream_options"] == {"include_usage": True}


def test_streamed_text_arrives_in_pieces_that_split_words(stand_in):
    server = stand_in(reply("Good news: it is 5."))
    steps = list(Agent(chat_policy("tiny", server.url), [final_answer]).steps("2 + 3?"))
    assert texts(steps) == ["Goo", "d n", "ews", ": i", "t i", "s 5", "."]


def test_streamed_tool_call_arguments_are_put_back_together_from_fragments(stand_in):
    pieces = chunks(reply(calls=[("add", '{"a": 12, "b": 30}')])["message"], None)
    fragments = [c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"]
                 for c in pieces if "tool_calls" in c["choices"][0]["delta"]]
    assert fragments == ["", '{"a', '": ', "12,", ' "b', '": ', "30}"]  # split mid-token
    server = stand_in(reply(calls=[("add", '{"a": 12, "b": 30}')]), reply("42"))
    ctx = Agent(chat_policy("tiny", server.url), [add, final_answer]).run("12 + 30?").context
    assert ctx[1].args == '{"a": 12, "b": 30}' and ctx[2].content == "42"


def test_streamed_calls_without_an_index_stay_apart(stand_in):
    one, two = ({"id": f"c{n}", "type": "function", "function": {"name": "add", "arguments": f'{{"a": {n}, "b": {n}}}'}}
                for n in (1, 2))
    server = stand_in(stream_of({"tool_calls": [one]}, {"tool_calls": [two]}),  # a new id: a new call
                      stream_of({"tool_calls": [one, two]}),  # two in one delta: their places tell them apart
                      reply("done"))
    ctx = Agent(chat_policy("tiny", server.url), [add, final_answer]).run("1 + 1 and 2 + 2, twice?").context
    # user, then (assistant, tool) for each call: two from each streamed reply, then the answer
    assert [(m.tool, m.args) for m in ctx if m.role == ASSISTANT][:4] == [
        ("add", '{"a": 1, "b": 1}'), ("add", '{"a": 2, "b": 2}')] * 2
    assert [m.content for m in ctx if m.role == TOOL] == ["2", "4", "2", "4", "done"]


@given(text=st.text(max_size=40), calls=st.lists(st.tuples(st.sampled_from(["add", "nope", ""]), st.text(max_size=30)),
                                                 max_size=3), piece=st.integers(1, 7), verbose=st.booleans())
def test_any_reply_cut_anywhere_gives_the_actions_the_whole_reply_gives(text, calls, piece, verbose):
    whole = reply(text, calls=calls)["message"]
    lines = [f"data: {json.dumps(c)}\n".encode() for c in chunks(whole, None, piece, verbose=verbose)]
    lines.append(b"data: [DONE]\n")
    stream = _read_stream(io.BytesIO(b"".join(lines)), "http://127.0.0.1/v1/chat/completions", 1.0)
    pieces = []
    try:
        while True:
            pieces.append(next(stream))
    except StopIteration as end:
        message, _usage, _finish = end.value
    assert to_actions(message) == to_actions(whole)
    assert "".join(p for p in pieces if isinstance(p, str)) == _mended(text)


@pytest.mark.parametrize("stream", [True, False])
def test_the_tokens_each_reply_cost_are_an_event_of_its_step(stand_in, stream):
    server = stand_in(reply(calls=[("add", '{"a": 2, "b": 3}')], usage=(50, 7)), reply("5", usage=(70, 2)))
    steps = list(Agent(chat_policy("tiny", server.url, stream=stream), [add, final_answer]).steps("2 + 3?"))
    assert [s.event for s in steps if isinstance(s.event, Usage)] == [Usage(50, 7, 57), Usage(70, 2, 72)]


# --- the refund office, with either brain ---------------------------------------------------

def office_replies(final_as_words: bool) -> list[dict]:
    """The stand-in model makes the very moves the rule-based support_policy makes."""
    last = (reply("Good news, A1234 qualifies. I refunded $79 to your card, here in 3 to 5 days.")
            if final_as_words else
            reply("all set, time to reply to the customer", calls=[("final_answer", json.dumps(
                {"answer": "Good news, A1234 qualifies. I refunded $79 to your card, here in 3 to 5 days."}))]))
    return [reply("let me pull up the order first", calls=[("look_up_order", '{"order_id": "A1234"}')]),
            reply("now check if it qualifies", calls=[("check_policy", '{"order_id": "A1234"}')]),
            reply("it qualifies, and a refund needs a human to sign off",
                  calls=[("issue_refund", '{"order_id": "A1234", "amount": 79}')]),
            last]


@pytest.mark.parametrize("stream", [True, False])
def test_the_refund_office_runs_unchanged_with_an_llm_brain(stand_in, stream):
    by_rules = support_agent().run(QUESTION).context
    server = stand_in(*office_replies(final_as_words=False))
    agent = support_agent(policy=chat_policy("stand-in", server.url, stream=stream))
    # the body is the same: the very same coworkers (the refund is gated anew by each office)
    assert agent.tools["look_up_order"] is look_up_order and agent.tools["check_policy"] is check_policy
    assert agent.tools["final_answer"] is final_answer
    assert agent.run(QUESTION).context == by_rules  # the same notebook, note for note
    # and the model saw each coworker's result, the human's approval included
    assert server.requests[3]["messages"][-1] == {
        "role": "tool", "tool_call_id": "call_3", "content": "approved by a human, $79 refunded to the original card"}


def test_a_model_that_answers_in_words_tells_a_story_of_the_same_shape(stand_in):
    by_rules = support_agent().run(QUESTION).context
    server = stand_in(*office_replies(final_as_words=True))
    by_model = support_agent(policy=chat_policy("stand-in", server.url)).run(QUESTION).context
    assert [(m.role, m.tool, m.name) for m in by_model] == [(m.role, m.tool, m.name) for m in by_rules]
    assert by_model.messages[:-2] == by_rules.messages[:-2]
    assert by_model.last() == by_rules.last()  # the same answer, through the same final_answer tool
    assert story(by_model).splitlines()[-2] == f"  support thought: {IN_WORDS}"


# --- failures: each says what to do ---------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ask(policy, tools=(final_answer,)):
    """Run one decision of a policy by hand: its events, then its Actions."""
    events, out = [], policy(Context((Message(USER, "hi"),)), tools)
    try:
        while True:
            events.append(next(out))
    except StopIteration as end:
        return events, end.value


def test_nobody_listening_asks_whether_the_server_is_running():
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(LLMError, match="connection refused. Is the model server running") as e:
        ask(chat_policy("tiny", url))
    assert url in str(e.value)


@pytest.mark.parametrize("setting, problem", [
    ({"retries": -1}, "retries must be a whole number, 0 or more, not -1"),
    ({"retries": 1.5}, "retries must be a whole number, 0 or more, not 1.5"),
    ({"timeout": 0}, "timeout must be a number of seconds above 0, not 0"),
    ({"timeout": float("inf")}, "timeout must be a number of seconds above 0, not inf"),
    ({"base_url": "localhost:11434/v1"}, "base_url must start with http:// or https://, not 'localhost:11434/v1'"),
    ({"model": ""}, "model must be the model's name on the server, not ''"),
])
def test_settings_that_cannot_work_are_refused_when_the_brain_is_made(setting, problem):
    with pytest.raises(ValueError) as e:
        chat_policy(**{"model": "tiny", "base_url": "http://127.0.0.1:1/v1", **setting})
    assert str(e.value) == problem


def test_a_server_that_never_accepts_the_connection_is_not_a_slow_model():
    listener = socket.create_server(("127.0.0.1", 0), backlog=0)  # listens, never accepts
    port, queued = listener.getsockname()[1], []
    for _ in range(3):  # fill its queue: further connections are left waiting, unanswered
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        queued.append(s)
    try:
        with pytest.raises(LLMError, match=r"did not accept the connection within timeout=0.3s: check the base URL"):
            ask(chat_policy("tiny", f"http://127.0.0.1:{port}/v1", timeout=0.3))
    finally:
        for s in queued + [listener]:
            s.close()


def test_tls_to_a_plain_http_server_says_check_the_base_url(stand_in):
    server = stand_in(reply("hi"))
    url = server.url.replace("http://", "https://")
    with pytest.raises(LLMError, match=r"could not reach https://.*\(.*SSL.*\): check the base URL"):
        ask(chat_policy("tiny", url))


def test_a_server_that_resets_the_connection_while_we_send_says_try_again():
    listener = socket.create_server(("127.0.0.1", 0))

    def reset():  # read a little of the request, then reset the connection
        conn, _addr = listener.accept()
        conn.recv(1024)
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()
    threading.Thread(target=reset, daemon=True).start()
    long = Context((Message(USER, "x" * (16 << 20)),))  # more than the socket buffers hold: still sending
    try:
        with pytest.raises(LLMError, match=r"the connection to .* broke before the reply was whole "
                                           r"\(ConnectionResetError\): try again"):
            next(chat_policy("tiny", f"http://127.0.0.1:{listener.getsockname()[1]}/v1")(long, (final_answer,)))
    finally:
        listener.close()


def test_a_server_that_hangs_up_without_answering_is_a_clear_error():
    listener = socket.create_server(("127.0.0.1", 0))

    def hang_up():  # read the request, then close the connection without a word
        conn, _addr = listener.accept()
        conn.recv(65536)
        conn.close()
    threading.Thread(target=hang_up, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
    try:
        with pytest.raises(LLMError, match="the connection to .* broke before the reply was whole .*: try again"):
            ask(chat_policy("tiny", url, stream=False))
    finally:
        listener.close()


def test_a_refused_key_says_check_the_key_and_never_shows_it(stand_in, monkeypatch):
    secret = "sk-test-0123456789-secret"
    monkeypatch.setenv("STAND_IN_KEY", secret)
    server = stand_in(error(401, f"Incorrect API key provided: {secret}"))
    policy = chat_policy("tiny", server.url, api_key_env="STAND_IN_KEY")
    with pytest.raises(LLMError, match=r"HTTP 401\): check the API key; the key in \$STAND_IN_KEY") as e:
        ask(policy)
    assert server.headers[0]["Authorization"] == f"Bearer {secret}"  # it was sent...
    assert secret not in str(e.value) and secret not in repr(policy)  # ...and is never shown
    assert len(server.requests) == 1  # a wrong key is not tried again


def test_a_key_passed_directly_is_the_one_a_refusal_points_at(stand_in, monkeypatch):
    monkeypatch.setenv("STAND_IN_KEY", "sk-from-the-environment")
    server = stand_in(error(401))
    with pytest.raises(LLMError, match=r"check the API key; the api_key passed$"):
        ask(chat_policy("tiny", server.url, api_key="sk-passed", api_key_env="STAND_IN_KEY"))
    assert server.headers[0]["Authorization"] == "Bearer sk-passed"  # the key passed wins


def test_a_key_the_server_repeats_in_another_error_is_blanked_out(stand_in):
    server = stand_in(error(400, "bad request from key sk-abc"))
    with pytest.raises(LLMError) as e:
        ask(chat_policy("tiny", server.url, api_key="sk-abc"))
    assert "sk-abc" not in str(e.value) and "[the key]" in str(e.value)


def test_the_hint_to_try_json_tools_comes_only_when_the_server_speaks_of_tools(stand_in):
    server = stand_in(error(400, "bad request"), error(400, "tool_choice is not supported by this model"),
                      error(422, "function calling is not available"))
    told = []
    for _ in range(3):
        with pytest.raises(LLMError) as e:
            ask(chat_policy("tiny", server.url))
        told.append("If the model cannot call tools, try native_tools=False." in str(e.value))
    assert told == [False, True, True]


def test_a_missing_key_variable_is_named_when_the_brain_is_made(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(ValueError, match="the environment variable NO_SUCH_KEY_VAR is not set"):
        chat_policy("tiny", api_key_env="NO_SUCH_KEY_VAR")


def test_not_found_points_at_the_model_name_and_the_base_url(stand_in):
    server = stand_in(error(404, "model 'lama3' not found"))
    with pytest.raises(LLMError, match=r"404 not found \(the server said: model 'lama3' not found\): "
                                       r"check the model name 'lama3'"):
        ask(chat_policy("lama3", server.url))


def test_rate_limits_and_server_errors_are_tried_again_as_the_server_asks(stand_in):
    server = stand_in(error(429, retry_after="7"), error(503), error(502, retry_after="3600"), reply("made it"))
    waits = []
    events, actions = ask(chat_policy("tiny", server.url, retries=3, sleep=instant(waits)))
    # Retry-After; our own backoff (1, 2, 4, ...); a huge ask is capped. Each wait is taken in naps
    # of a second at most, with a Waiting event before each, so a cancel is heard during a wait
    assert waits == [1.0] * (7 + 2 + 60)
    starts = [e.what for e in events if isinstance(e, Waiting) and e.what.endswith("s before trying again")]
    assert starts[0] == "7s before trying again" and starts[7] == "2s before trying again"
    assert starts[9] == "60s before trying again" and len(starts) == 69
    assert actions == [Action("final_answer", {"answer": "made it"}, IN_WORDS)]
    assert len(server.requests) == 4


def test_retries_are_bounded_then_the_error_is_clear(stand_in):
    server = stand_in(*[error(429, "slow down", retry_after="1")] * 3)
    waits = []
    with pytest.raises(LLMError, match=r"rate limiting \(HTTP 429\), still after 3 tries \(the server said: slow down\)"):
        ask(chat_policy("tiny", server.url, retries=2, sleep=instant(waits)))
    assert waits == [1.0, 1.0] and len(server.requests) == 3
    server = stand_in(*[error(500)] * 2)
    with pytest.raises(LLMError, match=r"failed with HTTP 500, still after 2 tries \(the server said"):
        ask(chat_policy("tiny", server.url, retries=1, sleep=instant([])))
    server = stand_in(error(500), error(429))  # tried once only: no count to give
    with pytest.raises(LLMError, match=r"failed with HTTP 500 \(the server said"):
        ask(chat_policy("tiny", server.url, retries=0))
    with pytest.raises(LLMError, match=r"rate limiting \(HTTP 429\) \(the server said"):
        ask(chat_policy("tiny", server.url, retries=0))


def test_a_slow_server_is_cut_off_by_the_timeout_which_is_named(stand_in):
    server = stand_in(reply("late", delay=5))
    start = time.monotonic()
    with pytest.raises(LLMError, match=r"took longer than timeout=0.2s to start answering"):
        ask(chat_policy("tiny", server.url, timeout=0.2, stream=False))
    assert time.monotonic() - start < 3


def test_a_stream_that_stalls_is_cut_off_by_the_timeout_too(stand_in):
    server = stand_in(reply("this will stop half way", stall_after=3))
    with pytest.raises(LLMError, match=r"timeout=0.2s to send the next piece of the reply"):
        ask(chat_policy("tiny", server.url, timeout=0.2))


@pytest.mark.parametrize("stream", [True, False])
def test_a_server_that_does_not_speak_chat_completions_is_told_apart(stand_in, stream):
    server = stand_in(raw("<html>a web page, not a model</html>"))
    with pytest.raises(LLMError, match="did not answer like a chat completions API: check the base URL"):
        ask(chat_policy("tiny", server.url, stream=stream))


def test_an_error_in_a_successful_answer_is_still_an_error(stand_in):
    server = stand_in(raw('{"error": {"message": "the model crashed"}}'))
    with pytest.raises(LLMError, match="answered with an error: the model crashed"):
        ask(chat_policy("tiny", server.url, stream=False))
    server = stand_in(raw('data: {"error": {"message": "out of memory"}}\n\n'))
    with pytest.raises(LLMError, match="reported an error mid-reply: out of memory"):
        ask(chat_policy("tiny", server.url))


# --- cancelling ----------------------------------------------------------------------------

def test_cancelling_mid_stream_hangs_up_and_leaves_the_notebook_whole(stand_in):
    server = stand_in(reply("A long answer that takes a while to write, piece by piece.", pause=0.05),
                      reply("Short."))
    agent = Agent(chat_policy("tiny", server.url), [final_answer])
    cancel, steps = threading.Event(), []
    for step in agent.steps("tell me", cancel=cancel):
        steps.append(step)
        if isinstance(step.event, str):
            cancel.set()  # the caller has seen enough after the first piece
    assert texts(steps) == ["A l"] and steps[-1].stop == CANCELLED
    assert steps[-1].context == Context((Message(USER, "tell me"),))  # nothing half written
    assert server.hung_up.wait(5)  # the HTTP response was closed: the server saw us go
    # the notebook goes on later, with a fresh request
    assert agent.run(context=steps[-1].context).context.last().content == "Short."
    assert len(server.requests) == 2


def test_a_caller_who_stops_pulling_steps_hangs_up_too(stand_in):
    server = stand_in(reply("A long answer that takes a while to write, piece by piece.", pause=0.05))
    steps = Agent(chat_policy("tiny", server.url), [final_answer]).steps("tell me")
    # a comment, then the first chunk (no words yet), then the first words
    assert [next(steps).event for _ in range(3)] == [Waiting("a keep-alive"), Waiting("the reply goes on"), "A l"]
    steps.close()  # a browser tab closed, say: no cancel signal, the steps just stop being pulled
    assert server.hung_up.wait(5)


def test_cancelling_between_steps_starts_no_further_model_call(stand_in):
    server = stand_in(reply(calls=[("add", '{"a": 1, "b": 1}')]), reply("2"))
    cancel, steps = threading.Event(), []
    for step in Agent(chat_policy("tiny", server.url), [add, final_answer]).steps("1 + 1?", cancel=cancel):
        steps.append(step)
        if step.result is not None:
            cancel.set()
    assert steps[-1].stop == CANCELLED and len(server.requests) == 1
    assert [m.role for m in steps[-1].context] == [USER, ASSISTANT, TOOL]


# --- models without native tool calls: one JSON object a turn -------------------------------

def test_without_native_tools_the_tools_are_described_in_the_prompt(stand_in):
    server = stand_in(reply('Sure!\n```json\n{"tool": "add", "args": {"a": 2, "b": 3}, "reasoning": "sum it"}\n```'),
                      reply('{"tool": "final_answer", "args": {"answer": "5"}, "reasoning": "done"}'))
    agent = Agent(chat_policy("tiny", server.url, native_tools=False), [add, final_answer], system="You add.")
    ctx = agent.run("2 + 3?").context
    assert decisions(ctx) == [Action("add", {"a": 2, "b": 3}, "sum it"), Action("final_answer", {"answer": "5"}, "done")]
    first, second = server.requests
    assert "tools" not in first
    system = first["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You add.\n\nYou work by calling tools.")
    assert '- add: Add two whole numbers. {"type":"object"' in system["content"]
    assert second["messages"][2:] == [
        {"role": "assistant", "content": '{"tool":"add","args":{"a":2,"b":3},"reasoning":"sum it"}'},
        {"role": "user", "content": "add returned: 5"}]


def test_reading_a_json_move_is_forgiving_but_never_guesses():
    assert read_move('ok {"note": "not a move"} then {"tool": "add", "args": {"a": 1, "b": 2}}') == \
        Action("add", {"a": 1, "b": 2})  # the first object *with a tool*
    assert read_move('{"tool": "add", "args": "{\\"a\\": 1}"}') == Action("add", '{"a": 1}')  # args as text: kept
    assert read_move("The answer is 5.") == Action("final_answer", {"answer": "The answer is 5."}, IN_WORDS)
    unreadable = read_move('{"tool": "add", "args": {"a": 1,}}')
    assert unreadable == Action("", {"problem": "your reply was not one JSON object with a tool: reply with one JSON "
                                                'object with a tool: {"tool": ..., "args": {...}, "reasoning": ...}'},
                                '{"tool": "add", "args": {"a": 1,}}')  # what the model wrote, kept as it was


def test_a_json_move_whose_reasoning_is_null_has_no_reasoning(stand_in):
    server = stand_in(reply('{"tool": "add", "args": {"a": 1, "b": 1}, "reasoning": null}'),
                      reply('{"tool": "final_answer", "args": {"answer": "2"}, "reasoning": 7}'))
    ctx = Agent(chat_policy("tiny", server.url, native_tools=False), [add, final_answer]).run("1 + 1?").context
    assert [a.reasoning for a in decisions(ctx)] == ["", ""]
    assert '  agent thought: call add with {"a": 1, "b": 1}' in story(ctx).splitlines()  # not "thought: None"


def test_an_unreadable_json_move_becomes_an_error_note_the_model_reads(stand_in):
    server = stand_in(reply('{"tool": "add", "args": {"a": 1,}}'), reply('{"tool": "final_answer", "args": {"answer": "?"}}'))
    ctx = Agent(chat_policy("tiny", server.url, native_tools=False), [add, final_answer]).run("1 + ?").context
    assert ctx[1].content == '{"tool": "add", "args": {"a": 1,}}' and ctx[2].error
    # the model reads back exactly what it wrote, then what was expected of it
    assert server.requests[1]["messages"][2:] == [
        {"role": "assistant", "content": '{"tool": "add", "args": {"a": 1,}}'},
        {"role": "user", "content": "error: your reply was not one JSON object with a tool: reply with one JSON "
                                    'object with a tool: {"tool": ..., "args": {...}, "reasoning": ...}'}]


# --- record a live run, replay it offline ----------------------------------------------------

def test_a_recorded_live_run_replays_offline_to_the_same_notebook(stand_in, tmp_path):
    server = stand_in(*office_replies(final_as_words=True))
    path = tmp_path / "run.jsonl"
    live = support_agent(policy=recorded(chat_policy("stand-in", server.url), path)).run(QUESTION).context
    assert read_actions(path) == decisions(live)
    assert json.loads(path.read_text().splitlines()[0]) == {
        "tool": "look_up_order", "args": '{"order_id": "A1234"}', "reasoning": "let me pull up the order first"}
    server.close()  # offline from here on
    assert support_agent(policy=replayed(path)).run(QUESTION).context == live


def test_recording_keeps_step_with_the_notebook_when_a_pause_drops_an_action(tmp_path):
    path = tmp_path / "run.jsonl"
    replies = iter([[Action("pay", {"amount": 5}), Action("add", {"a": 1, "b": 1})],  # add is dropped: paused
                    [Action("add", {"a": 2, "b": 2}), Action("final_answer", {"answer": "done"})]])

    def live(ctx, tools):
        return next(replies)
    agent = Agent(recorded(live, path), [pay, add, final_answer])
    ctx = agent.run(context=approve(agent.run("pay 5, then add").context, by="alice")).context
    assert [a.tool for a in read_actions(path)] == ["pay", "add", "final_answer"]
    again = Agent(replayed(path), [pay, add, final_answer])
    assert again.run(context=approve(again.run("pay 5, then add").context, by="alice")).context == ctx


def test_recording_keeps_every_decision_inside_or_outside_remembering(tmp_path):
    def live():  # a brain that ignores the notebook, as a model reading only the latest notes may
        moves = iter([Action("add", {"a": n, "b": 1}) for n in range(6)] + [Action("final_answer", {"answer": "ok"})])
        return lambda ctx, tools: next(moves)
    outside, inside = tmp_path / "outside.jsonl", tmp_path / "inside.jsonl"
    ctx = Agent(recorded(remembering(live(), keep=2), outside), [add, final_answer]).run("count").context
    assert read_actions(outside) == decisions(ctx)  # all 7
    Agent(remembering(recorded(live(), inside), keep=2), [add, final_answer]).run("count")
    assert read_actions(inside) == decisions(ctx)  # the summary keeps what it folded: nothing is lost

def test_a_broken_recording_says_which_line(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_text('{"tool": "add", "args": "{}", "reasoning": ""}\nnot json\n')
    with pytest.raises(ValueError, match="run.jsonl, line 2: not a recorded action"):
        read_actions(path)


# --- the example script ------------------------------------------------------------------

def run_example(*args, env=None):
    return subprocess.run([sys.executable, str(EXAMPLE), *args], capture_output=True, text=True, timeout=60, env=env)


@pytest.mark.parametrize("flags", [[], ["--no-stream"]])
def test_the_example_tells_the_story_as_it_streams(stand_in, flags):
    server = stand_in(*office_replies(final_as_words=True))
    done = run_example("--base-url", server.url, "--model", "stand-in", *flags)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f'you asked: "{QUESTION}"'
    assert "    -> final_answer returned: Good news, A1234 qualifies. I refunded $79 to your card, " \
           "here in 3 to 5 days." in lines
    assert "  ... let me pull up the order first" in lines  # the model's words as they came
    assert "      (tokens: 20 in, 5 out)" in lines
    assert server.requests[0]["stream"] is (flags == [])


def test_the_example_sends_the_key_from_the_named_variable(stand_in):
    server = stand_in(*office_replies(final_as_words=True))
    env = {**os.environ, "EXAMPLE_KEY": "sk-example"}
    done = run_example("--base-url", server.url, "--model", "m", "--api-key-env", "EXAMPLE_KEY", env=env)
    assert done.returncode == 0, done.stderr
    assert server.headers[0]["Authorization"] == "Bearer sk-example"


@pytest.mark.parametrize("flags, problem", [
    (["--api-key-env", "NO_SUCH_KEY_VAR"], "the environment variable NO_SUCH_KEY_VAR is not set"),
    (["--timeout", "0"], "timeout must be a number of seconds above 0"),
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


def test_an_api_key_that_is_not_text_is_refused_when_the_brain_is_made():
    with pytest.raises(TypeError, match="api_key is a string"):
        chat_policy("tiny", "http://127.0.0.1:1/v1", api_key=12345)


def test_the_readme_llm_snippet_runs_as_written_against_a_server(stand_in):
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    snippet = next(block for block in readme.split("```python\n")[1:] if "chat_policy" in block).split("```")[0]
    server = stand_in(*office_replies(final_as_words=False))
    assert "http://localhost:11434/v1" in snippet  # the README shows Ollama's address ...
    code = snippet.replace("http://localhost:11434/v1", server.url)  # ... the test points it here
    code = code.replace(".run(QUESTION)", ".answer(QUESTION)").replace("support_agent(", "said = support_agent(", 1)
    names = {}
    exec(compile(code, "README.md", "exec"), names)
    assert names["said"] == support_agent().answer(QUESTION)


# --- settings the servers need --------------------------------------------------------------

def test_tool_choice_max_tokens_and_extra_fields_are_sent_as_given(stand_in):
    server = stand_in(reply("hi"), reply("hi"))
    ask(chat_policy("tiny", server.url, tool_choice="required", max_tokens=256, extra={"cache_prompt": True}))
    ask(chat_policy("tiny", server.url))
    first, plain = server.requests
    assert (first["tool_choice"], first["max_tokens"], first["cache_prompt"]) == ("required", 256, True)
    assert not {"tool_choice", "max_tokens", "cache_prompt"} & set(plain)  # left out: the server's defaults
    forced = {"type": "function", "function": {"name": "final_answer"}}
    assert to_request(Context((Message(USER, "hi"),)), (final_answer,), "m", tool_choice=forced)["tool_choice"] == forced
    # without native tools there is nothing to choose from, so no tool_choice goes out
    assert "tool_choice" not in to_request(Context((Message(USER, "hi"),)), (final_answer,), "m", native=False,
                                           tool_choice="required")


@pytest.mark.parametrize("setting, problem", [
    ({"max_tokens": 0}, "max_tokens must be a whole number above 0 (or None: the server's limit), not 0"),
    ({"max_tokens": True}, "max_tokens must be a whole number above 0 (or None: the server's limit), not True"),
    ({"tool_choice": 1}, 'tool_choice is "auto", "required", "none" or a dict, as the server takes it, not 1'),
    ({"extra": {"model": "x", "stream": False}}, "extra may not set model, stream: the brain writes those"),
    ({"extra": {"when": object}}, "extra must hold plain JSON values"),
    ({"response_format": "json"}, "response_format is one of json_schema, json_object, or None, not 'json'"),
    ({"response_format": "json_schema"}, "response_format describes a move as JSON text: it goes with native_tools"),
])
def test_settings_for_the_server_that_cannot_work_are_refused_up_front(setting, problem):
    with pytest.raises(ValueError) as e:
        chat_policy("tiny", "http://127.0.0.1:1/v1", **setting)
    assert str(e.value).startswith(problem)


@pytest.mark.parametrize("form", ["json_schema", "json_object"])
def test_json_mode_can_send_the_schema_of_a_move_in_the_form_the_server_takes(stand_in, form):
    server = stand_in(reply('{"tool": "add", "args": {"a": 1, "b": 1}, "reasoning": "sum"}'),
                      reply('{"tool": "final_answer", "args": {"answer": "2"}, "reasoning": "done"}'))
    agent = Agent(chat_policy("tiny", server.url, native_tools=False, response_format=form), [add, final_answer])
    assert agent.answer("1 + 1?") == "2"
    schema = {"anyOf": [
        {"type": "object", "properties": {"tool": {"const": "add"}, "args": add.schema, "reasoning": {"type": "string"}},
         "required": ["tool", "args", "reasoning"], "additionalProperties": False},
        {"type": "object", "properties": {"tool": {"const": "final_answer"}, "args": final_answer.schema,
                                          "reasoning": {"type": "string"}},
         "required": ["tool", "args", "reasoning"], "additionalProperties": False}]}
    expected = ({"type": "json_schema", "json_schema": {"name": "move", "schema": schema}} if form == "json_schema"
                else {"type": "json_object", "schema": schema})
    assert server.requests[0]["response_format"] == expected
    assert "tools" not in server.requests[0]


# --- every reply read honestly ----------------------------------------------------------------

@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_cut_off_by_the_token_limit_is_an_error_note_not_an_answer(stand_in, stream):
    server = stand_in(reply("The refund policy says that", finish="length", usage=(20, 8)), reply("Yes."))
    agent = Agent(chat_policy("tiny", server.url, stream=stream, max_tokens=8), [add, final_answer])
    ctx = agent.run("refund?").context
    # user, assistant (no move: what it wrote so far), tool (the loop's error), assistant, tool
    assert (ctx[1].tool, ctx[1].content) == ("", "The refund policy says that") and ctx[2].error
    assert ctx.last() == Message(TOOL, "Yes.", name="final_answer")
    assert server.requests[1]["messages"][1:] == [
        {"role": "assistant", "content": "The refund policy says that"},
        {"role": "user", "content": "error: your reply was cut off at 8 tokens, before it was whole: "
                                    "write a shorter one"}]


@pytest.mark.parametrize("stream", [True, False])
def test_a_tool_call_cut_off_by_the_token_limit_is_no_move_either(stand_in, stream):
    server = stand_in(reply(calls=[("add", '{"a": 2, "b"')], finish="length", usage=(20, 8)), reply("5"))
    ctx = Agent(chat_policy("tiny", server.url, stream=stream), [add, final_answer]).run("2 + 3?").context
    # user, assistant (no move: nothing in words, the call half written), tool (the loop's error), assistant, tool
    assert (ctx[1].tool, ctx[1].content) == ("", "") and ctx[2].error and ctx.last().content == "5"
    assert server.requests[1]["messages"][-1]["content"].startswith("error: your reply was cut off at 8 tokens")


@pytest.mark.parametrize("stream", [True, False])
def test_an_empty_json_mode_reply_says_what_was_expected(stand_in, stream):
    server = stand_in(reply(None), reply('{"tool": "final_answer", "args": {"answer": "2"}, "reasoning": "ok"}'))
    ctx = Agent(chat_policy("tiny", server.url, stream=stream, native_tools=False), [final_answer]).run("1 + 1?").context
    assert ctx.last().content == "2"
    assert server.requests[1]["messages"][-1] == {
        "role": "user", "content": "error: your reply was empty: reply with one JSON object with a tool: "
                                   '{"tool": ..., "args": {...}, "reasoning": ...}'}


def test_an_answer_in_words_goes_back_as_the_words_the_model_wrote(stand_in):
    server = stand_in(reply("It is 5."), reply("It is 7."))
    agent = Agent(chat_policy("tiny", server.url), [add, final_answer])
    first = agent.run("2 + 3?").context
    agent.run("and 3 + 4?", context=first)
    # user, assistant (its words, not a final_answer call it never made), user
    assert server.requests[1]["messages"] == [
        {"role": "user", "content": "2 + 3?"}, {"role": "assistant", "content": "It is 5."},
        {"role": "user", "content": "and 3 + 4?"}]


def test_a_stream_cut_before_done_is_an_error_and_never_an_answer(stand_in):
    server = stand_in(reply("Good news: your refund is on its way", cut_after=4),
                      reply(calls=[("add", '{"a": 1, "b": 1}')], cut_after=5))
    for _ in range(2):  # cut mid-words, and mid-call
        with pytest.raises(LLMError, match=r"stopped mid-reply: the stream ended before data: \[DONE\], so the reply "
                                           r"may not be whole; try again, or try stream=False"):
            ask(chat_policy("tiny", server.url), (add, final_answer))


def test_an_empty_stream_says_so_and_suggests_stream_false(stand_in):
    server = stand_in(raw("", "text/event-stream"), keep_alives(2, 0.0))
    for _ in range(2):  # nothing at all; only keep-alives
        with pytest.raises(LLMError, match="ended the stream without a reply: the server may not stream this "
                                           "request; try stream=False"):
            ask(chat_policy("tiny", server.url))


# --- server errors say what is wrong ------------------------------------------------------------

def test_a_validation_error_is_not_tried_again_and_its_point_is_shown(stand_in):
    refused = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}]}
    server = stand_in(error(500, null_content(refused)), reply("never asked"))  # what llama.cpp's server says
    with pytest.raises(LLMError) as e:
        ask(chat_policy("tiny", server.url, sleep=instant([])))
    assert len(server.requests) == 1  # a request the server rejects as malformed is rejected every time
    # of the five errors, the four about kinds of message it is not drop out
    assert "(the server said: 5 validation errors; what matters: messages.1.ChatCompletionRequestAssistantMessage." \
           "content: Input should be a valid string)" in str(e.value)
    assert "try again later" not in str(e.value) and "so it was not tried again" in str(e.value)


def test_the_same_server_error_twice_is_not_tried_a_third_time(stand_in):
    server = stand_in(error(500, "bad template"), error(500, "bad template"), reply("never asked"))
    with pytest.raises(LLMError, match=r"HTTP 500, still after 2 tries \(the server said: bad template\): the "
                                       r"server rejects this request as it is"):
        ask(chat_policy("tiny", server.url, retries=5, sleep=instant([])))
    assert len(server.requests) == 2


def test_a_context_that_is_too_long_gets_the_right_hint(stand_in):
    server = stand_in(error(400, "Requested tokens (5000) exceed context window of 2048"))
    with pytest.raises(LLMError) as e:
        ask(chat_policy("tiny", server.url))
    assert "the notebook is longer than the model's context" in str(e.value)
    assert "microagent.memory" in str(e.value) and "native_tools" not in str(e.value)


# --- the key and the wire, under a hostile server -------------------------------------------------

@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_refused_and_the_key_never_reaches_the_other_host(stand_in, status):
    elsewhere = stand_in(reply("I got your key"))
    server = stand_in(moved(status, elsewhere.url + "/chat/completions"))
    with pytest.raises(LLMError) as e:
        ask(chat_policy("tiny", server.url, api_key="sk-secret-key"))
    assert str(e.value).startswith(f"{server.url}/chat/completions redirected the request (HTTP {status}) to "
                                   f"{elsewhere.url}/chat/completions: it was not followed")
    assert elsewhere.requests == [] and elsewhere.headers == []  # nothing went there: no key, no notebook


KEY = "sk-proj-" + "k" * 36  # 44 characters, as OpenAI's keys are


@pytest.mark.parametrize("stream", [True, False])
def test_a_key_in_any_error_text_is_blanked_before_it_is_cut(stand_in, stream):
    cut_through_the_key = "x" * 180 + KEY + " more words"  # the key straddles character 200
    in_a_reply = (raw(f'data: {json.dumps({"error": cut_through_the_key})}\n\n', "text/event-stream") if stream
                  else raw(json.dumps({"error": {"message": cut_through_the_key}}), "application/json"))
    entries = [error(400, cut_through_the_key), error(500, cut_through_the_key), in_a_reply]
    server = stand_in(*entries)
    for _ in entries:
        with pytest.raises(LLMError) as e:
            ask(chat_policy("tiny", server.url, api_key=KEY, stream=stream, retries=0))
        assert "[the key]" in str(e.value)
        assert not any(KEY[i:i + 8] in str(e.value) for i in range(len(KEY) - 8))  # no piece of it either


@pytest.mark.parametrize("key", [KEY + "\n", KEY + " ", "sk-ключ-1234"])
def test_a_malformed_key_is_refused_up_front_without_showing_it(key, monkeypatch):
    monkeypatch.setenv("A_KEY_FROM_DOTENV", key)
    for setting in ({"api_key": key}, {"api_key_env": "A_KEY_FROM_DOTENV"}):
        with pytest.raises(ValueError) as e:
            chat_policy("tiny", "http://127.0.0.1:1/v1", **setting)
        assert "a space, a line break or a character outside plain ASCII" in str(e.value)
        assert key.strip() not in str(e.value) and "1234" not in str(e.value)


DEEP = "[" * 100_000 + "]" * 100_000


def test_json_nested_absurdly_deep_is_an_llm_error_or_an_error_note(stand_in, tmp_path):
    server = stand_in(raw(DEEP, "application/json"), raw(f"data: {DEEP}\n\n", "text/event-stream"),
                      reply('{"tool": "add", "args": ' + DEEP + "}"), reply('{"tool": "final_answer", "args": '
                                                                           '{"answer": "ok"}}'))
    for stream in (False, True):  # a whole reply; a stream line
        with pytest.raises(LLMError, match="sent a reply nested too deeply to read"):
            ask(chat_policy("tiny", server.url, stream=stream))
    ctx = Agent(chat_policy("tiny", server.url, native_tools=False, stream=False), [add, final_answer]).run("?").context
    assert ctx[1].tool == "" and ctx[2].error and ctx.last().content == "ok"  # the model's move: an error note
    for depth in range(900, 1000, 5):  # deep enough to read back, maybe too deep to write out again
        assert read_move('{"tool": "add", "args": ' + "[" * depth + "]" * depth + "}").tool in ("add", "")
    nested = []
    for _ in range(5000):  # an object a server's own parser let through: arguments too deep to write out
        nested = [nested]
    call = to_actions({"tool_calls": [{"function": {"name": "add", "arguments": nested}}]})[0]
    assert call.args == "(arguments nested too deeply to write out)"  # the loop: "not valid JSON", an error note
    path = tmp_path / "deep.jsonl"
    path.write_text('{"tool": "add", "args": ' + DEEP + ', "reasoning": ""}\n')
    with pytest.raises(ValueError, match="deep.jsonl, line 1: not a recorded action"):
        read_actions(path)


def test_cancel_is_heard_while_a_stream_sends_only_pieces_of_a_tool_call(stand_in):
    long_call = json.dumps({"order_id": "A1234" * 200})  # a thousand pieces, 0.05 s apart: 50 s in all
    server = stand_in(reply(calls=[("look_up_order", long_call)], pause=0.05))
    cancel, steps = threading.Event(), []
    start = time.monotonic()
    for step in support_agent(policy=chat_policy("tiny", server.url)).steps(QUESTION, cancel=cancel):
        steps.append(step)
        if isinstance(step.event, Waiting) and step.event.what == "a call to look_up_order":
            cancel.set()
    assert steps[-1].stop == CANCELLED and len(steps[-1].context) == 1  # the question, nothing half decided
    assert time.monotonic() - start < 30  # long before the stream would have ended
    assert server.hung_up.wait(10)


def test_cancel_is_heard_while_a_stream_sends_only_keep_alives(stand_in):
    server = stand_in(keep_alives(1000, 0.05))
    cancel, steps = threading.Event(), []
    for step in Agent(chat_policy("tiny", server.url), [final_answer]).steps("?", cancel=cancel):
        steps.append(step)
        if step.event == Waiting("a keep-alive"):
            cancel.set()
    assert steps[-1].stop == CANCELLED and [s.event for s in steps[:-1]] == [Waiting("a keep-alive")]
    assert server.hung_up.wait(10)


def test_cancel_is_heard_during_a_wait_the_server_asked_for(stand_in):
    server = stand_in(error(429, retry_after="30"), reply("too late"))
    cancel, steps = threading.Event(), []
    start = time.monotonic()
    for step in Agent(chat_policy("tiny", server.url), [final_answer]).steps("?", cancel=cancel):
        steps.append(step)
        if isinstance(step.event, Waiting):
            cancel.set()
    assert steps[-1].stop == CANCELLED and len(server.requests) == 1  # no request after the cancel
    assert time.monotonic() - start < 20  # not the 30 s asked for


@pytest.mark.parametrize("header", ["nan", "-nan", "inf", "-5"])
def test_a_retry_after_that_is_not_a_sane_number_is_not_a_crash(stand_in, header):
    server = stand_in(error(503, retry_after=header), reply("made it"))
    waits = []
    events, actions = ask(chat_policy("tiny", server.url, sleep=instant(waits)))
    assert actions[0].args == '{"answer": "made it"}'
    assert waits == {"nan": [1.0], "-nan": [1.0], "inf": [1.0] * 60, "-5": []}[header]


def test_an_emoji_split_between_two_chunks_arrives_whole_and_can_be_recorded(stand_in, tmp_path):
    server = stand_in(stream_of({"content": "ok \ud83d"}, {"content": "\ude00 done"}),
                      stream_of({"content": "lone \ud83d"}))
    steps = list(Agent(recorded(chat_policy("tiny", server.url), tmp_path / "run.jsonl"), [final_answer]).steps("?"))
    assert "".join(texts(steps)) == "ok 😀 done" and texts(steps)[0] == "ok "  # the half waited for the other
    assert read_actions(tmp_path / "run.jsonl")[0].args == '{"answer": "ok 😀 done"}'
    ctx = Agent(recorded(chat_policy("tiny", server.url), tmp_path / "lone.jsonl"), [final_answer]).run("?").context
    assert ctx.last().content == "lone \ufffd"  # a half with no other half is shown as what it is: broken
    lone = Agent(recorded(scripted(Action("final_answer", {"answer": "half \ud83d"})), tmp_path / "any.jsonl"),
                 [final_answer])
    assert lone.run("?").context.last().content == "half \ud83d"  # any brain's half emoji is written, not a crash
    assert read_actions(tmp_path / "any.jsonl")[0].args == json.dumps({"answer": "half \ud83d"}, ensure_ascii=False)


def test_reading_a_json_move_is_linear_in_the_length_of_the_reply(monkeypatch):
    tries = []
    real = json.JSONDecoder.raw_decode
    monkeypatch.setattr(json.JSONDecoder, "raw_decode", lambda self, s, idx=0: tries.append(idx) or real(self, s, idx))
    for text in ["{" * 400_000, '{"' * 200_000, '{"a": 1} ' * 50_000]:
        tries.clear()
        assert read_move(text).tool == ""
        assert len(tries) <= 50_001 if text.startswith('{"a"') else len(tries) <= 20  # once per object, not per "{"


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_past_the_size_cap_is_refused_not_read_whole(stand_in, stream):
    big = " " * (MAX_REPLY + 10)
    server = stand_in(raw("data: " + big + "\n\n" if stream else big, "text/event-stream" if stream else "text/html"))
    with pytest.raises(LLMError, match=r"sent a reply of more than 8 MiB \(MAX_REPLY\): it was not read"):
        ask(chat_policy("tiny", server.url, stream=stream))


def dripping_line(size: int) -> str:
    """One line of a stream with a chunk of `size` characters of words: a byte at a time, it never ends."""
    return f"data: {json.dumps(chunks({'content': 'x' * size}, None)[1])}\n\n"


@pytest.mark.parametrize("stream", [True, False])
def test_cancel_is_heard_while_a_server_sends_its_reply_a_byte_at_a_time(stand_in, stream):
    # 3,000 bytes, 0.05 s apart: 150 s to the end of the line (or body), far past the timeout of 5 s
    server = stand_in(drip(dripping_line(3000), 0.05, stream=stream))
    cancel, steps = threading.Event(), []
    start = time.monotonic()
    for step in Agent(chat_policy("tiny", server.url, stream=stream, timeout=5), [final_answer]).steps(
            "?", cancel=cancel):
        steps.append(step)
        if isinstance(step.event, Waiting):
            cancel.set()
    assert steps[-1].stop == CANCELLED and len(steps[-1].context) == 1
    assert time.monotonic() - start < 30  # heard between bytes, not at the end of the line
    assert server.hung_up.wait(10)


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_still_coming_at_the_deadline_is_an_llm_error_that_says_so(stand_in, stream):
    server = stand_in(drip(dripping_line(3000), 0.05, stream=stream))
    start = time.monotonic()
    with pytest.raises(LLMError, match="was still sending its reply at the deadline: a reply that may never end"):
        ask(chat_policy("tiny", server.url, stream=stream, timeout=5, deadline=1))
    assert time.monotonic() - start < 30
    with pytest.raises(ValueError, match="deadline must be a number of seconds above 0"):
        chat_policy("tiny", server.url, deadline=0)


@pytest.mark.parametrize("stream", [True, False])
def test_a_key_the_server_echoes_in_a_reply_never_reaches_the_notebook_or_the_events(stand_in, stream):
    echoed = json.dumps({"order_id": "$AUTHORIZATION"})
    server = stand_in(reply("my key is $AUTHORIZATION, see", calls=[("look_up_order", echoed),
                                                                   ("check$AUTHORIZATION", echoed)]),
                      reply("done: $AUTHORIZATION"))
    steps = list(support_agent(policy=chat_policy("tiny", server.url, api_key=KEY, stream=stream)).steps(QUESTION))
    ctx = steps[-1].context
    seen = [repr(s.event) for s in steps] + [ctx.to_json(), story(ctx), json.dumps(server.requests[1])]
    pieces = [KEY[i:i + 8] for i in range(len(KEY) - 8)]
    assert not any(piece in text for text in seen for piece in pieces)  # not whole, not in pieces either
    assert ctx[1].content == "my key is Bearer [the key], see" and ctx[1].args == '{"order_id": "Bearer [the key]"}'
    assert ctx[2].name == "look_up_order" and ctx[3].tool == "checkBearer [the key]" and ctx[4].error
    assert ctx.last().content == "done: Bearer [the key]" and steps[-1].stop == "done"
    if stream:
        assert Waiting("a call to checkBearer [the key]") in [s.event for s in steps]


def test_arguments_nested_too_deeply_give_the_same_actions_streamed_or_whole(stand_in):
    def outcome(stream: bool, depth: int) -> str:
        nested = "[" * depth + "]" * depth
        call = ('"tool_calls":[{"index":0,"id":"c","type":"function","function":{"name":"add","arguments":{"a":'
                + nested + '}}}]')
        body = ('data: {"choices":[{"index":0,"delta":{' + call + '},"finish_reason":"tool_calls"}]}\n\n'
                'data: [DONE]\n\n' if stream else
                '{"choices":[{"index":0,"message":{"role":"assistant","content":null,' + call + '},'
                '"finish_reason":"tool_calls"}]}')
        server = stand_in(raw(body, "text/event-stream" if stream else "application/json"), reply("ok"))
        try:
            ctx = Agent(chat_policy("tiny", server.url, stream=stream), [add, final_answer]).run("?").context
        except LLMError as e:
            return "LLMError: " + str(e).removeprefix(server.url)
        return ctx[2].content  # the error note for the arguments

    # subtle: how deep is too deep depends on the stack at that point, so a band of depths is tried
    outcomes = [(outcome(False, depth), outcome(True, depth)) for depth in range(850, 1000, 3)]
    assert all(whole == streamed for whole, streamed in outcomes), outcomes
    assert any(whole.startswith("error: ") for whole, _ in outcomes), outcomes  # some were read: an error note
    assert any(whole.startswith("LLMError: ") for whole, _ in outcomes), outcomes  # some were too deep to read
    # an object a server's parser let through, too deep to write out: a piece of a stream is read by the
    # same rule as a whole reply's call (before, the stream's piece was a RecursionError, an LLMError)
    nested = []
    for _ in range(5000):
        nested = [nested]
    calls = []
    _add_piece(calls, {}, {"index": 0, "id": "c", "function": {"name": "add", "arguments": nested}}, 0)
    streamed = to_actions({"content": None, "tool_calls": calls})
    assert streamed == to_actions({"tool_calls": [{"function": {"name": "add", "arguments": nested}}]})
    assert streamed[0].args == "(arguments nested too deeply to write out)"  # the loop: an error note


# --- the stand-in speaks like the real servers: an independent client agrees ---------------------

@pytest.mark.parametrize("verbose", [False, True])
@pytest.mark.parametrize("stream", [True, False])
def test_every_reply_and_chunk_of_the_stand_in_passes_the_official_clients_strict_validation(stand_in, stream, verbose):
    from openai.types.chat import ChatCompletion, ChatCompletionChunk  # a dev dependency: an outside oracle
    server = stand_in(*[dict(r, verbose=verbose) for r in office_replies(final_as_words=True)],
                      reply("cut", finish="length", verbose=verbose))
    support_agent(policy=chat_policy("stand-in", server.url, stream=stream)).run(QUESTION)
    ask(chat_policy("stand-in", server.url, stream=stream))
    kind = ChatCompletionChunk if stream else ChatCompletion
    assert len(server.sent) > (20 if stream else 4)
    for sent in server.sent:
        kind.model_validate(sent, strict=True)
    finishes = [c["finish_reason"] for s in server.sent for c in s["choices"] if c.get("finish_reason")]
    assert finishes == ["tool_calls"] * 3 + ["stop", "length"]


@pytest.mark.parametrize("stream", [True, False])
def test_the_four_turn_refund_runs_against_the_stand_in_speaking_like_llama_cpp(stand_in, stream):
    by_rules = support_agent().run(QUESTION).context
    replies = [dict(r, verbose=True) for r in office_replies(final_as_words=False)]
    for r in replies:  # a model that calls tools writes no words with them, as small local models do
        r["message"]["content"] = None
    server = stand_in(*replies)
    ctx = support_agent(policy=chat_policy("stand-in", server.url, stream=stream, tool_choice="required")).run(QUESTION).context
    assert [(m.role, m.tool, m.args) for m in ctx] == [(m.role, m.tool, m.args) for m in by_rules]
    assert all(m["content"] == "" for r in server.requests[1:] for m in r["messages"] if m["role"] == "assistant")


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
    server = stand_in(drip(dripping_line(3000), 0.05))
    done = run_example("--base-url", server.url, "--model", "m", "--deadline", "1")
    assert done.returncode == 1 and "was still sending its reply at the deadline" in done.stderr


# --- against a real model server, when one is given (see the README) -------------------------------

REAL = os.environ.get("MICROAGENT_LLM_URL")  # an OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1
REAL_MODEL = os.environ.get("MICROAGENT_LLM_MODEL", "smollm2")
real_server = pytest.mark.skipif(not REAL, reason="no real model server: set MICROAGENT_LLM_URL (see the README)")
STEPS = ["look_up_order", "check_policy", "issue_refund", "final_answer"]  # the refund, in order


def each_tool_in_turn(**settings):
    """A brain that forces the next tool of the refund each turn (tool_choice), so a small model walks it.

    The next tool is the one after the last that worked: a call that failed (a small model may
    fumble the JSON of its arguments) is asked for again, and the loop's error note says why.
    """
    def policy(ctx, tools):
        turn = STEPS[min(sum(m.is_result and not m.error for m in ctx), len(STEPS) - 1)]
        forced = {"type": "function", "function": {"name": turn}}
        return (yield from chat_policy(REAL_MODEL, REAL, tool_choice=forced, **settings)(ctx, tools))
    return policy


@real_server
@pytest.mark.parametrize("stream", [False, True])
def test_the_refund_office_runs_through_all_four_tools_against_a_real_server(stream):
    steps = list(support_agent(policy=each_tool_in_turn(stream=stream, max_tokens=200, timeout=300)).steps(QUESTION))
    ctx = steps[-1].context
    worked = [m.name for m in ctx if m.is_result and not m.error]
    assert worked == STEPS and steps[-1].stop == "done", story(ctx)  # each of the four tools, once, in order
    assert all(m.content.startswith(("error: the arguments are not valid JSON", "error: bad arguments"))
               for m in ctx if m.error), story(ctx)


@real_server
def test_with_the_schema_of_a_move_every_reply_of_a_real_small_model_is_a_valid_move():
    policy = chat_policy(REAL_MODEL, REAL, native_tools=False, response_format="json_object", max_tokens=200,
                         stream=False, timeout=300)
    ctx = Agent(policy, [look_up_order, check_policy, final_answer], max_steps=4).run(QUESTION).context
    moves = [m for m in ctx if m.is_decision]
    assert moves and all(m.tool in STEPS and not m.error for m in moves), story(ctx)
    assert not any(m.error for m in ctx), story(ctx)


# --- the leanest request ---------------------------------------------------------------------------

@as_tool
def refund(order_id: str, amount: float, note: str = "") -> str:
    """Refund an order to the card it was paid with.

    Args:
        order_id: The order's id,
            like A1234.
        amount (float): How much, in dollars.

    Returns:
        What was refunded.
    """
    return f"${amount:g} refunded"


def test_a_request_for_a_known_notebook_is_exactly_the_golden_one():
    agent = Agent(scripted(Action("refund", {"order_id": "A1234", "amount": 79}, "it qualifies"),
                           Action("", {"problem": "your reply was empty: call one of the tools, or answer in words"}),
                           Action("final_answer", {"answer": "Refunded ½ of it ✓"}, IN_WORDS)),
                  [refund, final_answer], system="You are a support agent.")
    ctx = agent.run("Refund A1234?").context
    golden = Path(__file__).resolve().parent / "golden"
    for native, name in [(True, "request_native.json"), (False, "request_json_mode.json")]:
        sent = encoded(to_request(ctx, agent.tools.values(), "tiny", native=native))
        assert sent == (golden / name).read_bytes(), name  # compact, UTF-8, the notebook last


def test_a_docstring_without_args_is_the_description_whole_and_args_become_parameter_descriptions():
    summary, schema = described(add)
    assert (summary, schema) == ("Add two whole numbers.", add.schema)  # no Args: as it was
    spec = tool_spec(refund)["function"]
    assert spec["description"] == "Refund an order to the card it was paid with."  # no Args:, no Returns:
    assert spec["parameters"]["properties"] == {
        "order_id": {"type": "string", "description": "The order's id, like A1234."},
        "amount": {"type": "number", "description": "How much, in dollars."},
        "note": {"type": "string"}}  # a parameter the docstring does not name has no description
    assert refund.schema["properties"]["amount"] == {"type": "number"}  # the tool's own schema is untouched

    @as_tool
    def odd(x: int) -> str:
        """Args:
        nothing here but a heading, and a name that is not a parameter:
            y: not x
        """
        return ""
    assert described(odd) == (odd.description, odd.schema)  # no summary before it: the docstring, whole


def test_final_answer_goes_out_only_when_a_tool_choice_forces_a_call_every_turn():
    ctx = Context((Message(USER, "hi"),))
    def names(**settings):
        return [s["function"]["name"] for s in to_request(ctx, (add, final_answer), "m", **settings).get("tools", [])]
    assert names() == names(tool_choice="auto") == names(tool_choice="none") == ["add"]
    assert names(tool_choice="required") == ["add", "final_answer"]
    assert names(tool_choice={"type": "function", "function": {"name": "final_answer"}}) == ["add", "final_answer"]
    only_final = to_request(ctx, (final_answer,), "m", tool_choice="auto")
    assert "tools" not in only_final and "tool_choice" not in only_final  # nothing to choose from


moves = st.one_of(
    st.builds(lambda a, b, why: Action("add", {"a": a, "b": b}, why), st.integers(-9, 99), st.integers(), st.text()),
    st.builds(lambda args: Action("add", args), st.text(max_size=12)),  # broken JSON, as a model may write it
    st.builds(lambda name: Action(name, {}), st.sampled_from(["nope", ""])),
    st.builds(lambda words: Action("", {"problem": "your reply was empty: reply"}, words), st.text(max_size=12)),
)


@given(script=st.lists(moves, max_size=6), last=st.sampled_from(["words", "call", "none"]),
       native=st.booleans(), system=st.sampled_from([None, "You add."]))
def test_each_request_starts_with_the_whole_request_before_byte_for_byte(script, last, native, system):
    ending = {"words": [Action("final_answer", {"answer": "done"}, IN_WORDS)],
              "call": [Action("final_answer", {"answer": "done"}, "ok")], "none": []}[last]
    agent = Agent(scripted(*script, *ending), [add, final_answer], system=system, max_steps=len(script) + len(ending))
    ctx = agent.run("add things").context
    # the notebook as it stood at each decision: what each request of the run was made from
    asked = [Context(ctx.messages[:i]) for i, m in enumerate(ctx) if m.is_decision]
    sent = [encoded(to_request(c, (add, final_answer), "m", native=native)) for c in asked]
    for before, now in zip(sent[:-1], sent[1:], strict=True):
        assert now.startswith(before[:-len(b"]}")])  # all but the closing brackets of its messages
    # and asked again with the same notebook, it sends the same bytes
    assert sent == [encoded(to_request(Context.from_json(c.to_json()), (add, final_answer), "m", native=native))
                    for c in asked]


def test_the_refund_run_sends_fewer_bytes_than_any_framework_measured():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import request_size  # benchmarks/request_size.py, which the README quotes
    native = request_size.measure(native=True)
    assert sum(size for size, *_ in native) < 5_656  # LangGraph's run, the smallest of the four measured
    assert all(reused > 0.99 for *_, reused in native[1:])  # each request reuses the one before
