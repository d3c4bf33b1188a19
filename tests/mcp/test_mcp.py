"""microagent.mcp against MCP peers nobody here wrote, and against peers that go wrong on purpose.

- the client against mcp-server-time (PyPI; it speaks 2026-07-28) and
  @modelcontextprotocol/server-everything (npm; it speaks only 2025-11-25), both real
  subprocesses: list, call, an error result, an unknown tool, other kinds of content, a call
  cancelled mid-way, a timeout, a flood on stderr, a server killed mid-call;
- the client against small servers that die, hang, print garbage, won't stop, leave children
  running, say their key everywhere, or name their tools oddly (tests/mcp/mcp_fakes.py);
- the server (`python -m microagent.mcp`) with the official `mcp` SDK's client in its three
  modes, against hostile lines, and with tools that exit or read stdin;
- the refund office whose order lookup is an MCP server, end to end;
- trace context in params._meta (SEP-414): our client's against a server written with the
  official SDK, and whatever _meta our server is sent (tests/otel/test_otel.py has the spans of
  both ends as one trace).
"""

import io
import json
import os
import pathlib
import re
import signal
import sys
import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mcp_fakes
import mcp_peers
from printed import check_blocks, python_blocks
from microagent import CANCELLED, DONE, Action, Agent, Tool, final_answer, scripted, story
from microagent.demo import QUESTION, support_agent
from microagent.mcp import Connection, McpError, Server, checkable, connect, process, serve
from microagent.mcp.__main__ import main
from microagent.mcp.tools import MAX_RESULT, cut, local_name, reads_as, said
from microagent.mcp.wire import MAX_LINE
from microagent.progress import MAX_MESSAGE, listening, report
from microagent.spans import current, parse_traceparent, traced, traceparent, tracing

TESTS = pathlib.Path(__file__).resolve().parents[1]
ROOT = TESTS.parent  # a server started here imports this folder's microagent
FAKES = [sys.executable, str(TESTS / "mcp" / "mcp_fakes.py")]
OURS = [sys.executable, "-m", "microagent.mcp"]
CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"  # a span in another process


@pytest.fixture(scope="module")
def everything_command():
    found = mcp_peers.everything()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture(scope="module")
def everything(everything_command):
    """One server-everything for the tests that only read from it."""
    with connect(everything_command, name="everything", timeout=10) as server:
        yield server


@pytest.fixture(scope="module")
def clock():
    with connect(mcp_peers.time_server(), name="clock", timeout=20) as server:
        yield server


@pytest.fixture
def quick_stop(monkeypatch):
    """Servers that ignore their stdin's end are stopped after 0.2 s, not 2 s."""
    monkeypatch.setattr(process, "GRACE", 0.2)


