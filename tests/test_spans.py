"""A run as spans (microagent.spans): the tree a traced run writes, the W3C header checked
case for case against OpenTelemetry's own propagator, and the brain's traced seam against
the stand-in model server."""

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import given, settings, strategies as st
from opentelemetry import trace as otel
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from microagent import Action, Agent, Message, Tool, agent_tool, approve, as_tool, final_answer, gate, scripted
from microagent.demo import QUESTION, support_agent
from microagent.llm import LLMError, chat_policy, post
from microagent.spans import Parent, Span, current, parse_traceparent, sending, traced, traceparent, tracing
from microagent.transport import hardened
from microagent.transport.stand_in import raw, reply, serve

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"  # a span in another process
YES = lambda tool, args: True  # noqa: E731  (a human who approves on the spot)


def tree(spans: list[Span]) -> list[str]:
    """The spans as an indented outline, in the order they started: each under its parent."""
    ids = {s.span_id: s for s in spans}

    def depth(s):
        return 0 if s.parent_id not in ids else 1 + depth(ids[s.parent_id])
    return ["  " * depth(s) + s.name + (f" !{s.error}" if s.error else "")
            for s in sorted(spans, key=lambda s: (s.start, -depth(s)))]


def office(record, **more) -> Agent:
    return traced(support_agent(approver=YES), record, **more)


def test_a_run_is_a_span_holding_a_chat_span_per_decision_and_a_span_per_tool_call():
    written = []
    with tracing():
        office(written.append).run(QUESTION)
    assert tree(written) == [
        "invoke_agent support",
        "  chat support_policy", "  execute_tool look_up_order",
        "  chat support_policy", "  execute_tool check_policy",
        "  chat support_policy", "  execute_tool issue_refund",
        "  chat support_policy", "  execute_tool final_answer"]
    run = written[-1]  # written last: when the block ended
    assert run.parent_id is None and {s.trace_id for s in written} == {run.trace_id}
    assert len(run.trace_id) == 32 and len({s.span_id for s in written}) == 9
    assert run.attributes == {"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "microagent",
                              "gen_ai.agent.name": "support"}
    assert written[0].attributes == {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "microagent",
                                     "gen_ai.request.model": "support_policy"}
    assert written[1].attributes == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "look_up_order",
                                     "gen_ai.tool.type": "function"}
    # the run ends with the last span inside it, and nothing inside starts before it
    assert run.end == max(s.end for s in written[:-1]) and run.start <= min(s.start for s in written)
    assert all(s.kind == "internal" and s.error is None and s.flags == 1 for s in written)


def test_a_traced_agent_writes_the_same_notebook_and_outside_a_block_it_writes_nothing():
    written = []
    plain = support_agent(approver=YES).run(QUESTION)
    assert office(written.append).run(QUESTION) == plain and written == []
    with tracing():
        assert office(written.append).run(QUESTION) == plain
    assert len(written) == 9


def test_an_agent_used_as_a_tool_is_a_run_inside_the_call_that_used_it():
    written = []

    @as_tool
    def look_up_order(order_id: str) -> str:
        """Look up an order."""
        return "Wireless Headphones, $79"

    clerk = traced(Agent(scripted(Action("look_up_order", {"order_id": "A1234"}, "look"),
                                  Action("final_answer", {"answer": "$79"}, "report")),
                         [look_up_order, final_answer], name="clerk"), written.append, model="clerk_script")
    boss = traced(Agent(scripted(Action("clerk", {"request": "A1234?"}, "ask the clerk"),
                                 Action("clerk", {"request": "again?"}, "ask again"),
                                 Action("final_answer", {"answer": "done"}, "that's all")),
                        [agent_tool(clerk), final_answer], name="boss"), written.append, model="boss_script")
    with tracing():
        boss.run("what is A1234?")
    assert tree(written) == [
        "invoke_agent boss",
        "  chat boss_script",
        "  execute_tool clerk",
        "    invoke_agent clerk", "      chat clerk_script", "      execute_tool look_up_order",
        "      chat clerk_script", "      execute_tool final_answer",
        "  chat boss_script",
        "  execute_tool clerk",  # asked again: a run of its own, in its own call
        "    invoke_agent clerk", "      chat clerk_script", "      execute_tool look_up_order",
        "      chat clerk_script", "      execute_tool final_answer",
        "  chat boss_script", "  execute_tool final_answer"]
    ids = {s.span_id: s for s in written}
    inner = [s for s in written if s.name == "invoke_agent clerk"]
    assert [ids[s.parent_id].name for s in inner] == ["execute_tool clerk"] * 2
    assert inner[0].span_id != inner[1].span_id


