"""The workshop's hardened transport (microagent.transport) against stand-in and hostile servers on 127.0.0.1.

Every test is bounded in time: short timeouts and deadlines, and a bound on how long each failure may take.
"""

import ast
import json
import re
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from microagent.context import Context
from microagent.demo import QUESTION, support_agent
from microagent.llm import LLMError, chat_policy, post
from microagent.message import USER, Message
from microagent.policy import Action
from microagent.saving import to_json
from microagent.tool import final_answer
from microagent.trace import story
import microagent.transport.client as client
from microagent.transport import MAX_REPLY, hardened
from microagent.transport.keys import Key, Pieces
from microagent.transport.stand_in import (chunk, chunked, chunks, drip, error, keep_alives, moved, null_content, raw,
                                           reply, stream_of)

from conftest import KEY, add, yes  # the brain's one tool, its approver and a key, shared with test_llm/test_transport

ROOT = Path(__file__).resolve().parents[2]


def brain(url, *, api_key=None, stream=True, on_text=None, **settings):
    """The book's brain on the hardened transport, with the transport's settings."""
    return chat_policy("tiny", url, api_key=api_key, stream=stream, on_text=on_text, send=hardened(**settings))


def ask(policy, tools=(final_answer,)) -> Action:
    return policy(Context((Message(USER, "hi"),)), {t.name: t for t in tools})


def instant(waits: list):
    """A sleep that only writes down how long it was asked to wait."""
    return waits.append


class Enough(Exception):
    """What a caller raises in on_text to stop the brain."""


def stop_at(n: int, heard: list):
    """An on_text that writes down what it hears, and stops the brain at its n-th call."""
    def on_text(piece):
        heard.append(piece)
        if len(heard) >= n:
            raise Enough
    return on_text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def office_replies() -> list[dict]:
    return [reply("let me pull up the order first", calls=[("look_up_order", '{"order_id": "A1234"}')]),
            reply("now check if it qualifies", calls=[("check_policy", '{"order_id": "A1234"}')]),
            reply("it qualifies", calls=[("issue_refund", '{"order_id": "A1234", "amount": 79}')]),
            reply("Good news, A1234 qualifies. I refunded $79 to your card, here in 3 to 5 days.")]


# --- it plugs in beneath the brain, and changes nothing the brain writes ---------------------------------

@pytest.mark.parametrize("stream", [True, False])
def test_the_refund_office_writes_the_same_notebook_on_either_transport(stand_in, stream):
    plain, strong = stand_in(*office_replies()), stand_in(*office_replies())
    words = {"plain": [], "hardened": []}
    by_post = support_agent(policy=chat_policy("m", plain.url, stream=stream, on_text=words["plain"].append),
                            approver=yes).run(QUESTION)
    by_hardened = support_agent(policy=chat_policy("m", strong.url, stream=stream, on_text=words["hardened"].append,
                                                   send=hardened()), approver=yes).run(QUESTION)
    assert by_hardened == by_post and by_post.last().content.startswith("Good news")
    assert "".join(words["hardened"]) == "".join(words["plain"])  # the same words; more "" (its waits)
    assert strong.requests == plain.requests  # the same bytes asked for
    assert strong.headers[0]["User-Agent"] == "microagent"


def test_the_readme_snippet_plugs_it_in_as_written(stand_in):
    readme = (ROOT / "microagent" / "transport" / "README.md").read_text()
    code = readme.split("```python\n")[1].split("```")[0]
    server = stand_in(reply("Hello there."))
    words = []
    names = {"key": "sk-1", "print": lambda piece, **settings: words.append(piece)}
    exec(compile(code.replace("https://api.openai.com/v1", server.url), "README.md", "exec"), names)
    assert ask(names["brain"]) == Action("final_answer", {"answer": "Hello there."})
    assert "".join(words) == "Hello there." and server.headers[0]["Authorization"] == "Bearer sk-1"