def wait_until(condition, seconds=5.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "it never happened"
        time.sleep(0.02)


def running(pid):
    """Whether process `pid` runs (a zombie, dead but not reaped, does not)."""
    try:
        return (pathlib.Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def progress(server, token):
    return [m["params"]["progress"] for m in list(server.heard)
            if m.get("method") == "notifications/progress" and m["params"].get("progressToken") == token]


# -- mcp-server-time: the 2026-07-28 protocol, no handshake -----------------------------

def test_connect_gives_a_connection_and_server_is_its_old_name_kept_for_one_release(clock):
    assert type(clock) is Connection and Server is Connection


def test_the_time_server_speaks_2026_and_its_tools_are_tools_whose_schema_is_its_input_schema(clock):
    assert clock.protocol == "2026-07-28" and clock.info["name"] == "mcp-time"
    tools = clock.tools()
    listed = clock.request("tools/list")["tools"]
    assert [t.name for t in tools] == [t["name"] for t in listed] == ["get_current_time", "convert_time"]
    for tool, spec in zip(tools, listed, strict=True):
        assert isinstance(tool, Tool) and tool.schema == spec["inputSchema"]
        assert tool.description == spec["description"]


def test_the_time_server_answers_a_call_and_a_wrong_time_is_an_error_note(clock):
    convert = clock.tools()[1]
    note = convert.run('{"source_timezone": "UTC", "time": "09:30", "target_timezone": "Asia/Tokyo"}')
    assert not note.error and json.loads(note.content)["time_difference"] == "+9.0h"
    note = convert.run('{"source_timezone": "UTC", "time": "9:30pm", "target_timezone": "Asia/Tokyo"}')
    assert note.error and note.name == "convert_time"
    assert note.content == "error: Error executing tool convert_time: Invalid time format. Expected HH:MM [24-hour format]"
    # arguments that don't fit the inputSchema never leave: the loop's own check refuses them
    assert convert.run('{"time": "09:30"}').content.startswith("error: bad arguments for convert_time: missing")


def test_an_unknown_tool_is_the_servers_json_rpc_error_and_a_note_for_the_brain(clock):
    with pytest.raises(McpError) as raised:
        clock.request("tools/call", {"name": "nope", "arguments": {}})
    assert raised.value.code == -32602 and "Unknown tool: nope" in str(raised.value)
    note = clock.call("nope", {})
    assert note.error and note.content == "error: clock refused tools/call: 'Unknown tool: nope' (JSON-RPC error -32602)"


def test_a_modern_server_slow_to_start_answers_the_given_up_probe_late_and_is_probed_again():
    # mcp-server-time takes about 0.4 s to start: a 0.05 s probe is given up, initialize goes out, and
    # the server (which answered the late probe, and so serves the 2026-07-28 protocol) refuses it, -32022
    with connect(mcp_peers.time_server(), probe=0.05) as server:
        assert server.protocol == "2026-07-28"
        assert list(server.heard)[:3] == [{"id": 1}, {"id": 2}, {"id": 3}]  # late probe, refusal, probe again
        assert [t.name for t in server.tools()] == ["get_current_time", "convert_time"]


# -- server-everything: the handshake's protocol, and everything it does --------------------

def test_everything_falls_back_to_initialize_and_says_its_list_changed_before_it_answers(everything):
    assert everything.protocol == "2025-11-25" and everything.info["name"] == "mcp-servers/everything"
    tools = {t.name: t for t in everything.tools()}
    assert {"get-sum", "trigger-long-running-operation", "echo"} <= set(tools)  # hyphens kept
    heard = list(everything.heard)
    changed = max(i for i, m in enumerate(heard) if m.get("method") == "notifications/tools/list_changed")
    assert changed < len(heard) - 1 and "id" in heard[-1]  # the notification, then the list's answer
    assert not everything.changed  # the list it answered came after the news, so it is current
    assert tools["get-sum"].schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    assert tools["get-sum"].schema["required"] == ["a", "b"]


def test_everything_sums_and_its_unknown_tool_is_an_error_result(everything):
    tools = {t.name: t for t in everything.tools()}
    assert tools["get-sum"].run('{"a": 2, "b": 3}').content == "The sum of 2 and 3 is 5."
    note = everything.call("nope", {})  # server-everything answers isError, not a JSON-RPC error
    assert note.error and note.content == "error: MCP error -32602: Tool nope not found"
    assert tools["echo"].run('{"message": 3}').content == \
        "error: bad arguments for echo: message must be string, not int 3"


def test_blocks_that_are_not_text_are_described_and_a_long_result_is_cut(everything_command):
    with connect(everything_command, name="everything", max_result=1000) as server:
        image = server.call("get-tiny-image", {})
        assert re.fullmatch(r"Here's the image you requested:\n\[an image, image/png, [\d,]+ bytes, not shown\]\n"
                            r"The image above is the MCP logo\.", image)
        links = server.call("get-resource-links", {"count": 2})
        assert "[a link to a resource: Blob Resource 1, demo://resource/dynamic/blob/1]" in links
        echoed = server.call("echo", {"message": "x" * 50_000})
        assert echoed.startswith("Echo: xxx") and len(echoed) < 1100
        assert echoed.endswith("\n[cut: the result was 50,006 characters; only the first 1,000 are above]")


def test_the_server_sees_only_harmless_variables_and_what_you_pass_is_blanked_in_what_it_says(
        everything_command, monkeypatch):
    monkeypatch.setenv("MICROAGENT_TEST_SECRET", "sk-never-reaches-the-server")
    with connect(everything_command, env={"SERVICE_TOKEN": "tok-0123456789"}) as server:
        seen = server.call("get-env", {})
    assert "sk-never-reaches-the-server" not in seen and "MICROAGENT_TEST_SECRET" not in seen
    assert '"SERVICE_TOKEN": "[SERVICE_TOKEN]"' in seen and "tok-0123456789" not in seen


KEY = "sk-live-" + "QZXJ" * 9  # 44 characters


def leaks(text: str) -> bool:
    """Whether any 8 characters in a row of KEY are in `text`."""
    return any(KEY[i:i + 8] in text for i in range(len(KEY) - 7))


def test_a_value_given_with_env_is_blanked_from_all_the_server_says_before_anything_is_cut():
    with connect([*FAKES, "leaky"], name="leaky", env={"SECRET_KEY": KEY}) as server:
        tools = server.tools()
        wait_until(lambda: "ready" in server.stderr())
        said = {"info": json.dumps(server.info), "instructions": server.instructions,
                "descriptions": [t.description for t in tools], "schemas": [t.schema for t in tools],
                "heard": list(server.heard), "not an object": tools[0].run("{}").content,
                "stderr": [server.stderr(most) for most in range(1, 200)]}
        said["garbage"] = tools[1].run("{}").content  # the key across the 200th character of the line
        said["after"] = repr(server)
    assert [what for what, text in said.items() if leaks(json.dumps(text, ensure_ascii=False))] == []
    assert server.instructions == "use [SECRET_KEY]" and server.info["version"] == "[SECRET_KEY]"
    assert tools[0].schema["properties"]["token"] == {"type": "string", "enum": ["[SECRET_KEY]"],
                                                      "description": "say [SECRET_KEY]"}
    assert said["not an object"].endswith("x[SECRET_KEY]\"'")
    assert "not JSON: 'xxx" in said["garbage"] and "x[SECRET_KEY] and more'" in said["garbage"]


def test_a_key_cut_in_two_where_the_kept_tail_of_stderr_begins_is_not_shown(monkeypatch):
    monkeypatch.setattr(process, "TAIL", 130)  # the last 130 bytes: the key's last 22, then 108 more
    with connect([*FAKES, "leaky"], name="leaky", env={"SECRET_KEY": KEY}) as server:
        wait_until(lambda: "ready" in server.stderr())
        assert not leaks(server.stderr(200)) and server.stderr(200).endswith("..... ready\n")


def test_the_agents_cancel_calls_off_a_long_operation_mid_way_and_the_server_keeps_sending_progress(
        everything_command):
    stop = threading.Event()
    with connect(everything_command, name="everything", cancel=stop) as server:
        tools = server.tools()
        long_run = Action("trigger-long-running-operation", {"duration": 3, "steps": 6}, "a long job")
        agent = Agent(scripted(long_run, Action("final_answer", {"answer": "done"})), [*tools, final_answer])
        before_cancel = []

        def cancel_at_step_two():
            wait_until(lambda: any(p >= 2 for m in list(server.heard) if m.get("method") == "notifications/progress"
                                   for p in [m["params"]["progress"]]))
            before_cancel.extend(m for m in list(server.heard) if m.get("method") == "notifications/progress")
            stop.set()
        threading.Thread(target=cancel_at_step_two, daemon=True).start()
        started = time.monotonic()
        ctx = agent.run("run the long job", cancel=stop)  # the same event: the loop and the call
        took = time.monotonic() - started
        assert agent.why_stop(ctx, stop) == CANCELLED and took < 2.5  # the job would take 3 s
        note = ctx.last()  # user, decision, result: the loop heard the cancel between steps
        assert [m.kind for m in ctx] == ["question", "decision", "result"]
        said, got = note.content.split(" (it got as far as ")  # the progress when it was called off
        assert note.error and said == ("error: cancelled: tools/call was called off before "
                                       "everything answered (notifications/cancelled sent)")
        assert got in {"2 of 6)", "3 of 6)", "4 of 6)", "5 of 6)"}  # 2 when the cancel was set, on an idle machine
        token = before_cancel[0]["params"]["progressToken"]
        # server-everything goes on with the job, telling its progress, though asked to stop:
        wait_until(lambda: 6 in progress(server, token), seconds=4)
        assert max(progress(server, token)) > max(m["params"]["progress"] for m in before_cancel)
        time.sleep(0.2)
        assert {"id": token} not in list(server.heard)  # ...and it never answers the call
        stop.clear()
        assert server.call("get-sum", {"a": 1, "b": 1}) == "The sum of 1 and 1 is 2."


def test_a_call_that_takes_too_long_is_called_off_at_its_timeout_and_the_server_goes_on(everything):
    slow = {t.name: t for t in everything.tools(timeout=0.5)}["trigger-long-running-operation"]
    started = time.monotonic()
    note = slow.run('{"duration": 5, "steps": 5}')
    assert time.monotonic() - started < 1.5
    assert note.error and note.content == ("error: everything did not answer tools/call within 0.5 s; it was "
                                           "called off (notifications/cancelled sent). Try again, or give a "
                                           "longer timeout=")
    assert everything.call("get-sum", {"a": 2, "b": 2}) == "The sum of 2 and 2 is 4."


def test_a_long_operations_progress_reaches_whoever_listens_each_step_increasing_to_the_last(everything):
    long_run = {t.name: t for t in everything.tools()}["trigger-long-running-operation"]
    heard = []
    with listening(lambda *said: heard.append(said)):
        note = long_run.run('{"duration": 1, "steps": 4}')
    assert note.content == "Long running operation completed. Duration: 1 seconds, Steps: 4."
    # each step as the server told it, the newest at each look (two within 50 ms are one)
    assert heard[-1] == (4, 4, "") and {done for done, _, _ in heard} <= {1, 2, 3, 4}
    assert [done for done, _, _ in heard] == sorted({done for done, _, _ in heard})


def test_a_call_that_times_out_says_how_far_its_progress_got(everything):
    slow = {t.name: t for t in everything.tools(timeout=1.6)}["trigger-long-running-operation"]
    note = slow.run('{"duration": 8, "steps": 10}')  # a step each 0.8 s: 1 or 2 by the timeout
    said, got = note.content.split(" (it got as far as ")
    assert note.error and said == ("error: everything did not answer tools/call within 1.6 s; it was called off "
                                   "(notifications/cancelled sent). Try again, or give a longer timeout=")
    assert got in {"1 of 10)", "2 of 10)"}


def test_a_server_that_floods_its_stderr_is_drained_and_still_answers(everything_command):
    # 2 MB on stderr before it starts: a pipe nobody read would hold it at 64 KiB, for ever
    flood = [sys.executable, "-c", "import os, sys; sys.stderr.write('x' * 2_000_000 + '\\n'); sys.stderr.flush(); "
             f"os.execv({everything_command[0]!r}, {everything_command!r})"]
    with connect(flood, name="flood", timeout=10) as server:
        assert server.call("get-sum", {"a": 2, "b": 3}) == "The sum of 2 and 3 is 5."
        wait_until(lambda: "Starting default (STDIO) server..." in server.stderr())
        assert len(server._process._tail) <= process.TAIL


def test_a_server_killed_mid_call_gives_a_note_that_names_it_and_quotes_its_last_words(everything_command):
    with connect(everything_command, name="everything") as server:
        def kill_at_first_progress():
            wait_until(lambda: any(m.get("method") == "notifications/progress" for m in list(server.heard)))
            os.kill(server.pid, signal.SIGKILL)
        threading.Thread(target=kill_at_first_progress, daemon=True).start()
        started = time.monotonic()
        note = server.call("trigger-long-running-operation", {"duration": 5, "steps": 10})
        assert time.monotonic() - started < 3
        words = ("error: the MCP server everything was killed by SIGKILL; its stderr ends: "
                 "'Starting default (STDIO) server...'. Connect again to start it anew")
        assert note.error and note.content == words
        assert server.call("get-sum", {"a": 1, "b": 2}).content == words  # at once, the same words
        with pytest.raises(McpError, match="was killed by SIGKILL"):
            server.tools()


def test_a_server_stops_when_its_stdin_closes_and_one_that_wont_is_killed(everything_command, monkeypatch):
    with connect(everything_command) as server:
        pass
    assert server._process.proc.returncode == 0  # server-everything goes when its stdin closes (in 0.4 s)
    monkeypatch.setattr(process, "GRACE", 0.2)
    server = connect([*FAKES, "stubborn"], name="stubborn")
    assert [t.name for t in server.tools()] == ["wait"]
    started = time.monotonic()
    server.close()
    assert server._process.proc.returncode == -signal.SIGKILL and time.monotonic() - started < 1.5
    assert server.call("wait", {}).content == ("error: the connection to the MCP server stubborn was closed; "
                                               "connect again to use it")


needs_proc = pytest.mark.skipif(not pathlib.Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")


@needs_proc
def test_close_stops_what_the_server_started_though_the_server_itself_goes_when_its_stdin_ends():
    server = connect([*FAKES, "parent"], name="parent")
    child = int(server.call("spawn", {}))  # it holds the server's stdout and stderr, and outlives it
    assert running(child)
    server.close()
    assert server._process.proc.returncode == 0  # the server went when its stdin ended...
    assert not running(child)  # ...and its child, in its process group, was stopped with it
    assert not any(thread.is_alive() for thread in server._process.threads)  # so its pipes ended, and our readers


@needs_proc
def test_a_server_that_dies_mid_call_while_its_child_holds_its_stdout_is_gone_not_slow():
    with connect([*FAKES, "parent"], name="parent", timeout=20) as server:
        note = server.call("crash", {})  # it exits; its child keeps its stdout open, so no end comes
        child = re.search(r"child (\d+) left", note.content)
        assert child, note.content  # (it used to wait out its timeout: "did not answer")
        assert note.error and note.content == (f"error: the MCP server parent exited with code 4; its stderr "
                                               f"ends: 'crashing, child {child[1]} left behind'. Connect again "
                                               "to start it anew")
        assert server.call("spawn", {}).content == note.content
    assert not running(int(child[1]))


def test_progress_told_every_wrong_way_is_dropped_and_the_call_still_answers():
    heard = []
    with connect(FAKES + ["progress"], name="progress") as server, \
            listening(lambda *said: heard.append(said)):
        work, = server.tools()
        assert work.run("{}").content == "done"
    last = mcp_fakes.FLOOD + 3
    # another token, a token as text, no token, progress or total not numbers, a step back, and what came
    # after the answer: none of it is heard; what is heard increases, and a long message is cut
    assert heard[-1] == (last, last, "x" * (MAX_MESSAGE - 3) + "...")
    dones = [done for done, _, _ in heard]
    assert dones == sorted(set(dones)) and min(dones) >= 2 and max(dones) == last
    assert {message for _, _, message in heard} <= {"", "flooding", heard[-1][2]}


def test_odd_tools_get_names_and_schemas_tool_takes_and_odd_answers_are_read_or_refused(quick_stop):
    with connect([*FAKES, "odd"], name="odd") as server:
        assert server.protocol == "2025-06-18"
        tools = {t.name: t for t in server.tools()}
        assert list(tools) == ["admin_tools_list", "_2fa"]
        assert server.skipped == [
            "'text-only': its inputSchema is not a JSON Schema of an object: '{\"type\": \"string\"}'",
            "a tool with no name: '{\"description\": \"no name\", \"inputSchema\": {\"type\": \"object\"}}'"]
        assert tools["admin_tools_list"].schema == {"type": "object", "properties": {"x": {}, "y": {}},
                                                    "required": ["x"]}
        assert tools["admin_tools_list"].run("{}").content == \
            "error: bad arguments for admin_tools_list: missing x (it takes: x, y)"
        # mid-call the server asks us something, under the call's own id: we answer it (ping), and
        # do not take its question for the call's answer
        asked = json.loads(tools["admin_tools_list"].run('{"x": [1], "y": "s"}').content)
        assert asked == {"jsonrpc": "2.0", "id": asked["id"], "result": {}}
        garbled = tools["_2fa"].run("{}")
        assert garbled.error and "is not an MCP message" in garbled.content and "given twice" in garbled.content
        assert tools["admin_tools_list"].run('{"x": 1}').content == garbled.content


def test_tool_names_become_names_chat_apis_take_and_none_reads_like_another_or_like_final_answer():
    names = ["météo", "mé téo", "fіnal_answer", "final-answer", "Final_Answer", "ﬁnal_answer", "get-sum",
             "Get_Sum", "a" * 80, "a" * 70, "2fa"]  # a Cyrillic і; a ligature ﬁ
    with connect([*FAKES, "names", json.dumps(names)], name="names") as server:
        tools = server.tools()
        assert [t.name for t in tools] == ["meteo", "me_teo", "f_nal_answer", "get-sum", "Get_Sum_2", "a" * 64,
                                           "a" * 62 + "_2", "_2fa"]
        assert all(re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", t.name) for t in tools)
        assert server.skipped == [f"{name!r}: its name reads like final_answer, the tool that ends a run; give "
                                  "tools(prefix=...) to keep it apart" for name in names[3:6]]
        # each call goes out under the server's own name
        assert [t.run("{}").content for t in tools] == [f"called {n}" for n in names[:3] + names[6:]]
        Agent(scripted(), [*tools, final_answer])  # no two of its tools share a name
        assert [t.name for t in server.tools(prefix="w_")][2:4] == ["w_f_nal_answer", "w_final-answer"]


# -- servers that go wrong at the start -----------------------------------------------

def test_a_server_that_dies_at_the_start_is_named_with_its_last_words_and_what_to_do():
    with pytest.raises(McpError) as raised:
        connect([*FAKES, "dies"], name="dies")
    assert str(raised.value).startswith(
        "the MCP server dies exited with code 3; its stderr ends: 'loading config...; boom: no API key in "
        "MY_SERVICE_KEY'. It never answered server/discover: check the command")
    assert "unless you give env=" in str(raised.value)


def test_a_server_that_hangs_at_the_start_times_out_and_is_stopped(quick_stop):
    started = time.monotonic()
    with pytest.raises(McpError) as raised:
        connect([*FAKES, "silent"], name="silent", timeout=0.5)
    assert time.monotonic() - started < 2.5
    assert str(raised.value) == ("the MCP server silent did not answer initialize within 0.5 s (nor "
                                 "server/discover within 0.5 s); it wrote nothing to stderr. Is it an MCP "
                                 "server over stdio? (some need an argument, such as 'stdio', to speak it)")


def test_a_server_that_prints_garbage_on_stdout_is_refused_and_quoted(quick_stop):
    with pytest.raises(McpError) as raised:
        connect([*FAKES, "garbage"], name="garbage")
    assert str(raised.value) == (
        "the MCP server garbage wrote something on its stdout that is not an MCP message (not JSON: "
        "'Welcome to my server! Listening on stdio.'). A server over stdio writes only JSON-RPC there, its "
        "logs to stderr: check that the command starts an MCP server over stdio, and that nothing it runs prints")


def test_a_program_that_is_not_there_and_arguments_that_are_not_a_command():
    with pytest.raises(McpError, match=r"could not start the MCP server 'no-such-mcp-server-x': .*on the PATH"):
        connect(["no-such-mcp-server-x"])
    with pytest.raises(TypeError, match="a list of strings"):
        connect("npx some-server")
    with pytest.raises(ValueError, match="timeout is a number of seconds"):
        connect(OURS, timeout=0)


# -- our server, with the official SDK's client in its three modes ----------------------

@pytest.mark.parametrize("mode, version", [("legacy", "2025-11-25"), ("auto", "2026-07-28"),
                                           ("2026-07-28", "2026-07-28")])
def test_the_official_sdk_client_uses_the_offices_tools_in_each_of_its_modes(mode, version):
    anyio = pytest.importorskip("anyio")
    sdk = pytest.importorskip("mcp")
    from mcp.client.client import Client
    from mcp.shared.exceptions import MCPError

    async def session():
        async with Client(sdk.StdioServerParameters(command=sys.executable, args=["-m", "microagent.mcp"]),
                          mode=mode) as office:
            assert office.protocol_version == version
            listed = await office.list_tools()
            assert [t.name for t in listed.tools] == ["look_up_order", "check_policy", "issue_refund"]
            assert listed.tools[0].input_schema["properties"] == {"order_id": {"type": "string"}}
            found = await office.call_tool("look_up_order", {"order_id": "A1234"})
            assert not found.is_error
            assert found.content[0].text == "A1234, Wireless Headphones, $79, delivered, reported defective"
            refund = await office.call_tool("issue_refund", {"order_id": "A1234", "amount": 79})
            assert refund.is_error and "needs a human's approval" in refund.content[0].text
            wrong = await office.call_tool("look_up_order", {"order_id": 5})
            assert wrong.is_error and wrong.content[0].text == \
                "bad arguments for look_up_order: order_id must be string, not int 5"
            with pytest.raises(MCPError, match="Unknown tool: 'nope'"):
                await office.call_tool("nope", {})
    anyio.run(session)


def test_the_official_sdk_client_hears_the_progress_a_served_tool_reports():
    anyio = pytest.importorskip("anyio")
    sdk = pytest.importorskip("mcp")
    from mcp.client.client import Client
    heard = []

    async def session():
        async def progressed(done, total, message):
            heard.append((done, total, message))
        office = sdk.StdioServerParameters(command=sys.executable, cwd=str(ROOT),
                                           args=["-m", "microagent.mcp", "tests.mcp.mcp_fakes:copy_files"])
        async with Client(office, mode="legacy") as client:
            found = await client.call_tool("copy_files", {"count": 3}, progress_callback=progressed)
            assert found.content[0].text == "copied 3 files"
            heard.append("answered")
            quiet = await client.call_tool("copy_files", {"count": 2})  # no callback: no token, no progress
            assert quiet.content[0].text == "copied 2 files"
    anyio.run(session)
    assert heard == [(1, 3, "copying file 1"), (2, 3, "copying file 2"), (3, 3, "copying file 3"), "answered"]


def test_progress_reported_in_a_served_tool_reaches_the_listener_of_our_client_in_another_process():
    heard = []
    office = [*OURS, "tests.mcp.mcp_fakes:copy_files"]
    with connect(office, name="office", cwd=str(ROOT)) as server, listening(lambda *said: heard.append(said)):
        copy_files, = server.tools()
        assert copy_files.run('{"count": 3}').content == "copied 3 files"
    assert heard[-1] == (3, 3, "copying file 3")  # and before it, some of 1 and 2 (two within 50 ms are one)
    assert set(heard) <= {(1, 3, "copying file 1"), (2, 3, "copying file 2"), (3, 3, "copying file 3")}


def test_our_server_sends_progress_only_for_a_call_that_gave_a_token_and_under_that_token():
    def work(steps: int) -> str:
        for i in range(1, steps + 1):
            report(i, message="working" if i == 1 else "")
        report(0.5 + steps)
        return "worked"
    tool = Tool("work", "Work a while", work)
    call = {"name": "work", "arguments": {"steps": 2}}
    answers = served(ask(1, "tools/call", {**call, "_meta": {"progressToken": "t-1"}}), tools=[tool])
    assert answers[:3] == [{"jsonrpc": "2.0", "method": "notifications/progress", "params": params} for params in [
        {"progressToken": "t-1", "progress": 1, "message": "working"}, {"progressToken": "t-1", "progress": 2},
        {"progressToken": "t-1", "progress": 2.5}]]
    assert answers[3]["id"] == 1 and answers[3]["result"]["content"] == [{"type": "text", "text": "worked"}]
    for meta in [{}, {"progressToken": True}, {"progressToken": [1]}, {"progressToken": None}]:
        answers = served(ask(2, "tools/call", {**call, "_meta": meta}), tools=[tool])
        assert [answer.get("id") for answer in answers] == [2]  # its answer, and no progress


def test_a_served_tool_whose_progress_steps_back_fails_saying_so():
    def back() -> str:
        report(2)
        report(1)
        return "never"
    answers = served(ask(1, "tools/call", {"name": "back", "arguments": {}, "_meta": {"progressToken": 7}}),
                     tools=[Tool("back", "Step back", back)])
    assert answers[0]["params"] == {"progressToken": 7, "progress": 2}
    assert answers[1]["result"]["isError"] and answers[1]["result"]["content"][0]["text"].startswith(
        "back failed: ValueError: progress must increase: 1 came after 2.")


# -- our server, hostile lines and its own rules ----------------------------------------

def served(*lines: bytes, tools=None) -> list[dict]:
    """What serve() writes for these lines, in-process: each line it writes read back as JSON."""
    out = io.BytesIO()
    serve(list(support_agent().tools.values()) if tools is None else tools, io.BytesIO(b"".join(lines)), out)
    return [json.loads(raw) for raw in out.getvalue().splitlines()]


def ask(id_, method, params=None, version="2026-07-28"):
    params = dict(params or {})
    if version:
        params["_meta"] = {**params.get("_meta", {}), "io.modelcontextprotocol/protocolVersion": version,
                           "io.modelcontextprotocol/clientCapabilities": {}}
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}).encode() + b"\n"


def test_our_server_answers_hostile_lines_with_errors_and_goes_on_serving():
    answers = served(b"not json\n", b"[1, 2]\n", b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}\n',
                     b'{"a": 1, "a": 2}\n', ask(1, "tools/list", version=None), ask(2, "tools/list", version="1999"),
                     ask(3, "resources/list"), ask(4, "tools/call", {"name": "check_policy", "arguments": "x"}),
                     ask(5, "tools/call", {"name": "look_up_order", "arguments": {"order_id": "A1234"}}))
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers[:8]] == [
        (None, -32700), (None, -32600), (None, -32600), (None, -32700), (1, -32602), (2, -32022), (3, -32601),
        (4, -32602)]
    assert answers[5]["error"]["data"] == {"supported": ["2026-07-28"], "requested": "1999"}
    assert "must carry io.modelcontextprotocol/protocolVersion" in answers[4]["error"]["message"]
    assert answers[8] == {"jsonrpc": "2.0", "id": 5, "result": {
        "content": [{"type": "text", "text": "A1234, Wireless Headphones, $79, delivered, reported defective"}],
        "isError": False, "resultType": "complete",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "microagent", "version": "0.1.0"}}}}