def test_an_agent_that_is_its_own_tool_opens_a_new_run_inside_each_call_of_itself():
    written, me = [], []

    def policy(ctx, tools):  # asked "go", it asks itself "deeper", and answers with what it heard
        if ctx.last().kind == "question" and ctx[0].content == "go":
            return Action("echo", {"request": "deeper"}, "ask myself")
        return Action("final_answer", {"answer": ctx.last().content}, "answer")

    ask = Tool("echo", "Ask echo.", lambda request: agent_tool(me[0]).fn(request=request),
               schema={"type": "object", "properties": {"request": {"type": "string"}}, "required": ["request"]})
    me.append(traced(Agent(policy, [ask, final_answer], name="echo"), written.append, model="m"))
    with tracing():
        assert me[0].run("go").last().content == "deeper"
    assert tree(written) == ["invoke_agent echo", "  chat m", "  execute_tool echo",
                             "    invoke_agent echo", "      chat m", "      execute_tool final_answer",
                             "  chat m", "  execute_tool final_answer"]


def test_an_error_note_or_a_raise_is_an_error_status_and_only_the_errors_type_is_written():
    written = []

    @as_tool
    def charge(card: str) -> str:
        """Charge a card."""
        raise RuntimeError(f"gateway refused card {card} for key sk-secret-123")

    @as_tool
    def refund(order_id: str) -> str:
        """Refund an order."""
        return "refunded"

    # the card is a marker no random id or nanosecond time can hold: letters, not digits
    agent = traced(Agent(scripted(Action("charge", {"card": "CARD-QX"}, "charge it"),
                                  Action("refund", {"order_id": "A1"}, "refund it"),
                                  Action("charge", {"card": ["CARD-QX"]}, "wrong arguments"),
                                  Action("final_answer", {"answer": "sorry"}, "give up")),
                         [charge, gate(refund, lambda tool, args: False), final_answer], name="till"),
                   written.append, model="m")
    with tracing():
        ctx = agent.run("charge me")
    assert [m.error for m in ctx if m.kind == "result"] == [True, True, True, False]
    # the arguments that don't fit never reached the tool: it did not run, so no span
    assert tree(written) == ["invoke_agent till", "  chat m", "  execute_tool charge !RuntimeError",
                             "  chat m", "  execute_tool refund !tool_error", "  chat m", "  chat m",
                             "  execute_tool final_answer"]
    assert "CARD-QX" not in repr(written) and "secret" not in repr(written)


def test_a_brain_that_fails_ends_its_chat_span_and_its_run_with_the_error():
    written = []

    def broken(ctx, tools):
        raise KeyError("the brain's own bug")

    with tracing(), pytest.raises(KeyError):
        traced(Agent(broken, [final_answer], name="a"), written.append).run("hi")
    assert tree(written) == ["invoke_agent a !KeyError", "  chat broken !KeyError"]


def test_two_questions_in_one_block_are_two_runs_and_a_paused_run_resumed_in_it_is_one():
    written = []
    agent = traced(support_agent(), written.append)  # the refund waits for a verdict
    with tracing():
        paused = agent.run(QUESTION)
        agent.run(approve(paused, agent.tools["issue_refund"], by="alice"))
        agent.run("Where is order A1234?")
    runs = [s for s in written if s.name.startswith("invoke_agent")]
    assert len(runs) == 2 and runs[0].parent_id == runs[1].parent_id is None
    first = [s.name for s in written if s.parent_id == runs[0].span_id]
    # the approved refund was carried out between the two halves, inside the one run
    assert first == ["chat support_policy", "execute_tool look_up_order", "chat support_policy",
                     "execute_tool check_policy", "chat support_policy", "execute_tool issue_refund",
                     "chat support_policy", "execute_tool final_answer"]
    assert runs[0].trace_id == runs[1].trace_id  # one block, one trace


