"""The workshop's export (microagent.otel), read back by OpenTelemetry's own code, and one
trace carried through the host (a hosted refund with a model call and an approval is one
trace across its two HTTP requests) and through MCP (an office whose order lookup is served
by `python -m microagent.mcp --spans` is one trace across the two processes).

Every line written is read by opentelemetry-proto-json (`TracesData.from_json`) and must
come back out exactly as it went in, so no field is misnamed or mis-encoded (a reader
ignores a field it does not know). The collector is a real HTTP server on 127.0.0.1; the
model is the stand-in model server; the host is a real server on a free port; the MCP
server is a subprocess, and its other client the official `mcp` SDK's.
"""

import base64
import gzip
import http.client
import http.server
import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from google.protobuf.json_format import MessageToDict
from hypothesis import given, settings, strategies as st
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto_json.collector.trace.v1.trace_service import ExportTraceServiceRequest
from opentelemetry.proto_json.trace.v1.trace import Span as OtelSpan, Status, TracesData

from host_offices import events
from microagent import Action, Agent, Tool, final_answer, scripted
from microagent.team import agent_tool
from microagent.demo import QUESTION, support_agent
from microagent.host import Server, refund_office
from microagent.llm import chat_policy
from microagent.mcp import connect
from microagent.otel import Exporter, encode, traces_data
from microagent.spans import sending, traced, tracing
from microagent.transport import hardened
from microagent.transport.stand_in import reply, serve

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
YES = lambda tool, args: True  # noqa: E731


def read_back(lines: list[str], service: str = "microagent") -> list[OtelSpan]:
    """Every span in OTLP JSON lines, as OpenTelemetry reads them; each line must come back
    out of its reader exactly as it went in."""
    spans = []
    for line in lines:
        data = TracesData.from_json(line)
        assert data.to_dict() == json.loads(line), "a field OpenTelemetry does not read as we wrote it"
        [resource] = data.resource_spans
        assert {(a.key, a.value.string_value) for a in resource.resource.attributes} == {("service.name",
                                                                                            service)}
        [scoped] = resource.scope_spans
        assert scoped.scope.name == "microagent.spans"
        spans += scoped.spans
    for s in spans:
        assert len(s.trace_id) == 16 and len(s.span_id) == 8 and len(s.parent_span_id) in (0, 8)
        assert 0 < s.start_time_unix_nano <= s.end_time_unix_nano
    return spans


def outline(spans: list[OtelSpan]) -> list[str]:
    """Each span under its parent, as read back: its name, kind, and an error's word."""
    ids = {s.span_id: s for s in spans}

    def depth(s):
        return 0 if s.parent_span_id not in ids else 1 + depth(ids[s.parent_span_id])

    def said(s):
        kind = {1: "", 3: " (client)"}[s.kind]
        return kind + (f" !{s.status.message}" if s.status and s.status.code == Status.StatusCode.STATUS_CODE_ERROR
                       else "")
    return ["  " * depth(s) + s.name + said(s) for s in sorted(spans, key=lambda s: (s.start_time_unix_nano,
                                                                                      -depth(s)))]


def attributes(span: OtelSpan) -> dict:
    out = {}
    for a in span.attributes:
        v = a.value
        out[a.key] = (v.string_value if v.string_value is not None else v.int_value if v.int_value is not None
                      else [x.string_value for x in v.array_value.values])
    return out