@pytest.mark.parametrize("setting, problem", [
    ({"timeout": 0}, "timeout must be a number of seconds above 0, not 0"),
    ({"timeout": float("inf")}, "timeout must be a number of seconds above 0, not inf"),
    ({"timeout": True}, "timeout must be a number of seconds above 0, not True"),
    ({"deadline": -1}, "deadline must be a number of seconds above 0, not -1"),
    ({"retries": -1}, "retries must be a whole number, 0 or more, not -1"),
    ({"retries": 1.5}, "retries must be a whole number, 0 or more, not 1.5"),
    ({"proxy": "proxy.example:3128"}, 'proxy is "http://host:port" (a proxy that tunnels https), not'),
    ({"proxy": "https://proxy.example:3128"}, 'proxy is "http://host:port"'),
    ({"proxy": "http://proxy.example"}, 'proxy is "http://host:port"'),
])
def test_settings_that_cannot_work_are_refused_when_it_is_made(setting, problem):
    with pytest.raises(ValueError) as e:
        hardened(**setting)
    assert str(e.value).startswith(problem)
    with pytest.raises(TypeError, match="sleep is a function of seconds"):
        hardened(sleep=5)


def test_the_workshop_imports_only_the_books_public_names_and_the_book_nothing_of_it():
    for path in (ROOT / "microagent" / "transport").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("microagent"):
                assert node.module.startswith("microagent.transport") or not any(
                    a.name.startswith("_") for a in node.names), f"{path.name} imports a private name of the book"
    for book in (ROOT / "microagent").glob("*.py"):
        for node in ast.walk(ast.parse(book.read_text())):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                assert not any(n.startswith("microagent.transport") for n in names), book.name


# --- retries: 429 and 5xx, as the server asks, and never for ever -------------------------------------

def test_rate_limits_and_server_errors_are_tried_again_as_the_server_asks(stand_in):
    server = stand_in(error(429, retry_after="7"), error(503), error(502, retry_after="3600"), reply("made it"))
    waits, heard = [], []
    action = ask(brain(server.url, retries=3, sleep=instant(waits), on_text=heard.append))
    # Retry-After; our own backoff (1, 2, 4, ...); a huge ask is capped. Each wait is taken in naps of a
    # second at most, with a wait ({}, which on_text hears as "") before each, so a cancel is heard then
    assert waits == [1.0] * (7 + 2 + 60)
    assert heard.count("") >= 69 and action == Action("final_answer", {"answer": "made it"})
    assert len(server.requests) == 4


def test_retries_are_bounded_then_the_error_is_clear(stand_in):
    server = stand_in(*[error(429, "slow down", retry_after="1")] * 3)
    waits = []
    with pytest.raises(LLMError, match=r"answered HTTP 429 \(the server said: slow down\): the server is rate "
                                       r"limiting: wait, then try again, still after 3 tries$"):
        ask(brain(server.url, retries=2, sleep=instant(waits)))
    assert waits == [1.0, 1.0] and len(server.requests) == 3
    server = stand_in(error(500, "one"), error(500, "two"))
    with pytest.raises(LLMError, match=r"HTTP 500 \(the server said: two\): the server failed: try again later, "
                                       r"still after 2 tries$"):
        ask(brain(server.url, retries=1, sleep=instant([])))
    server = stand_in(error(500), error(429))  # tried once only: no count to give
    for status in (500, 429):
        with pytest.raises(LLMError, match=rf"answered HTTP {status} \(the server said: scripted failure\)") as e:
            ask(brain(server.url, retries=0))
        assert "tries" not in str(e.value)


@pytest.mark.parametrize("status", [400, 401, 404, 422])
def test_a_request_the_server_refuses_is_not_tried_again(stand_in, status):
    server = stand_in(error(status), reply("never asked"))
    with pytest.raises(LLMError, match=f"answered HTTP {status}"):
        ask(brain(server.url, sleep=instant([])))
    assert len(server.requests) == 1


def test_a_validation_error_or_the_same_5xx_twice_is_not_tried_again(stand_in):
    refused = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": None}]}
    server = stand_in(error(500, null_content(refused)), reply("never asked"))  # what llama.cpp's server says
    with pytest.raises(LLMError, match="the server rejects this request as it is, so it was not tried again"):
        ask(brain(server.url, sleep=instant([])))
    assert len(server.requests) == 1
    server = stand_in(error(500, "bad template"), error(500, "bad template"), reply("never asked"))
    with pytest.raises(LLMError, match=r"HTTP 500 \(the server said: bad template\): the server rejects this request "
                                       r"as it is, so it was not tried again: a setting may not suit this server, "
                                       r"still after 2 tries"):
        ask(brain(server.url, retries=5, sleep=instant([])))
    assert len(server.requests) == 2