def test_a_block_under_a_callers_traceparent_is_its_child_and_a_malformed_one_starts_a_new_trace():
    written = []
    with tracing(CALLER):
        office(written.append).run(QUESTION)
    run = written[-1]
    assert (run.trace_id, run.parent_id, run.remote) == ("4bf92f3577b34da6a3ce929d0e0e4736",
                                                         "00f067aa0ba902b7", True)
    assert all(s.trace_id == run.trace_id and not s.remote for s in written[:-1])
    for bad in ["00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "garbage", "",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"]:
        written.clear()
        with tracing(bad):
            office(written.append).run(QUESTION)
        assert written[-1].parent_id is None and written[-1].trace_id != run.trace_id


def test_flags_a_caller_sent_keep_the_random_bit_and_always_say_sampled():
    for sent, kept in [("00", 0x01), ("01", 0x01), ("02", 0x03), ("03", 0x03), ("fc", 0x01)]:
        written = []
        with tracing(CALLER[:-2] + sent):
            office(written.append).run(QUESTION)
        assert {s.flags for s in written} == {kept}


def test_a_tool_that_calls_out_finds_its_own_span_in_current():
    seen = []

    @as_tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        seen.append(current())
        return "<html>"

    written = []
    agent = traced(Agent(scripted(Action("fetch", {"url": "x"}), Action("final_answer", {"answer": "ok"})),
                         [fetch, final_answer]), written.append)
    agent.run("go")
    assert seen == [None] and current() is None  # not tracing: nothing to tell
    with tracing(CALLER):
        assert current() == CALLER  # no span of ours yet: the caller's, passed on
        agent.run("go")
    tool_span = next(s for s in written if s.name == "execute_tool fetch")
    assert seen[1] == traceparent(tool_span) == f"00-{tool_span.trace_id}-{tool_span.span_id}-01"


def test_runs_in_two_threads_at_once_each_keep_their_own_trace():
    written, lock = [], threading.Lock()

    def record(span):
        with lock:
            written.append(span)

    agent = office(record)

    def run():
        with tracing():
            agent.run(QUESTION)
    with ThreadPoolExecutor(4) as pool:  # four at once
        for done in [pool.submit(run) for _ in range(4)]:
            done.result(timeout=60)
    traces = {s.trace_id for s in written}
    assert len(traces) == 4
    for trace_id in traces:
        assert tree([s for s in written if s.trace_id == trace_id])[0] == "invoke_agent support"


def test_traced_refuses_what_it_cannot_trace():
    with pytest.raises(TypeError, match="Agent or a Tool"):
        traced(lambda ctx, tools: None, [].append)
    with pytest.raises(TypeError, match="where finished spans go"):
        traced(support_agent(), "spans.jsonl")
    for content in ["yes", 0, -5, 2.5]:
        with pytest.raises(TypeError, match="content is True, False, or the characters a text keeps"):
            traced(support_agent(), [].append, content=content)


# --- the words, with content=True ------------------------------------------------------

WORDS = {"input.value", "output.value", "input.mime_type", "gen_ai.input.messages", "gen_ai.output.messages",
         "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"}


def test_with_content_the_run_has_its_question_and_answer_the_chat_its_messages_and_the_tool_its_call():
    written = []

    @as_tool
    def look_up(order_id: str) -> str:
        """Look up an order."""
        return f"{order_id}: delivered"

    agent = traced(Agent(scripted(Action("look_up", {"order_id": "A1"}, "check it"),
                                  Action("final_answer", {"answer": "A1 was delivered."}, "say it")),
                         [look_up, final_answer], name="desk"), written.append, model="m", content=True)
    with tracing():
        agent.run("Where is A1?")
    assert tree(written) == ["invoke_agent desk", "  chat m", "  execute_tool look_up", "  chat m",
                             "  execute_tool final_answer"]
    chat, call, chat2, answer, run = written
    words = {name: {k: v for k, v in s.attributes.items() if k in WORDS} for name, s in
             [("run", run), ("chat", chat), ("call", call), ("chat2", chat2)]}
    assert words["run"] == {
        "input.value": "Where is A1?", "output.value": "A1 was delivered.",
        "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "Where is A1?"}]}]',
        "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "text", "content": "A1 was delivered."}],'
                                  ' "finish_reason": "stop"}]'}
    assert words["chat"] == {
        "gen_ai.input.messages": '[{"role": "user", "parts": [{"type": "text", "content": "Where is A1?"}]}]',
        "gen_ai.output.messages": '[{"role": "assistant", "parts": [{"type": "text", "content": "check it"}, '
                                  '{"type": "tool_call", "name": "look_up", "arguments": "{\\"order_id\\": \\"A1\\"}"}], '
                                  '"finish_reason": "tool_call"}]'}
    assert words["call"] == {"gen_ai.tool.call.arguments": '{"order_id": "A1"}', "input.value": '{"order_id": "A1"}',
                             "input.mime_type": "application/json", "gen_ai.tool.call.result": "A1: delivered",
                             "output.value": "A1: delivered"}
    # the second decision read the whole notebook: the question, the first move, its result
    assert [m["role"] for m in json.loads(words["chat2"]["gen_ai.input.messages"])] == ["user", "assistant", "tool"]
    assert json.loads(words["chat2"]["gen_ai.input.messages"])[2]["parts"] == [
        {"type": "tool_call_response", "response": "A1: delivered"}]