def test_each_trace_is_one_line_that_opentelemetry_reads_back_with_its_parents_and_children(tmp_path):
    path = tmp_path / "spans.jsonl"
    exporter = Exporter(str(path))
    agent = traced(support_agent(approver=YES), exporter)
    with tracing(f"00-{TRACE}-00f067aa0ba902b7-01"):
        agent.run(QUESTION)
    with tracing():
        agent.run("Can I get a refund for order B1?")
    lines = path.read_text().splitlines()
    assert len(lines) == 2  # one flush a trace: its outermost span ended
    first, second = read_back(lines[:1]), read_back(lines[1:])
    assert outline(first) == [
        "invoke_agent support",
        "  chat support_policy", "  execute_tool look_up_order", "  chat support_policy",
        "  execute_tool check_policy", "  chat support_policy", "  execute_tool issue_refund",
        "  chat support_policy", "  execute_tool final_answer"]
    run = first[-1]
    assert (run.trace_id.hex(), run.parent_span_id.hex()) == (TRACE, "00f067aa0ba902b7")
    assert run.flags == 0x301  # sampled; its parent is remote, and that is known
    assert {s.trace_id for s in first} == {run.trace_id} and all(s.flags == 0x101 for s in first[:-1])
    assert {s.parent_span_id for s in first[:-1]} == {run.span_id}
    assert attributes(run) == {"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "microagent",
                               "gen_ai.agent.name": "support"}
    assert second[-1].parent_span_id == b"" and second[-1].trace_id != run.trace_id
    assert [s.kind for s in first] == [OtelSpan.SpanKind.SPAN_KIND_INTERNAL] * 9


def test_an_error_status_and_a_list_attribute_read_back_as_opentelemetry_has_them(tmp_path):
    written = []
    with serve([reply(calls=[("look_up_order", '{"order_id": "A1234"}')], usage=(11, 2)),
                reply("Sorry.", usage=(12, 3))]) as model:
        brain = chat_policy("stand-in", model.url, send=sending(hardened(retries=0)))
        agent = traced(support_agent(brain), written.append)
        with tracing():
            agent.run(QUESTION)
    written[1].error = "RuntimeError"  # as a tool that raised writes it
    [span] = read_back([json.dumps(traces_data([written[1]]))])
    assert (span.status.code, span.status.message) == (Status.StatusCode.STATUS_CODE_ERROR, "RuntimeError")
    assert attributes(span)["error.type"] == "RuntimeError"  # the GenAI conventions require it on an error
    assert "error.type" not in written[1].attributes  # added on the wire; the span itself is as it was
    [chat] = read_back([json.dumps(traces_data([written[0]]))])
    assert chat.kind == OtelSpan.SpanKind.SPAN_KIND_CLIENT
    assert attributes(chat)["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert (attributes(chat)["gen_ai.usage.input_tokens"], attributes(chat)["gen_ai.usage.output_tokens"]) == (11, 2)


# --- a collector on 127.0.0.1 ----------------------------------------------------------

class Collector:
    """A real HTTP server that takes OTLP POSTs and answers as it is told; posts keep each body
    as sent (gzipped or not), and gzip=False answers a gzipped one 415, as a server that takes
    no gzip does."""

    def __init__(self, status=200, said=b"{}", location=None, stall: float = 0.0, trickle: float = 0.0,
                 gzip=True):
        self.posts, self.stop = [], threading.Event()
        outer, takes_gzip = self, gzip

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.posts.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if self.headers.get("Content-Encoding") == "gzip" and not takes_gzip:
                    self.send_response(415)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                outer.stop.wait(stall)
                if trickle:  # its whole answer a byte at a time, each well within any read timeout
                    for byte in b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}":
                        if outer.stop.wait(trickle):
                            return
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    return
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(said)))
                if location:
                    self.send_header("Location", location)
                self.end_headers()
                self.wfile.write(said)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()

    def close(self):
        self.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def collector():
    made = []

    def make(**how):
        made.append(Collector(**how))
        return made[-1]
    yield make
    for c in made:
        c.close()


def test_each_trace_is_posted_to_the_collectors_v1_traces_as_the_line_in_the_file(tmp_path, collector):
    at = collector()
    path, told = tmp_path / "spans.jsonl", []
    exporter = Exporter(str(path), url=at.url, protocol="http/json", compression=None,
                        headers={"x-api-key": "k-123"}, report=told.append)
    with tracing():
        traced(support_agent(approver=YES), exporter).run(QUESTION)
    [(where, headers, body)] = at.posts
    assert where == "/v1/traces" and headers["content-type"] == "application/json"
    assert headers["x-api-key"] == "k-123" and "content-encoding" not in headers and told == []
    assert body.decode() + "\n" == path.read_text()
    request = ExportTraceServiceRequest.from_json(body)  # the message a collector's /v1/traces reads
    assert [s.name for s in request.resource_spans[0].scope_spans[0].spans][-1] == "invoke_agent support"
    assert Exporter(url=at.url + "/v1/traces").url == at.url + "/v1/traces"