def test_json_that_is_no_request_and_a_request_not_of_json_rpc_2_are_invalid_requests():
    batch = b"[" + ask(1, "ping").strip() + b", " + ask(2, "ping").strip() + b"]\n"
    answers = served(b"[1, 2]\n", b"[]\n", b"5\n", b"null\n", b'"ping"\n', batch,
                     b'{"jsonrpc": "1.0", "id": 7, "method": "ping"}\n', b'{"id": 8, "method": "ping"}\n',
                     b'{"jsonrpc": 2, "method": "notifications/initialized"}\n', ask(9, "ping"))
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == [
        *[(None, -32600)] * 6, (7, -32600), (8, -32600), (None, -32600), (9, None)]
    assert answers[5]["error"]["message"].startswith("not a JSON-RPC message (a JSON object): '[{")
    assert answers[5]["error"]["message"].endswith("a batch (an array) is not taken: send each request on a "
                                                   "line of its own")
    assert answers[6]["error"]["message"] == 'this server speaks JSON-RPC 2.0: each request says "jsonrpc": "2.0"'


def test_a_request_that_names_a_handshake_version_in_its_meta_is_refused_until_initialize():
    ran = []
    lookup = Tool("look_up_order", "Look up an order.", lambda order_id: ran.append(order_id) or "found")
    call = {"name": "look_up_order", "arguments": {"order_id": "A1"}}
    answers = served(ask(1, "tools/list", version="2025-11-25"), ask(2, "tools/call", call, version="2025-11-25"),
                     ask(3, "server/discover", version="2025-06-18"), tools=[lookup])
    assert [(a["id"], a["error"]["code"], a["error"]["data"]) for a in answers] == [
        (1, -32022, {"supported": ["2026-07-28"], "requested": "2025-11-25"}),
        (2, -32022, {"supported": ["2026-07-28"], "requested": "2025-11-25"}),
        (3, -32022, {"supported": ["2026-07-28"], "requested": "2025-06-18"})]
    assert answers[0]["error"]["message"] == ("protocol version '2025-11-25' is not spoken here; this server "
                                              "speaks 2026-07-28, and 2024-11-05, 2025-03-26, 2025-06-18, "
                                              "2025-11-25 after initialize")
    assert ran == []