def test_without_content_no_words_are_written_and_a_long_text_is_cut_saying_how_much_was_left_out():
    plain, capped = [], []
    for record, content in [(plain.append, False), (capped.append, 10)]:
        agent = traced(Agent(scripted(Action("final_answer", {"answer": "x" * 25}, "answer")), [final_answer],
                             name="a"), record, content=content)
        with tracing():
            agent.run("y" * 12)
    assert not any(k in WORDS for s in plain for k in s.attributes)
    run = capped[-1]
    assert (run.attributes["input.value"], run.attributes["output.value"]) == (
        "yyyyyyyyyy… [2 more characters left out]", "xxxxxxxxxx… [15 more characters left out]")


def test_with_content_a_secret_never_reaches_a_span():
    # the secrets are markers no random id or nanosecond time can hold: letters
    written = []

    @as_tool
    def call_crm(customer: str, api_key: str) -> str:
        """Ask the CRM about a customer."""
        raise RuntimeError(f"CRM refused key sk-live-QXQXQXQXQX for {customer}")

    agent = traced(Agent(scripted(Action("call_crm", {"customer": "ann", "api_key": "KEYQXQXQX"}, "ask the crm"),
                                  Action("final_answer", {"answer": "use Authorization: Bearer TOKENQXQXQX"}, "x")),
                         [call_crm, final_answer], name="crm"), written.append, content=True)
    with tracing():
        ctx = agent.run("my password=PWQXQXQX, token: TOKQXQXQX; what does the CRM say?")
    # the notebook has them all (the loop wrote the tool's error into it): the spans none
    assert all(s in repr(ctx.messages) for s in ["sk-live-QXQXQXQXQX", "KEYQXQXQX", "PWQXQXQX", "TOKQXQXQX",
                                                  "TOKENQXQXQX"])
    said = " ".join(str(v) for s in written for v in s.attributes.values())
    assert "QXQX" not in said and "[hidden]" in said and "ann" in said
    assert written[1].attributes["gen_ai.tool.call.arguments"] == '{"customer": "ann", "api_key": "[hidden]"}'
    assert written[1].error == "RuntimeError"  # the raise: its type, never its words


def test_with_content_an_llm_brains_key_stays_in_its_header_and_out_of_every_span():
    written = []
    with serve([reply("Hello.", usage=(3, 1))]) as server:
        brain = chat_policy("stand-in", server.url, api_key="sk-QXQXQXQXQX", send=sending(post))
        with tracing():
            traced(Agent(brain, [final_answer], name="a"), written.append, content=True).run("hi")
        assert server.headers[0]["Authorization"] == "Bearer sk-QXQXQXQXQX"  # it was sent, to the model
    said = " ".join(str(v) for s in written for v in s.attributes.values())
    assert "QXQX" not in said and written[-1].attributes["output.value"] == "Hello."


# --- the W3C header, case for case against OpenTelemetry's own propagator ----------------

PROPAGATOR = TraceContextTextMapPropagator()


def otel_reads(header: str):
    """What opentelemetry-api makes of a traceparent: (trace id, span id, flags), or None."""
    found = otel.get_current_span(PROPAGATOR.extract({"traceparent": header})).get_span_context()
    return (f"{found.trace_id:032x}", f"{found.span_id:016x}", int(found.trace_flags)) if found.is_valid else None


def we_read(header: str):
    parent = parse_traceparent(header)
    return None if parent is None else tuple(parent)