# --- Protobuf's binary form, read by OpenTelemetry's own Protobuf parser ---------------------

def from_protobuf(body: bytes) -> dict:
    """A POST's body in Protobuf, parsed by opentelemetry-proto's ExportTraceServiceRequest (the
    message a collector's /v1/traces reads), then written as OTLP JSON: ids in hex, not base64."""
    request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
    out = MessageToDict(request, use_integers_for_enums=True)
    for resource in out["resourceSpans"]:
        for scoped in resource["scopeSpans"]:
            for span in scoped["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return out


def test_by_default_each_trace_is_posted_gzipped_in_protobuf_and_says_every_field_the_json_line_says(
        tmp_path, collector):
    at = collector()
    path, told = tmp_path / "spans.jsonl", []
    written = []
    with serve([reply(calls=[("look_up_order", '{"order_id": "A1234"}')], usage=(11, 2)),
                reply("Sorry.", usage=(12, 3))]) as model:
        brain = chat_policy("stand-in", model.url, send=sending(hardened(retries=0)))
        exporter = Exporter(str(path), url=at.url, report=told.append)
        agent = traced(support_agent(brain), lambda span: (written.append(span), exporter(span)))
        with tracing(f"00-{TRACE}-00f067aa0ba902b7-01"):
            agent.run(QUESTION)
    [(where, headers, body)] = at.posts
    assert where == "/v1/traces" and told == []
    assert (headers["content-type"], headers["content-encoding"]) == ("application/x-protobuf", "gzip")
    line = json.loads(path.read_text())
    assert from_protobuf(gzip.decompress(body)) == line  # every field, every value, as the line has it
    # the line holds each kind of field: a parent, an error status, a client kind, ints, a list
    spans = line["resourceSpans"][0]["scopeSpans"][0]["spans"]
    assert {s["kind"] for s in spans} == {1, 3} and all("parentSpanId" in s for s in spans)
    assert any(a["value"].get("arrayValue") for s in spans for a in s.get("attributes", []))


def test_every_kind_of_value_and_an_error_status_come_out_of_opentelemetrys_parser_as_in_json():
    written = []
    with tracing():
        traced(support_agent(approver=YES), written.append).run(QUESTION)
    written[1].error = "RuntimeError"
    written[1].attributes.update({"a.bool": False, "a.true": True, "a.int": -(2 ** 63), "a.big": 2 ** 63 - 1,
                                  "a.zero": 0, "a.empty": "", "a.double": -0.5, "a.list": [1, "two", 3.0, True],
                                  "a.unicode": "réfund ✓ \u0000"})
    data = traces_data(written, "the desk")
    assert from_protobuf(encode("TracesData", data)) == data
    span = trace_service_pb2.ExportTraceServiceRequest.FromString(encode("TracesData", data)) \
        .resource_spans[0].scope_spans[0].spans[1]
    assert (span.status.code, span.status.message, span.flags) == (2, "RuntimeError", 0x101)
    assert span.start_time_unix_nano == written[1].start and span.span_id.hex() == written[1].span_id


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.text(max_size=300), st.booleans(), st.integers(-(2 ** 63), 2 ** 63 - 1),
                 st.floats(allow_nan=False, allow_infinity=False), st.lists(st.integers(-(2 ** 63), 2 ** 63 - 1), min_size=1, max_size=3)),
       st.sampled_from([1, 127, 128, 129, 16383, 16384, 16385]))
def test_any_value_and_length_at_the_edges_of_a_varint_reads_back_as_written(value, padding):
    # a string of 127, 128 or 16384 bytes needs a one, two or three byte length; ints cover 64 bits
    fields = {"key": "k" * padding, "value": {"intValue": str(value)} if type(value) is int
              else {"boolValue": value} if isinstance(value, bool) else {"doubleValue": value}
              if isinstance(value, float) else {"stringValue": value} if isinstance(value, str)
              else {"arrayValue": {"values": [{"intValue": str(v)} for v in value]}}}
    parsed = common_pb2.KeyValue.FromString(encode("KeyValue", fields))
    assert MessageToDict(parsed) == fields  # (its JSON says an infinity as "Infinity": below)