def test_our_server_speaks_the_handshake_after_initialize_and_discover_before_it():
    answers = served(ask(1, "server/discover"), ask(2, "initialize", {"protocolVersion": "2025-06-18"}, None),
                     b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n', ask(3, "tools/list", version=None),
                     ask(4, "ping", version=None))
    assert answers[0]["result"]["supportedVersions"] == ["2026-07-28"] and answers[0]["result"]["ttlMs"] == 0
    assert answers[1]["result"]["protocolVersion"] == "2025-06-18"  # the version asked, as it speaks it
    assert "resultType" not in answers[2]["result"] and len(answers[2]["result"]["tools"]) == 3
    assert answers[3] == {"jsonrpc": "2.0", "id": 4, "result": {}}
    assert len(answers) == 4  # nobody answers a notification


def test_a_line_over_the_limit_is_refused_without_being_read_whole(monkeypatch):
    monkeypatch.setattr("microagent.mcp.server.MAX_LINE", 300)
    answers = served(b'{"x": "' + b"y" * 5000 + b'"}\n', ask(1, "ping"))
    assert answers[0]["error"]["code"] == -32700 and "over" in answers[0]["error"]["message"]
    assert answers[1]["id"] == 1


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=60).map(lambda b: b.replace(b"\n", b"") + b"\n"), max_size=6),
       st.lists(st.sampled_from(["ping", "tools/list", "tools/call", "initialize", "server/discover", "x"]),
                max_size=4))