@pytest.mark.parametrize("header", ["nan", "-nan", "inf", "-5", "Wed, 21 Oct 2015 07:28:00 GMT"])
def test_a_retry_after_that_is_not_a_sane_number_is_not_a_crash(stand_in, header):
    server = stand_in(error(503, retry_after=header), reply("made it"))
    waits = []
    assert ask(brain(server.url, sleep=instant(waits))).args == '{"answer": "made it"}'
    assert waits == {"inf": [1.0] * 60, "-5": []}.get(header, [1.0])


def test_a_cancel_is_heard_during_a_wait_the_server_asked_for(stand_in):
    server = stand_in(error(429, retry_after="30"), reply("too late"))
    start, heard = time.monotonic(), []
    with pytest.raises(Enough):
        ask(brain(server.url, on_text=stop_at(1, heard)))  # the first "" is the first nap's
    assert time.monotonic() - start < 10 and len(server.requests) == 1  # not the 30 s asked for, and no retry


@pytest.mark.parametrize("hint, said", [
    ("the notebook is longer than the model's context: compact it (microagent.memory)",
     "Requested tokens (5000) exceed context window of 2048"),
    ("If the model cannot call tools, try chat_policy(..., native=False)", "tool_choice is not supported by this model"),
    ("If the model cannot call tools, try chat_policy(..., native=False)", "function calling is not available"),
])
def test_what_the_server_said_gives_the_hint_that_fits(stand_in, hint, said):
    server = stand_in(error(400, said), error(422, "bad request"))
    with pytest.raises(LLMError, match=re.escape(hint)):
        ask(brain(server.url))
    with pytest.raises(LLMError) as e:
        ask(brain(server.url))
    assert "native=False" not in str(e.value) and "context" not in str(e.value)


# --- no server can hold the brain: the deadline, the timeout, and a cancel ----------------------------

def test_a_slow_server_is_cut_off_by_the_timeout_which_is_named(stand_in):
    server = stand_in(reply("late", delay=5))
    start = time.monotonic()
    with pytest.raises(LLMError, match=r"took longer than timeout=0.3s to start answering: is the model still"):
        ask(brain(server.url, timeout=0.3, stream=False))
    assert time.monotonic() - start < 4


def test_a_stream_that_stalls_is_cut_off_by_the_timeout_too(stand_in):
    server = stand_in(reply("this will stop half way", stall_after=3))
    with pytest.raises(LLMError, match=r"took longer than timeout=0.3s to send the next piece of the reply"):
        ask(brain(server.url, timeout=0.3))


def dripping_line(size: int) -> str:
    """One line of a stream with a chunk of `size` characters of words: a byte at a time, it never ends."""
    return f"data: {json.dumps(chunks({'content': 'x' * size}, None)[1])}\n\n"


# a server that never lets the reply end: each a way that once held the brain past its deadline
NEVER_ENDING = {
    "a stream a byte at a time": (drip(dripping_line(3000), 0.05), True),
    "a whole body a byte at a time": (drip(dripping_line(3000), 0.05, stream=False), False),
    # http.client reads these itself: the chunk sizes, then the trailer after the last chunk
    "a whole chunked body, then trailer lines for ever": (
        chunked(json.dumps({"choices": [{"message": {"content": "hi"}}]}), "application/json", trailer_every=0.05),
        False),
    "a stream whose chunk sizes drip": (chunked(dripping_line(10), sizes_every=0.01), True),
    "a whole body whose chunk sizes drip": (
        chunked(json.dumps({"choices": [{"message": {"content": "hi"}}]}), "application/json", sizes_every=0.01),
        False),
    "an HTTP 500 whose words come a byte at a time": (error(500, "x" * 3000, every=0.05), True),
}