def test_an_infinite_double_is_written_as_protobuf_has_it():
    for value in (float("inf"), float("-inf")):
        parsed = common_pb2.AnyValue.FromString(encode("AnyValue", {"doubleValue": value}))
        assert parsed.double_value == value


def test_a_server_that_takes_no_gzip_gets_the_trace_plain_and_no_more_gzip_after(tmp_path, collector):
    at, told = collector(gzip=False), []
    exporter = Exporter(url=at.url, report=told.append)
    agent = traced(support_agent(approver=YES), exporter)
    for _ in range(2):
        with tracing():
            agent.run(QUESTION)
    assert [h.get("content-encoding") for _, h, _ in at.posts] == ["gzip", None, None] and told == []
    assert [s["name"] for s in from_protobuf(at.posts[1][2])["resourceSpans"][0]["scopeSpans"][0]["spans"]][-1] \
        == "invoke_agent support"


@pytest.mark.parametrize("how, problem", [
    ({"status": 503, "said": b'{"message": "busy, try later"}'}, "refused 9 spans: HTTP 503 ({\"message\": \"busy"),
    ({"status": 307, "location": "http://elsewhere.invalid/v1/traces"}, "refused 9 spans: HTTP 307"),
    ({"stall": 3.0}, "could not send 9 spans to http://127.0.0.1:"),
])
def test_a_collector_that_refuses_redirects_or_stalls_is_reported_and_the_run_goes_on(tmp_path, collector, how,
                                                                                      problem):
    at, told = collector(**how), []
    path = tmp_path / "spans.jsonl"
    exporter = Exporter(str(path), url=at.url, timeout=0.5, report=told.append)
    with tracing():
        ctx = traced(support_agent(approver=YES), exporter).run(QUESTION)
    assert ctx.last().name == "final_answer" and len(at.posts) == 1  # a redirect is not followed
    [said] = told
    assert problem in said and len(said) < 400
    assert len(read_back(path.read_text().splitlines())) == 9  # the file kept them all


def test_the_timeout_bounds_the_whole_post_so_a_collector_answering_a_byte_at_a_time_is_reported(tmp_path,
                                                                                              collector):
    # the defect: the timeout bounded each read, so a byte every 0.4 s held a run 28.6 s with timeout=1,
    # and the POST then "succeeded"; here the answer would take about 20 s, and is cut at the deadline
    at, told = collector(trickle=0.4), []
    exporter = Exporter(url=at.url, timeout=1.0, report=told.append)
    with tracing():
        ctx = traced(support_agent(approver=YES), exporter).run(QUESTION)
    assert ctx.last().name == "final_answer"
    assert told == ["could not send 9 spans to " + at.url + "/v1/traces: TimeoutError: "
                    "no whole answer within timeout=1s"]


def test_an_agent_traced_to_its_own_exporter_and_used_as_a_tool_writes_its_spans_to_its_own_file(tmp_path):
    # the defect: the inner exporter waited for an outermost span that never came to it, kept
    # its spans in memory after every run and never wrote its file
    inner_file, outer_file = tmp_path / "orders.jsonl", tmp_path / "office.jsonl"
    orders = traced(Agent(scripted(Action("final_answer", {"answer": "A1 was delivered"}, "say it")),
                          [final_answer], name="orders"), Exporter(str(inner_file)))
    office = traced(Agent(scripted(Action("orders", {"request": "where is A1?"}, "ask orders"),
                                   Action("final_answer", {"answer": "delivered"}, "reply")),
                          [agent_tool(orders, description="Ask the orders desk."), final_answer], name="office"),
                    Exporter(str(outer_file)))
    for _ in range(3):
        with tracing():
            office.run("Where is A1?")
    inner = [[s.name for s in read_back([line])] for line in inner_file.read_text().splitlines()]
    assert inner == [["chat policy", "execute_tool final_answer", "invoke_agent orders"]] * 3
    [office_spans, *more] = [read_back([line]) for line in outer_file.read_text().splitlines()]
    assert len(more) == 2 and [s.name for s in office_spans] == [
        "chat policy", "execute_tool orders", "chat policy", "execute_tool final_answer", "invoke_agent office"]
    # still one trace: the inner run is a child of the office's call to it
    run = read_back([inner_file.read_text().splitlines()[0]])[-1]
    assert run.parent_span_id == office_spans[1].span_id and run.trace_id == office_spans[1].trace_id