def test_whatever_it_is_sent_our_server_writes_only_json_rpc_and_never_falls_over(noise, methods):
    lines = [*noise, *(ask(i, m, {"name": "look_up_order", "arguments": {"order_id": "A1"}}) for i, m in
                       enumerate(methods))]
    for answer in served(*lines):
        assert answer["jsonrpc"] == "2.0" and ("result" in answer) != ("error" in answer)


def test_a_tool_that_prints_cannot_break_the_stream_and_a_called_off_call_gets_no_answer():
    office = [*OURS, "tests.mcp.mcp_fakes:noisy", "tests.mcp.mcp_fakes:slow"]
    with connect(office, name="office", cwd=str(ROOT)) as server:
        assert server.call("noisy", {"text": "hello"}) == "said hello"
        wait_until(lambda: "a print in a tool, on stdout hello" in server.stderr())
        before = len(server.heard)
        note = server.call("slow", {"seconds": 0.6}, timeout=0.2)
        assert note.error and "did not answer tools/call within 0.2 s" in note.content
        time.sleep(0.7)
        assert list(server.heard)[before:] == []  # the tool ran to its end, and no answer came
        assert server.call("slow", {"seconds": 0}) == "slept 0"
        server.call("slow", {"seconds": 30}, timeout=0.1)  # still asleep when stdin closes...
        started = time.monotonic()
    assert server._process.proc.returncode == 0 and time.monotonic() - started < 1.8  # ...yet it exits, after LINGER