@pytest.mark.parametrize("name", NEVER_ENDING)
def test_no_server_holds_the_brain_past_its_deadline(stand_in, name):
    entry, stream = NEVER_ENDING[name]
    server = stand_in(entry)
    start = time.monotonic()
    with pytest.raises(LLMError) as e:
        ask(brain(server.url, stream=stream, timeout=5, deadline=1, retries=0))
    assert time.monotonic() - start < 8, name  # the deadline, and a tick or two: not minutes, not hours
    if "500" in name:  # its status is what matters; its words are what came by then
        assert str(e.value).startswith(f"{server.url}/chat/completions answered HTTP 500 (the server said: ")
    else:
        assert "was still sending its reply at the deadline (deadline=1s): a reply that may never end was cut " \
               "off; set max_tokens, or raise the deadline" in str(e.value)
    assert server.hung_up.wait(10)  # and it was hung up on


def test_an_error_page_that_comes_a_byte_at_a_time_is_read_for_seconds_not_until_the_deadline(stand_in, monkeypatch):
    monkeypatch.setattr(client, "ERROR_WORDS", 0.5)  # 5 s in the transport itself: the test need not wait so long
    server = stand_in(error(500, "x" * 3000, every=0.05))  # 150 s for the whole page
    start = time.monotonic()
    with pytest.raises(LLMError, match=r'answered HTTP 500 \(the server said: {"error"'):
        ask(brain(server.url, timeout=30, deadline=60, retries=0))
    assert time.monotonic() - start < 5  # not the deadline's minute, nor the page's two and a half


@pytest.mark.parametrize("name", NEVER_ENDING)
def test_a_cancel_is_heard_whatever_the_server_sends_or_does_not(stand_in, name):
    entry, stream = NEVER_ENDING[name]
    server = stand_in(entry)
    start, heard = time.monotonic(), []
    with pytest.raises(Enough):
        ask(brain(server.url, stream=stream, timeout=30, deadline=60, retries=0, on_text=stop_at(8, heard)))
    assert time.monotonic() - start < 10, name  # a few ticks: the deadline is a minute away
    assert set(heard) == {""}  # nothing came but waits, and each was a chance to stop
    assert server.hung_up.wait(10)


def test_a_cancel_is_heard_while_a_stream_sends_only_keep_alives_or_pieces_of_a_call(stand_in):
    long_call = json.dumps({"order_id": "A1234" * 200})  # a thousand pieces, 0.05 s apart: 50 s in all
    server = stand_in(keep_alives(1000, 0.05), reply(calls=[("look_up_order", long_call)], pause=0.05))
    for _ in range(2):
        start, heard = time.monotonic(), []
        with pytest.raises(Enough):
            ask(brain(server.url, on_text=stop_at(5, heard)), (add, final_answer))
        assert time.monotonic() - start < 10 and set(heard) == {""}
    assert server.hung_up.wait(10)


@pytest.mark.parametrize("stream", [True, False])
def test_a_reply_past_the_size_cap_is_refused_not_read_whole(stand_in, stream):
    big = " " * (MAX_REPLY + 10)
    server = stand_in(raw("data: " + big + "\n\n" if stream else big, "text/event-stream" if stream else "text/html"))
    with pytest.raises(LLMError, match=r"sent a reply of more than 8 MiB \(MAX_REPLY\): it was not read"):
        ask(brain(server.url, stream=stream))


# --- the connection: each failure says what to do ----------------------------------------------------

def test_nobody_listening_asks_whether_the_server_is_running(monkeypatch):
    for name in ("http_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(name, raising=False)
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(LLMError) as e:
        ask(brain(url))
    assert str(e.value) == (f"could not connect to {url}/chat/completions: connection refused. Is the model server "
                            "running, at that address?")


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
            ask(brain(f"http://127.0.0.1:{port}/v1", timeout=0.3))
    finally:
        for s in queued + [listener]:
            s.close()


def test_tls_to_a_plain_http_server_says_check_the_base_url(stand_in):
    server = stand_in(reply("hi"))
    with pytest.raises(LLMError, match=r"could not reach https://.*\(SSLError: .*\): check the base URL"):
        ask(brain(server.url.replace("http://", "https://")))


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
                                           r"\((ConnectionResetError|BrokenPipeError)\): try again"):
            brain(f"http://127.0.0.1:{listener.getsockname()[1]}/v1")(long, {"final_answer": final_answer})
    finally:
        listener.close()