def test_no_collector_there_and_a_file_that_cannot_be_written_are_reported_not_raised(tmp_path):
    told = []
    gone = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    port = gone.server_address[1]
    gone.server_close()  # nobody listens there now
    exporter = Exporter(str(tmp_path / "no-such-folder" / "spans.jsonl"), url=f"http://127.0.0.1:{port}",
                        report=told.append)
    with tracing():
        traced(support_agent(approver=YES), exporter).run(QUESTION)
    assert [t.split(":")[0] for t in told] == [f"could not write 9 spans to {tmp_path}/no-such-folder/spans.jsonl",
                                               "could not send 9 spans to http"]
    assert "ConnectionRefusedError" in told[1]


def test_an_exporter_says_what_it_needs():
    with pytest.raises(ValueError, match="a file"):
        Exporter()
    for url in ["127.0.0.1:4318", "ftp://host/", "http://host:x", "http://:0", 4318]:
        with pytest.raises(ValueError, match="collector's address"):
            Exporter(url=url)
    with pytest.raises(ValueError, match="credentials in a header") as refused:
        Exporter(url="http://user:s3cret@host:4318")
    assert "s3cret" not in str(refused.value)
    # a query stays at the end, after the traces path; a fragment is never sent, so refused
    assert Exporter(url="http://127.0.0.1:4318/otlp?tenant=a").url == "http://127.0.0.1:4318/otlp/v1/traces?tenant=a"
    with pytest.raises(ValueError, match="collector's address"):
        Exporter(url="http://127.0.0.1:4318#x")
    with pytest.raises(TypeError, match="records Spans"):
        Exporter(url="http://127.0.0.1:4318")({"name": "x"})
    with pytest.raises(ValueError, match="'http/protobuf' or 'http/json', not 'grpc'"):
        Exporter(url="http://127.0.0.1:4318", protocol="grpc")
    with pytest.raises(ValueError, match="'gzip' or None, not 'zstd'"):
        Exporter(url="http://127.0.0.1:4318", compression="zstd")


def test_spans_from_many_threads_make_whole_lines(tmp_path):
    path = tmp_path / "spans.jsonl"
    agent = traced(support_agent(approver=YES), Exporter(str(path)))

    def run():
        for _ in range(5):
            with tracing():
                agent.run(QUESTION)
    with ThreadPoolExecutor(4) as pool:  # four at once
        for done in [pool.submit(run) for _ in range(4)]:
            done.result(timeout=60)
    spans = read_back(path.read_text().splitlines())
    assert len(spans) == 4 * 5 * 9 and len({s.trace_id for s in spans}) == 20


# --- one request, one trace: through the host, the LLM brain and back ---------------------