def test_a_tool_reads_nothing_of_the_mcp_stream_and_one_that_raises_system_exit_is_an_error_not_a_dead_worker():
    office = [*OURS, "tests.mcp.mcp_fakes:child_reads", "tests.mcp.mcp_fakes:asks", "tests.mcp.mcp_fakes:quits"]
    with connect(office, name="office", cwd=str(ROOT), timeout=20) as server:
        # file 0 is /dev/null while it serves: a child process, or input(), reads nothing of ours
        assert server.call("child_reads", {}) == "the child read ''"
        assert server.call("asks", {}).content == "error: asks failed: EOFError: EOF when reading a line"
        # four workers: each SystemExit used to end one for good, and then no call was answered again
        quits = [server.call("quits", {}) for _ in range(6)]
        assert {note.content for note in quits} == {"error: quits failed: SystemExit: 3"}
        assert server.call("child_reads", {}) == "the child read ''"


def test_a_tool_that_needs_approval_is_listed_but_never_run_by_an_mcp_call():
    ran = []
    refund = Tool("issue_refund", "Refund an order.", lambda order_id: ran.append(order_id) or "refunded",
                  needs_approval=True)
    answers = served(ask(1, "tools/list"), ask(2, "tools/call", {"name": "issue_refund",
                                                                 "arguments": {"order_id": "A1"}}),
                     tools=[refund, final_answer])
    assert [t["name"] for t in answers[0]["result"]["tools"]] == ["issue_refund"]  # no final answer
    assert "needs a human's approval in the office" in answers[0]["result"]["tools"][0]["description"]
    assert answers[1]["result"]["isError"] is True and ran == []
    assert answers[1]["result"]["content"][0]["text"].startswith("issue_refund needs a human's approval")