T, S = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
CASES = {  # header -> what it holds (None: ignored)
    f"00-{T}-{S}-01": (T, S, 1), f"00-{T}-{S}-00": (T, S, 0), f"00-{T}-{S}-ff": (T, S, 255),
    f"01-{T}-{S}-01": (T, S, 1), f"01-{T}-{S}-01-what-the-future-holds": (T, S, 1),
    f"fe-{T}-{S}-09-": (T, S, 9), f" \t00-{T}-{S}-01 \t": (T, S, 1), f"00-{T}-{S}-01\n": (T, S, 1),
    f"00-{T}-{S}-01-": None, f"00-{T}-{S}-01-extra": None,  # version 00 has four fields, no more
    f"ff-{T}-{S}-01": None, f"00-{'0' * 32}-{S}-01": None, f"00-{T}-{'0' * 16}-01": None,
    f"00-{T.upper()}-{S}-01": None, f"00-{T}-{S.upper()}-01": None, f"0A-{T}-{S}-01": None,
    f"00-{T}-{S}-1": None, f"00-{T[:-1]}-{S}-01": None, f"00-{T}x-{S}-01": None, f"00_{T}_{S}_01": None,
    f"00-{T}-{S}-01\r": None, f"00-{T}-{S}-01\n\n": None, f"\n00-{T}-{S}-01": None,
    f"01-{T}-{S}-01x": None, f"01-{T}-{S}-01-a\nb": None, "": None, "00": None,
    f"00-{T[:-1]}\u0661-{S}-01": None,  # an Arabic-Indic one is a digit to Python, not to W3C
    f"01-{T}-{S}-01-" + "a" * 456: (T, S, 1), f"01-{T}-{S}-01-" + "a" * 457: None,  # 512 characters at most
}


@pytest.mark.parametrize("header", CASES)
def test_the_header_reads_as_w3c_says_and_as_opentelemetry_reads_it(header):
    assert we_read(header) == CASES[header] == otel_reads(header)


def hexes(size):
    return st.text("0123456789abcdef", min_size=size, max_size=size) | st.just("0" * size)


headers = st.builds("{}-{}-{}-{}".format, st.sampled_from(["00", "01", "cc", "fe", "ff"]), hexes(32), hexes(16),
                    hexes(2))
edits = st.lists(st.tuples(st.integers(0, 60), st.sampled_from(["delete", "insert", "replace", "upper"]),
                           st.sampled_from(list("0af-gA_ \t\n\r\u0661"))), max_size=2)


@settings(max_examples=800, deadline=None)
@given(st.sampled_from(["", " ", "\t", "\n"]), headers, edits,
       st.sampled_from(["", "-", "-x", "-ab-cd", " ", "\t", "\n", "\n\n", "\r", "x", " \n", "-a\nb"]))
def test_near_misses_read_as_opentelemetry_reads_them(before, header, edits, after):
    for at, edit, char in edits:  # a character dropped, added, changed, or made upper case
        at = at % (len(header) + 1)
        header = {"delete": header[:at] + header[at + 1:], "insert": header[:at] + char + header[at:],
                  "replace": header[:at] + char + header[at + 1:],
                  "upper": header[:at] + header[at:at + 1].upper() + header[at + 1:]}[edit]
    header = before + header + after
    assert we_read(header) == otel_reads(header)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80) | st.binary(max_size=60).map(lambda b: b.decode("latin-1")))
def test_any_text_reads_as_opentelemetry_reads_it(header):
    assert we_read(header) == otel_reads(header)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 2 ** 128 - 1), st.integers(1, 2 ** 64 - 1), st.integers(0, 255))
def test_the_header_we_send_is_the_one_opentelemetry_sends_and_reads_back(trace_id, span_id, flags):
    theirs = {}
    span = otel.NonRecordingSpan(otel.SpanContext(trace_id, span_id, False, otel.TraceFlags(flags)))
    PROPAGATOR.inject(theirs, otel.set_span_in_context(span))
    ours = traceparent(Parent(f"{trace_id:032x}", f"{span_id:016x}", flags))
    assert ours == theirs["traceparent"]
    assert parse_traceparent(ours) == Parent(f"{trace_id:032x}", f"{span_id:016x}", flags)


# --- the brain's seam: the model server sees each chat span's header; its reply, its tokens --------

def add_tool():
    @as_tool
    def add(a: int, b: int) -> str:
        """Add two numbers."""
        return str(a + b)
    return add