def post(port: int, path: str, token: str, body: dict | None, traceparents=(), method="POST"):
    """One request (a POST unless told) with each traceparent given as a header of its own:
    (status, the answer)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    data = json.dumps(body).encode() if body is not None else b""
    try:
        conn.putrequest(method, path)
        for name, value in [("Authorization", f"Bearer {token}"), ("Content-Length", str(len(data))),
                            *[("traceparent", t) for t in traceparents]]:
            conn.putheader(name, value)
        conn.endheaders(data)
        response = conn.getresponse()
        text = response.read().decode()
    finally:
        conn.close()
    if response.getheader("Content-Type") == "text/event-stream":
        return response.status, events(text)
    return response.status, json.loads(text)


@pytest.fixture
def hosted(tmp_path):
    """A host whose refund office has an LLM brain (the stand-in) and writes its spans."""
    path, servers = tmp_path / "spans.jsonl", []
    script = [reply(calls=[("look_up_order", '{"order_id": "A1234"}')]),
              reply(calls=[("check_policy", '{"order_id": "A1234"}')]),
              reply(calls=[("issue_refund", '{"order_id": "A1234", "amount": 79}')]),
              reply("Good news: I refunded $79.", usage=(30, 9))]
    model = serve(script)

    def office(db):
        brain = chat_policy("stand-in", model.url, send=sending(hardened(retries=0)))
        return traced(refund_office(db, policy=brain), Exporter(str(path)))

    def start():
        users = {"alice": {"token": "alice-token-0123456789", "roles": ["asks"]},
                 "bob": {"token": "bob-token-0123456789", "roles": ["approves"]}}
        servers.append(Server(office, str(tmp_path / "host.db"), users, b"s" * 32, quiet=True))
        threading.Thread(target=servers[-1].serve_forever, args=(0.05,), daemon=True).start()
        return servers[-1].server_address[1]
    yield start, model, path
    model.close()
    for s in servers:
        s.shutdown()
        s.server_close()


def test_a_hosted_refund_with_a_model_call_and_an_approval_is_one_trace_across_its_two_requests(hosted):
    start, model, path = hosted
    port, alice, bob = start(), "alice-token-0123456789", "bob-token-0123456789"
    sid = post(port, "/sessions", alice, None)[1]["id"]
    status, stream = post(port, f"/sessions/{sid}/messages", alice, {"text": QUESTION},
                          [f"00-{TRACE}-aaaaaaaaaaaaaaa1-01"])
    assert status == 200 and stream[-1][0] == "approval_required"
    [waiting] = post(port, "/approvals", bob, None, method="GET")[1]["waiting"]  # alice asks, bob approves
    status, stream = post(port, f"/sessions/{sid}/approvals", bob,
                          {"approval_token": waiting["approval_token"], "approve": True},
                          [f"00-{TRACE}-aaaaaaaaaaaaaaa2-01"])
    assert status == 200 and stream[-1] == ("done", {"answer": "Good news: I refunded $79."})
    spans = read_back(path.read_text().splitlines())
    assert {s.trace_id.hex() for s in spans} == {TRACE}  # one trace
    by_parent = {}
    for s in spans:
        by_parent.setdefault(s.parent_span_id.hex(), []).append(s)
    # the first request: its run, three decisions by the model and the two tools that ran
    [first] = by_parent["aaaaaaaaaaaaaaa1"]
    assert outline([first, *by_parent[first.span_id.hex()]]) == [
        "invoke_agent support", "  chat stand-in (client)", "  execute_tool look_up_order",
        "  chat stand-in (client)", "  execute_tool check_policy", "  chat stand-in (client)"]
    # the second: the approved refund, carried out by the host (not by the loop), then the run goes on
    refund, second = by_parent["aaaaaaaaaaaaaaa2"]
    assert (refund.name, second.name) == ("execute_tool issue_refund", "invoke_agent support")
    assert outline(by_parent[second.span_id.hex()]) == ["chat stand-in (client)", "execute_tool final_answer"]
    # the model server heard each request with the traceparent of the chat span that made it
    chats = sorted((s for s in spans if s.name == "chat stand-in"), key=lambda s: s.start_time_unix_nano)
    assert [h["traceparent"] for h in model.headers] == [f"00-{TRACE}-{c.span_id.hex()}-01" for c in chats]
    assert attributes(chats[-1])["gen_ai.usage.input_tokens"] == 30


@pytest.mark.parametrize("sent", [
    ["00-4BF92F3577B34DA6A3CE929D0E0E4736-aaaaaaaaaaaaaaa1-01"], [f"00-{TRACE}-0000000000000000-01"],
    [f"ff-{TRACE}-aaaaaaaaaaaaaaa1-01"], ["x" * 600], [],
    [f"00-{TRACE}-aaaaaaaaaaaaaaa1-01", f"00-{TRACE}-aaaaaaaaaaaaaaa2-01"],  # two: which is the caller?
], ids=["upper case", "zero parent", "version ff", "too long", "none", "two headers"])
def test_a_request_with_no_traceparent_to_trust_runs_as_a_new_trace(hosted, sent):
    start, model, path = hosted
    port, token = start(), "alice-token-0123456789"
    sid = post(port, "/sessions", token, None)[1]["id"]
    status, stream = post(port, f"/sessions/{sid}/messages", token, {"text": QUESTION}, sent)
    assert status == 200 and stream[-1][0] == "approval_required"
    spans = read_back(path.read_text().splitlines())
    [run] = [s for s in spans if s.parent_span_id == b""]
    assert run.name == "invoke_agent support" and run.trace_id.hex() != TRACE and len(spans) == 6


# --- one trace through MCP: a span carried in params._meta.traceparent (SEP-414) -----------

DESK = [sys.executable, "-m", "microagent.mcp", "microagent.demo:look_up_order", "--name", "order-desk"]


def test_an_office_whose_lookup_is_our_mcp_server_is_one_trace_across_the_two_processes(tmp_path):
    here, there = tmp_path / "office.jsonl", tmp_path / "desk.jsonl"
    at_home = support_agent(approver=YES)
    with connect([*DESK, "--spans", str(there)], name="the order desk") as orders:
        lookup, = orders.tools()
        others = [tool for tool in at_home.tools.values() if tool.name != "look_up_order"]
        office = traced(Agent(at_home.policy, [lookup, *others], name="support"), Exporter(str(here)))
        with tracing():
            office.run(QUESTION)
            office.run("Can I get a refund for order B1?")
    ours, theirs = read_back(here.read_text().splitlines()), read_back(there.read_text().splitlines(), "order-desk")
    assert len(theirs) == 2 and all(s.flags == 0x301 for s in theirs)  # their parents are in another process
    assert outline(ours + theirs)[:4] == ["invoke_agent support", "  chat support_policy",
                                          "  execute_tool look_up_order", "    execute_tool look_up_order"]
    calls = [s for s in ours if s.name == "execute_tool look_up_order"]
    assert [(s.trace_id, s.parent_span_id) for s in theirs] == [(s.trace_id, s.span_id) for s in calls]
    assert {s.trace_id for s in ours + theirs} == {calls[0].trace_id}  # one block, one trace
    assert attributes(theirs[0]) == {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "look_up_order",
                                     "gen_ai.tool.type": "function"}


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_the_official_sdk_client_sends_its_span_in_meta_and_our_servers_spans_are_its_children(tmp_path, mode):
    anyio = pytest.importorskip("anyio")
    sdk = pytest.importorskip("mcp")
    from mcp.client.client import Client
    from opentelemetry import trace as otel
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

    path = tmp_path / "desk.jsonl"
    caller = NonRecordingSpan(SpanContext(int(TRACE, 16), 0x00f067aa0ba902b7, False, TraceFlags(1)))

    async def session():
        desk = sdk.StdioServerParameters(command=DESK[0], args=[*DESK[1:], "--spans", str(path)])
        async with Client(desk, mode=mode) as office:
            with otel.use_span(caller):  # the SDK's own code puts it in _meta.traceparent
                found = await office.call_tool("look_up_order", {"order_id": "A1234"})
            assert found.content[0].text == "A1234, Wireless Headphones, $79, delivered, reported defective"
            await office.call_tool("look_up_order", {"order_id": "A1234"})  # in no span: a trace of its own
            wrong = await office.call_tool("look_up_order", {"order_id": "B1"}, meta={"traceparent": "00-x"})
            assert not wrong.is_error
    anyio.run(session)
    first, second, third = (read_back([line], "order-desk") for line in path.read_text().splitlines())
    assert (first[0].trace_id.hex(), first[0].parent_span_id.hex(), first[0].flags) == (TRACE, "00f067aa0ba902b7",
                                                                                         0x301)
    for alone in (second[0], third[0]):
        assert alone.parent_span_id == b"" and alone.trace_id.hex() != TRACE and alone.flags == 0x101


# --- the app's own tracer: microagent.otel.bridge ---------------------------------------------

def test_a_run_relayed_through_the_apps_own_tracer_is_a_child_of_the_apps_span_with_our_ids():
    sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="pip install opentelemetry-sdk (the dev extra)")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from microagent.otel.bridge import Relay, caller

    provider, app_spans = sdk.TracerProvider(), InMemorySpanExporter()  # the app's, and its exporter
    provider.add_span_processor(SimpleSpanProcessor(app_spans))
    written = []
    relay = Relay(provider)
    with serve([reply(calls=[("look_up_order", '{"order_id": "A1234"}')], usage=(11, 2)),
                reply("Sorry.", usage=(12, 3))]) as model:
        brain = chat_policy("stand-in", model.url, send=sending(hardened(retries=0)))
        agent = traced(support_agent(brain), lambda span: (written.append(span), relay(span)))
        assert caller() is None  # no app span open here
        with provider.get_tracer("app").start_as_current_span("POST /refunds") as request:
            with tracing(caller()):
                agent.run(QUESTION)
    app = {s.context.span_id: s for s in app_spans.get_finished_spans()}
    names = {f"{s.context.span_id:016x}": s.name for s in app.values()}
    assert sorted(names.values()) == ["POST /refunds", "chat stand-in", "chat stand-in", "execute_tool final_answer",
                                      "execute_tool look_up_order", "invoke_agent support"]
    # one trace: the run is a child of the app's request span
    assert {s.context.trace_id for s in app.values()} == {request.get_span_context().trace_id}
    [run] = [s for s in app.values() if s.name == "invoke_agent support"]
    assert run.parent.span_id == request.get_span_context().span_id
    # our ids, so the traceparent the model server heard names a span the app's backend has
    for ours in written:
        theirs = app[int(ours.span_id, 16)]
        assert (f"{theirs.parent.span_id:016x}", theirs.start_time, theirs.end_time) == (ours.parent_id, ours.start,
                                                                                       ours.end)
        assert dict(theirs.attributes) == {k: tuple(v) if isinstance(v, list) else v
                                           for k, v in ours.attributes.items()}
    heard = [h["traceparent"].split("-")[2] for h in model.headers]
    assert [names[h] for h in heard] == ["chat stand-in", "chat stand-in"]
    chat = app[int(heard[0], 16)]
    assert chat.kind.name == "CLIENT" and chat.attributes["gen_ai.usage.input_tokens"] == 11


def test_a_tool_that_failed_is_an_error_in_the_apps_tracer_and_a_failing_tracer_is_reported_not_raised():
    sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="pip install opentelemetry-sdk (the dev extra)")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from microagent.otel.bridge import Relay

    provider, app_spans = sdk.TracerProvider(), InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(app_spans))
    def look_up_order(order_id: str) -> str:
        raise ConnectionError("the orders database is down")

    agent = traced(Agent(scripted(Action("look_up_order", {"order_id": "Z9"}, "look"),
                                  Action("final_answer", {"answer": "try later"}, "say")),
                         [Tool("look_up_order", "Look up an order.", look_up_order), final_answer], name="support"),
                   Relay(provider))
    with tracing():
        agent.run("where is Z9?")
    [lookup] = [s for s in app_spans.get_finished_spans() if s.name == "execute_tool look_up_order"]
    assert (lookup.status.status_code.name, lookup.status.description, lookup.attributes["error.type"]) == (
        "ERROR", "ConnectionError", "ConnectionError")
    assert [s.parent for s in app_spans.get_finished_spans() if s.name == "invoke_agent support"] == [None]

    class Broken:
        def get_tracer(self, *args):
            raise RuntimeError("the app's tracer broke")
    told = []
    with tracing():
        ctx = traced(support_agent(approver=YES), Relay(Broken(), report=told.append)).run(QUESTION)
    assert ctx.last().name == "final_answer" and told == ["could not relay 9 spans: RuntimeError"]


def test_the_bridge_without_opentelemetry_says_what_to_install():
    blocked = "import sys; sys.modules['opentelemetry'] = None  # not installed\nimport microagent.otel.bridge"
    done = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "ImportError: microagent.otel.bridge relays through the app's OpenTelemetry tracer, so it needs "
        "opentelemetry-api: pip install '.[otel]' (in microagent's folder), or the app's own OpenTelemetry packages")
    # the rest of microagent.otel imports nothing from it
    done = subprocess.run([sys.executable, "-c", blocked.replace("microagent.otel.bridge", "microagent.otel")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