# -- the refund office, its order lookup in another process ----------------------------

@pytest.mark.parametrize("desk", [[*OURS, "microagent.demo:look_up_order"], [*FAKES, "orders"]],
                         ids=["served by microagent.mcp", "served by the official mcp SDK"])
def test_the_refund_office_with_its_order_lookup_over_mcp_tells_the_same_story(desk):
    def yes(tool, args):
        return True
    at_home = support_agent(approver=yes)
    with connect(desk, name="order desk") as orders:
        lookup, = orders.tools()
        office = Agent(at_home.policy, [lookup, *[t for t in at_home.tools.values() if t.name != "look_up_order"]],
                       name="support")
        ctx = office.run(QUESTION)
    assert office.why_stop(ctx) == DONE
    assert story(ctx) == story(at_home.run(QUESTION))
    assert ctx[2].content == "A1234, Wireless Headphones, $79, delivered, reported defective"


# -- invariants of the pieces --------------------------------------------------------

json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                           | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner,
                                                                                     max_size=3), max_leaves=12)
schema_words = st.sampled_from(["type", "enum", "properties", "required", "items", "anyOf", "$ref"])
schemas = st.recursive(json_values, lambda inner: st.dictionaries(schema_words | st.text(max_size=3), inner,
                                                                  max_size=4), max_leaves=15)


@settings(max_examples=300, deadline=None)
@given(schemas, json_values)
def test_any_schema_a_server_sends_is_made_checkable_so_a_call_gets_a_note_never_a_crash(schema, args):
    tool = Tool("t", "a tool", lambda **kw: "ran", schema=checkable(schema))
    note = tool.run(json.dumps(args))
    assert note.content == "ran" or note.error


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.sampled_from(["type", "properties", "required", "items", "enum"]),
                       st.sampled_from(["string", ["a"], {"x": {"type": "string"}}]), max_size=4))
def test_a_well_formed_schema_is_kept_as_it_came(schema):
    well_formed = {"type": "object", "properties": {"x": {"type": "integer", "enum": [1, 2]},
                                                    "y": {"type": "array", "items": {"type": "string"}}},
                   "required": ["x"], "$defs": {"z": schema}, "anyOf": [schema]}
    assert checkable(well_formed) == well_formed


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["content", "structuredContent", "isError"]), json_values),
       st.integers(min_value=1, max_value=50))
def test_any_result_reads_as_text_no_longer_than_its_cap_and_the_note(result, most):
    text = cut(said(result), most)
    assert isinstance(text, str)
    assert len(text) <= most or text.split("\n[cut: ")[0] == said(result)[:most]


@given(st.text(max_size=80), st.sets(st.text(max_size=6), max_size=4))
def test_any_mcp_name_becomes_a_name_chat_apis_and_tool_take_and_reads_like_no_name_taken(name, taken):
    found = local_name(name, taken)
    assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", found)
    assert reads_as(found) not in {reads_as(t) for t in taken}
    Tool(found, "a tool", lambda: "x")  # takes it


@settings(max_examples=60, deadline=None)
@given(st.one_of(json_values, st.sampled_from([CALLER, CALLER[:-2] + "03", "ff" + CALLER[2:], CALLER.upper()])),
       st.booleans())