def test_a_server_that_hangs_up_without_answering_is_a_clear_error():
    listener = socket.create_server(("127.0.0.1", 0))

    def hang_up():  # read the request, then close the connection without a word
        conn, _addr = listener.accept()
        conn.recv(65536)
        conn.close()
    threading.Thread(target=hang_up, daemon=True).start()
    try:
        with pytest.raises(LLMError, match="the connection to .* broke before the reply was whole .*: try again"):
            ask(brain(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", stream=False, retries=0))
    finally:
        listener.close()


# --- what comes back is read honestly ----------------------------------------------------------------

@pytest.mark.parametrize("stream", [True, False])
def test_a_server_that_does_not_speak_chat_completions_is_told_apart(stand_in, stream):
    server = stand_in(raw("<html>a web page, not a model</html>"),
                      raw("<html>a web page, not a model</html>", "text/event-stream"))
    for _ in range(2):
        with pytest.raises(LLMError, match="did not answer like a chat completions API: check the base URL"):
            ask(brain(server.url, stream=stream))


def test_an_empty_stream_says_so_and_suggests_stream_false(stand_in):
    server = stand_in(raw("", "text/event-stream"), keep_alives(2, 0.0))
    for _ in range(2):  # nothing at all; only keep-alives
        with pytest.raises(LLMError, match="ended the stream without a reply: the server may not stream this "
                                           "request; try stream=False"):
            ask(brain(server.url))


def test_a_stream_cut_before_done_is_an_error_and_never_an_answer(stand_in):
    server = stand_in(reply("Good news: your refund is on its way", cut_after=4),
                      reply(calls=[("add", '{"a": 1, "b": 1}')], cut_after=5))
    for _ in range(2):  # cut mid-words, and mid-call
        with pytest.raises(LLMError, match=r"stopped mid-reply: the stream ended before data: \[DONE\], so the reply "
                                           r"may not be whole; try again, or stream=False"):
            ask(brain(server.url), (add, final_answer))


DEEP = "[" * 100_000 + "]" * 100_000


def test_json_nested_absurdly_deep_is_an_llm_error(stand_in):
    server = stand_in(raw(DEEP, "application/json"), raw(f"data: {DEEP}\n\n", "text/event-stream"))
    for stream in (False, True):
        with pytest.raises(LLMError, match="sent a reply nested too deeply to read: it is not a chat completion"):
            ask(brain(server.url, stream=stream))


# --- the key: never in an error, an event, or the notebook -----------------------------------------------

def blanked_everywhere(text: str, key: str = KEY) -> bool:
    """No piece of eight characters of the key is in the text: not whole, not in pieces."""
    return not any(key[i:i + 8] in text for i in range(len(key) - 8))


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_says_check_the_key_and_quotes_nothing_of_what_the_server_said(stand_in, status):
    server = stand_in(error(status, f"Incorrect API key provided: {KEY[:3]}...{KEY[-4:]}, see the docs"))
    with pytest.raises(LLMError) as e:
        ask(brain(server.url, api_key=KEY))
    assert str(e.value) == f"{server.url}/chat/completions answered HTTP {status}: check the API key"
    assert len(server.requests) == 1  # a wrong key is not tried again


@pytest.mark.parametrize("stream", [True, False])
def test_a_key_in_any_error_text_is_blanked_before_it_is_cut(stand_in, stream):
    cut_through_the_key = "x" * 280 + KEY + " more words"  # the key straddles character 300, where quotes end
    in_a_reply = (raw(f'data: {json.dumps({"error": cut_through_the_key})}\n\n', "text/event-stream") if stream
                  else raw(json.dumps({"error": {"message": cut_through_the_key}}), "application/json"))
    entries = [error(400, cut_through_the_key), error(500, cut_through_the_key), in_a_reply]
    server = stand_in(*entries)
    for _ in entries:
        with pytest.raises(LLMError) as e:
            ask(brain(server.url, api_key=KEY, stream=stream, retries=0))
        assert "[the key]" in str(e.value) and blanked_everywhere(str(e.value)), str(e.value)


ESCAPED = "ab/cD" + "E" * 20  # a key with a slash, which JSON may write as \/
SLASHED = ESCAPED.replace("/", "\\/")  # ab\/cDEEE...: the key as a JSON text may spell it


@pytest.mark.parametrize("body, content_type, said", [
    # FastAPI's {"detail": ...}, quoting the JSON it was sent: once read, the key is still escaped in it
    (json.dumps({"detail": f'bad request: {{"key": "{SLASHED}"}}'}), "application/json",
     'bad request: {"key": "[the key]"}'),
    (f'upstream said {{"key": "{SLASHED}"}}', "text/plain", 'upstream said {"key": "[the key]"}'),
    ("upstream said " + "".join(f"\\u{ord(c):04X}" for c in ESCAPED), "text/plain", "upstream said [the key]"),
    # the body broken off inside the key: what came of it is not shown either
    (f'{{"error": "{ESCAPED[:12]}', "application/json", '{"error": "'),
])
def test_a_key_the_server_spells_as_json_escapes_it_is_blanked_too(body, content_type, said):
    listener = socket.create_server(("127.0.0.1", 0))

    def answer():  # a 400 with exactly this body, and the connection closed after it
        conn, _addr = listener.accept()
        conn.recv(65536)
        data = body.encode()
        length = len(data) + (100 if body.endswith(ESCAPED[:12]) else 0)  # more than it sends: broken off
        conn.sendall(f"HTTP/1.1 400 Bad Request\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\n"
                     "Connection: close\r\n\r\n".encode() + data)
        time.sleep(0.2)
        conn.close()
    threading.Thread(target=answer, daemon=True).start()
    try:
        with pytest.raises(LLMError) as e:
            ask(brain(f"http://127.0.0.1:{listener.getsockname()[1]}/v1", api_key=ESCAPED, retries=0))
    finally:
        listener.close()
    assert f"answered HTTP 400 (the server said: {said}): " in str(e.value)


@pytest.mark.parametrize("stream", [True, False])
def test_a_key_the_server_echoes_in_a_reply_never_reaches_the_notebook_or_on_text(stand_in, stream):
    echoed = json.dumps({"order_id": "$AUTHORIZATION"})
    server = stand_in(reply("my key is $AUTHORIZATION, see", calls=[("look_up_order", echoed)]),
                      reply(calls=[("check$AUTHORIZATION", echoed)]), reply("done: $AUTHORIZATION"))
    heard = []
    agent = support_agent(policy=brain(server.url, api_key=KEY, stream=stream, on_text=heard.append), approver=yes)
    ctx = agent.run(QUESTION)
    assert all(blanked_everywhere(text) for text in (*heard, to_json(ctx), story(ctx), json.dumps(server.requests)))
    assert ctx[1].content == "my key is Bearer [the key], see" and ctx[1].args == '{"order_id": "Bearer [the key]"}'
    assert ctx[3].tool == "checkBearer [the key]" and ctx[4].error
    assert ctx.last().content == "done: Bearer [the key]" and agent.why_stop(ctx) == "done"


def split_stream(*pieces: str, field: str = "content") -> dict:
    """A stream whose words (or a call's arguments) come in exactly these pieces."""
    if field == "content":
        return stream_of(*({"content": p} for p in pieces))
    first = {"index": 0, "id": "c1", "type": "function", "function": {"name": "add", "arguments": pieces[0]}}
    return stream_of({"tool_calls": [first]}, *({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}
                                                for p in pieces[1:]))


@pytest.mark.parametrize("at", [1, 5, 20, 43])
def test_a_key_split_across_streamed_chunks_is_held_back_until_it_can_be_blanked(stand_in, at):
    server = stand_in(split_stream("my key is " + KEY[:at], KEY[at:] + ", see"),
                      split_stream('{"a": 1, "b": "' + KEY[:at], KEY[at:] + '"}', field="arguments"))
    heard = []
    assert ask(brain(server.url, api_key=KEY, on_text=heard.append)).args == json.dumps(
        {"answer": "my key is [the key], see"})
    assert [piece for piece in heard if piece] == ["my key is ", "[the key], see"]  # its start waited for the rest
    assert ask(brain(server.url, api_key=KEY), (add, final_answer)).args == '{"a": 1, "b": "[the key]"}'


def test_an_emoji_split_between_two_chunks_arrives_whole(stand_in):
    server = stand_in(stream_of({"content": "ok \ud83d"}, {"content": "\ude00 done"}), stream_of({"content": "lone \ud83d"}),
                      raw(json.dumps({"choices": [{"message": {"content": "lone \ud83d"}}]}), "application/json"))
    heard = []
    assert ask(brain(server.url, on_text=heard.append)).args == json.dumps({"answer": "ok 😀 done"}, ensure_ascii=False)
    assert [p for p in heard if p] == ["ok ", "😀 done"]  # the half waited for its other half
    assert ask(brain(server.url)).args == json.dumps({"answer": "lone \ufffd"}, ensure_ascii=False)
    assert ask(brain(server.url, stream=False)).args == json.dumps({"answer": "lone \ufffd"}, ensure_ascii=False)


@settings(max_examples=200, deadline=None)
@given(before=st.text('xs -/\\"ab', max_size=12), after=st.text('xs -/\\"ab', max_size=12), times=st.integers(0, 2),
       spelling=st.sampled_from(["as is", "escaped"]), cuts=st.lists(st.integers(0, 200), max_size=8))
def test_any_split_of_a_stream_gives_the_same_words_and_never_a_piece_of_the_key(before, after, times, spelling, cuts):
    key = "sk-a/b" + "c" * 10
    spelled = key if spelling == "as is" else json.dumps(key)[1:-1].replace("/", "\\/")
    text = before + spelled * times + after
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    pieces, shown = Pieces(Key(key)), []
    for start, end in zip(bounds[:-1], bounds[1:], strict=True):
        out = pieces.chunk({"choices": [{"index": 0, "delta": {"content": text[start:end]}}]})
        shown.append(out["choices"][0]["delta"]["content"])
    shown += [c["choices"][0]["delta"]["content"] for c in pieces.rest()]
    assert "".join(shown) == Key(key).blanked(text)  # any split: the same words as the whole
    assert "k" not in "".join(shown).replace("[the key]", "")  # the key's "k" is nowhere else: none of it shows


def test_a_key_is_found_however_json_spells_it_and_only_then():
    key = Key('ab/c"d\\e')
    for spelled in ['ab/c"d\\e', 'ab\\/c\\"d\\\\e', "\\u0061\\u0062\\u002F\\u0063\\u0022d\\u005ce"]:
        assert key.blanked(f"<{spelled}>") == "<[the key]>", spelled
    assert key.blanked("ab/c") == "ab/c" and key.begun("x ab\\/c\\") == 6 and key.begun("x ab/x") == 0
    assert Key(None).blanked("anything") == "anything" and Key(None).begun("anything") == 0
    assert key.everywhere({'ab/c"d\\e': ['ab/c"d\\e', 7, None]}) == {"[the key]": ["[the key]", 7, None]}


# --- proxies: the key and the notebook never cross one in clear --------------------------------------------

@pytest.mark.parametrize("variable", ["http_proxy", "HTTP_PROXY", "all_proxy"])
def test_a_proxy_in_the_environment_is_not_used_and_an_error_says_it_is_set(stand_in, monkeypatch, variable):
    proxy, server = stand_in(reply("I am the proxy, and I read your key")), stand_in(reply("It is 5."))
    monkeypatch.setenv(variable, proxy.url.removesuffix("/v1"))
    for name in ("no_proxy", "NO_PROXY"):  # not even for 127.0.0.1
        monkeypatch.delenv(name, raising=False)
    assert ask(brain(server.url, api_key=KEY)).args == '{"answer": "It is 5."}'
    assert proxy.requests == [] and server.headers[0]["Authorization"] == f"Bearer {KEY}"
    if variable != "all_proxy":
        with pytest.raises(LLMError, match=r"connection refused\. Is the model server running, at that address\? "
                                           r"\(\$http_proxy is set, and not used: the key goes only to base_url; "
                                           r"hardened\(proxy=\.\.\.\) goes through a proxy\)"):
            ask(brain(f"http://127.0.0.1:{free_port()}/v1"))


def test_an_http_base_url_is_never_sent_through_a_proxy(stand_in):
    proxy = stand_in(reply("I am the proxy"))
    with pytest.raises(LLMError, match=r"is http://: the proxy 127\.0\.0\.1:\d+ would read the key and every notebook "
                                       r"in clear, so it is not sent; use an https:// base URL, or no proxy"):
        ask(brain("http://127.0.0.1:1/v1", api_key=KEY, proxy=proxy.url.removesuffix("/v1")))
    assert proxy.requests == []


class Tunnel:
    """A CONNECT proxy on 127.0.0.1 that keeps every byte a client sends it, and carries them on."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url, self.seen = f"http://127.0.0.1:{self.listener.getsockname()[1]}", bytearray()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                client, _addr = self.listener.accept()
            except OSError:  # closed
                return
            head = b""
            while b"\r\n\r\n" not in head and (data := client.recv(4096)):
                head += data
            self.seen += head
            host, port = head.split()[1].decode().rsplit(":", 1)
            upstream = socket.create_connection((host, int(port)))
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            threading.Thread(target=self.carry, args=(upstream, client, False), daemon=True).start()
            self.carry(client, upstream, True)

    def carry(self, source, sink, keep):
        try:
            while data := source.recv(65536):
                if keep:
                    self.seen += data
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                s.close()

    def close(self):
        self.listener.close()


@pytest.fixture
def certificate(tmp_path, monkeypatch):
    """A self-signed certificate for 127.0.0.1, which this test's TLS clients trust (SSL_CERT_FILE)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl makes the test's certificate")
    pem = tmp_path / "stand-in.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(pem), "-out", str(tmp_path / "cert.pem")],
                   check=True, capture_output=True, timeout=60)
    pem.write_text(pem.read_text() + (tmp_path / "cert.pem").read_text())
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "cert.pem"))
    return str(pem)