@pytest.mark.parametrize("send", [post, hardened(timeout=10, deadline=30, retries=0)], ids=["post", "hardened"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_each_model_request_carries_its_chat_spans_traceparent_and_the_reply_fills_in_the_tokens(send, stream):
    written = []
    script = [reply(calls=[("add", '{"a": 2, "b": 3}')], usage=(31, 7)), reply("It is 5.", usage=(40, 3))]
    with serve(script) as server:
        brain = chat_policy("stand-in", server.url, send=sending(send), stream=stream)
        agent = traced(Agent(brain, [add_tool(), final_answer], name="calc"), written.append)
        with tracing(CALLER):
            ctx = agent.run("2 + 3?")
        sent = [{k.lower(): v for k, v in h.items()}["traceparent"] for h in server.headers]
    assert ctx.last().content == "It is 5."
    chats = [s for s in written if s.name.startswith("chat")]
    assert sent == [traceparent(s) for s in chats] and all(h.startswith(f"00-{T}-") for h in sent)
    port = int(server.url.split(":")[2].split("/")[0])
    assert [s.attributes for s in chats] == [
        {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "stand-in",
         "server.address": "127.0.0.1", "server.port": port, "gen_ai.usage.input_tokens": used[0],
         "gen_ai.usage.output_tokens": used[1], "gen_ai.response.finish_reasons": [finish]}
        for used, finish in [((31, 7), "tool_calls"), ((40, 3), "stop")]]
    assert [(s.name, s.kind) for s in chats] == [("chat stand-in", "client")] * 2
    assert tree(written) == ["invoke_agent calc", "  chat stand-in", "  execute_tool add", "  chat stand-in",
                             "  execute_tool final_answer"]


def test_outside_a_trace_the_seam_sends_no_traceparent():
    with serve([reply("Hello.")]) as server:
        Agent(chat_policy("stand-in", server.url, send=sending(post)), [final_answer]).run("hi")
        assert not any(k.lower() == "traceparent" for k in server.headers[0])


def test_a_hostile_replys_words_never_reach_a_span_and_its_odd_numbers_are_dropped():
    written = []
    hostile = raw('{"id": "sk-the-key", "model": "sk-the-key", "choices": [{"index": 0, "message": '
                  '{"role": "assistant", "content": "Done."}, "finish_reason": "stop, said sk-the-key"}], '
                  '"usage": {"prompt_tokens": "12", "completion_tokens": 99999999999999999999999}}',
                  "application/json")
    with serve([hostile]) as server:
        brain = chat_policy("stand-in", server.url, api_key="sk-the-key", send=sending(post), stream=False)
        with tracing():
            traced(Agent(brain, [final_answer], name="a"), written.append).run("hi")
    assert "sk-the-key" not in repr(written)
    assert not any(k.startswith(("gen_ai.usage", "gen_ai.response")) for k in written[0].attributes)


def test_a_reply_that_is_not_a_chat_reply_is_the_brains_error_to_tell_not_the_spans():
    written = []
    with serve([raw('{"choices": "not a list"}', "application/json")]) as server:
        agent = traced(Agent(chat_policy("stand-in", server.url, send=sending(post), stream=False),
                             [final_answer], name="a"), written.append)
        with tracing(), pytest.raises(LLMError, match="not well formed"):
            agent.run("hi")
    assert tree(written) == ["invoke_agent a !LLMError", "  chat stand-in !LLMError"]


def test_the_seam_hangs_up_on_the_server_when_the_brain_stops_mid_reply():
    heard = []

    def stop(piece):
        heard.append(piece)
        if len(heard) == 3:
            raise KeyboardInterrupt("the person pressed stop")  # not an Exception: as a user would

    written = []
    with serve([reply("one two three " * 20, pause=0.01)]) as server:
        brain = chat_policy("stand-in", server.url, send=sending(post), on_text=stop)
        agent = traced(Agent(brain, [final_answer], name="a"), written.append)
        with tracing(), pytest.raises(KeyboardInterrupt):
            agent.run("count")
        assert server.hung_up.wait(5)
    assert tree(written) == ["invoke_agent a !KeyboardInterrupt", "  chat stand-in !KeyboardInterrupt"]


def test_a_message_note_a_tool_returns_keeps_its_notes():
    written = []
    inner = Message("tool", "fine", "t", notes=(Message("user", "q"),))

    @as_tool
    def t() -> str:
        """A tool that answers with a whole note."""
        return inner

    agent = traced(Agent(scripted(Action("t"), Action("final_answer", {"answer": "ok"})), [t, final_answer]),
                   written.append)
    with tracing():
        ctx = agent.run("go")
    assert ctx[2].notes == inner.notes