def test_any_traceparent_a_call_carries_makes_it_a_child_exactly_when_it_is_well_formed(value, modern):
    span = where_served(*calls_with([{"traceparent": value}], "2026-07-28" if modern else None))[0]
    caller = parse_traceparent(value) if isinstance(value, str) else None
    assert span.parent_id == (caller and caller.span_id) and (caller is None or span.trace_id == caller.trace_id)

# -- trace context: a span carried in params._meta.traceparent (SEP-414) ---------------------

def test_a_call_from_a_traced_tool_carries_its_span_and_the_sdks_server_reads_it_as_its_parent():
    written = []
    with connect([*FAKES, "meta"], name="meta desk") as desk:
        heard = traced(desk.tools()[0], written.append)
        outside = json.loads(heard.run("{}").content)  # no block: no span, nothing carried
        with tracing(CALLER):
            inside = json.loads(heard.run("{}").content)
    span, = written
    assert outside["traceparent"] is None and outside["otel"] is None
    # the header is the execute_tool span's, and OpenTelemetry's own code (the SDK's middleware)
    # reads that span as the remote parent of its work
    assert inside["traceparent"] == traceparent(span) and inside["otel"] == [span.trace_id, span.span_id, True]
    assert (span.trace_id, span.parent_id) == ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7")
    # the rest of _meta is as the protocol needs it (its version, the call's progress token)
    assert "io.modelcontextprotocol/protocolVersion" in inside["keys"] and "progress_token" in inside["keys"]


def calls_with(metas: list, version=None, first=0) -> list[bytes]:
    """tools/call lines of ids first, first + 1, ..., each carrying its meta as _meta (with the
    2026-07-28 keys, if `version`)."""
    lines = []
    for i, meta in enumerate(metas, first):
        if version is not None:
            meta = {"io.modelcontextprotocol/protocolVersion": version,
                    "io.modelcontextprotocol/clientCapabilities": {}, **meta}
        lines.append(json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                                 "params": {"name": "where", "arguments": {}, "_meta": meta}}).encode() + b"\n")
    return lines


def where_served(*lines: bytes):
    """Serve, after initialize, a traced tool that answers with its own span's traceparent:
    {call id: the span of that call}, and every answer a tool's result, none an error."""
    written = []
    where = traced(Tool("where", "Say the span it runs in.", lambda: current()), written.append)
    opening = [ask("open", "initialize", {"protocolVersion": "2025-11-25"}, None),
               b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n']
    answers = [a for a in served(*opening, *lines, tools=[where]) if a["id"] != "open"]
    assert len(answers) == len(lines) == len(written) and all(a["result"]["isError"] is False for a in answers)
    by_span = {s.span_id: s for s in written}
    return {a["id"]: by_span[parse_traceparent(a["result"]["content"][0]["text"]).span_id] for a in answers}


def test_a_call_is_a_child_of_the_span_its_meta_names_and_a_meta_of_any_other_shape_is_ignored():
    odd = [CALLER.upper()[:3] + CALLER[3:].upper(), CALLER + "-x", " " * 500 + CALLER, CALLER + "\r\n", ""]
    metas = ["x", None, [CALLER], 7, {"traceparent": 5}, {"traceparent": [CALLER]}, {"traceparent": None},
             *({"traceparent": header} for header in odd), {"Traceparent": CALLER},
             {"traceparent": CALLER}]  # the handshake's protocol: id 13 is the one well formed
    spans = where_served(*calls_with(metas),
                         *calls_with([{"traceparent": {"a": 1}}, {"traceparent": CALLER}], "2026-07-28", first=100))
    children = sorted(i for i, span in spans.items() if span.parent_id is not None)
    assert children == [13, 101]
    for i in children:
        assert (spans[i].trace_id, spans[i].parent_id, spans[i].remote) == ("4bf92f3577b34da6a3ce929d0e0e4736",
                                                                            "00f067aa0ba902b7", True)
    others = [span for i, span in spans.items() if i not in children]
    assert len({span.trace_id for span in others}) == len(others) == 14  # each a new trace of its own
    assert all(span.name == "execute_tool where" and not span.remote for span in others)


def test_a_tool_served_plain_finds_the_callers_header_in_current_to_pass_on():
    plain = Tool("where", "Say the traceparent it runs under.", lambda: str(current()))
    answers = served(*calls_with([{"traceparent": CALLER}, {"traceparent": "garbage"}, {}], version="2026-07-28"),
                     tools=[plain])
    assert [a["result"]["content"][0]["text"] for a in sorted(answers, key=lambda a: a["id"])] == [
        CALLER, "None", "None"]



def test_spans_to_a_file_that_cant_be_written_or_a_collector_with_a_password_are_refused_at_the_start(
        tmp_path, capsys):
    for flags, told in [(["--spans", str(tmp_path / "no" / "spans.jsonl")], "No such file or directory"),
                        (["--collector", "http://me:hunter2@127.0.0.1:4318"], "send credentials in a header"),
                        (["--collector", "127.0.0.1:4318"], "like 'http://127.0.0.1:4318'")]:
        with pytest.raises(SystemExit) as stopped:
            main(["microagent.demo:look_up_order", *flags])
        words = capsys.readouterr().err
        assert stopped.value.code == 2 and told in words and "hunter2" not in words, words
    assert not (tmp_path / "no").exists()

# -- the README's taste -------------------------------------------------------------

def test_the_mcp_readme_runs_as_printed():
    readme = (TESTS.parent / "microagent" / "mcp" / "README.md").read_text()
    assert len(python_blocks(readme)) == 2, "the time server's tools, and the office with its desk over MCP"
    check_blocks(readme, "microagent/mcp/README.md")


def test_the_limits_are_what_the_readme_says():
    readme = (TESTS.parent / "microagent" / "mcp" / "README.md").read_text()
    assert f"{MAX_RESULT:,} characters" in readme and f"{MAX_LINE >> 20} MiB" in readme