def test_asked_for_a_proxy_it_tunnels_to_an_https_base_url_and_the_proxy_never_sees_the_key(stand_in, certificate):
    server = stand_in(reply("It is 5, through the tunnel."), certificate=certificate)
    assert server.url.startswith("https://127.0.0.1:")
    tunnel = Tunnel()
    try:
        words = []
        policy = chat_policy("tiny", server.url, api_key=KEY, system="a secret instruction", on_text=words.append,
                             send=hardened(proxy=tunnel.url, timeout=10, deadline=30))
        assert ask(policy).args == '{"answer": "It is 5, through the tunnel."}'
    finally:
        tunnel.close()
    port = server.url.split(":")[2].split("/")[0]
    assert bytes(tunnel.seen).startswith(f"CONNECT 127.0.0.1:{port} HTTP/1.".encode())  # it went through the proxy
    assert KEY.encode() not in tunnel.seen and b"secret instruction" not in tunnel.seen  # and saw neither
    assert server.headers[0]["Authorization"] == f"Bearer {KEY}"  # which reached the server, over TLS
    assert "".join(words) == "It is 5, through the tunnel."


def test_a_redirect_is_not_followed_and_says_where_it_pointed(stand_in):
    elsewhere = stand_in(reply("I got your key"))
    server = stand_in(moved(302, elsewhere.url + "/chat/completions?key=" + KEY))
    with pytest.raises(LLMError) as e:
        ask(brain(server.url, api_key=KEY))
    assert str(e.value) == (f"{server.url}/chat/completions answered HTTP 302 (the server said: go to "
                            f"{elsewhere.url}/chat/completions?key=[the key]): it was not followed, since the key and "
                            "the notebook go only to base_url: if the new address is right, make it the base_url")
    assert elsewhere.requests == [] and len(server.requests) == 1


def test_the_stand_in_sends_trailers_and_drips_as_it_says(stand_in):
    # the hostile servers above are what they claim: a plain reader is held by them (post has no deadline)
    server = stand_in(chunked(json.dumps({"choices": [{"message": {"content": "hi"}}]}), "application/json",
                              trailer_every=0.05))
    replies = post(server.url + "/chat/completions", b"{}", {}, timeout=1)
    done = threading.Event()

    def read():
        try:
            next(replies)
        except LLMError:
            pass
        done.set()
    threading.Thread(target=read, daemon=True).start()
    assert not done.wait(2.5)  # still reading trailers, each well within its timeout
    server.close()  # which ends them
    assert done.wait(10)
    assert chunk({"content": "x"})["choices"][0]["delta"] == {"content": "x"}
