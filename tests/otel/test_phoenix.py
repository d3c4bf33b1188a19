"""A traced refund seen by a real trace viewer: Arize Phoenix, on 127.0.0.1, offline.

`.ci/run` installs Phoenix (pinned) into .phoenix/ (git ignores it; about 850 MB, so
not in the dev extra). Here `phoenix serve` starts on ports of its own with a working
folder in tmp; a refund (an LLM brain against the stand-in model server, its order
lookup served over MCP, a refund a human approves) goes to it through microagent.otel's
Exporter as OTLP/HTTP in Protobuf, gzipped (Phoenix refuses JSON); the spans are read
back through Phoenix's REST API (GET /v1/projects/<project>/spans?trace_id=...), and the
tree, the kinds Phoenix gives them, the input and output it shows, and the absence of
every secret are checked.

Without .phoenix/ the tests are skipped, saying so; with MICROAGENT_PHOENIX=required
(.ci/run sets it) they fail instead.

    python tests/otel/test_phoenix.py docs/phoenix_trace.png   # the otel README's screenshot
"""

import contextlib
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest

from microagent import Agent
from microagent.approval import approve
from microagent.demo import QUESTION, support_agent
from microagent.llm import chat_policy
from microagent.mcp import connect
from microagent.otel import Exporter
from microagent.spans import sending, traced, tracing
from microagent.transport import hardened
from microagent.transport.stand_in import reply, serve

ROOT = pathlib.Path(__file__).resolve().parents[2]
PHOENIX = ROOT / ".phoenix" / "bin" / "phoenix"
VERSION = "20.26.1"  # the version measured; .ci/run installs this one
READY = 240          # seconds: it answers /healthz in 11-19 s alone, over 100 s on a busy machine
# secrets, as markers no random id or nanosecond time can hold: letters
KEY, TOKEN = "sk-QXQXQXQXQX", "TOKQXQXQX"
DESK = [sys.executable, "-m", "microagent.mcp", "microagent.demo:look_up_order", "--name", "order-desk"]

pytestmark = pytest.mark.timeout(READY + 300)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str):
    with urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url, timeout=30) as answer:
        return json.loads(answer.read())


@contextlib.contextmanager
def running(folder: pathlib.Path):
    """`phoenix serve` on 127.0.0.1, offline, working in `folder`: its address once it answers."""
    port = free_port()
    env = {**os.environ, "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false", "PHOENIX_TELEMETRY_ENABLED": "false",
           "PHOENIX_WORKING_DIR": str(folder), "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
           "PHOENIX_GRPC_PORT": str(free_port())}  # its gRPC port listens on every interface: ours
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env.pop(name, None)
    with open(folder / "phoenix.log", "wb") as log:
        server = subprocess.Popen([str(PHOENIX), "serve"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                  cwd=folder)
    url = f"http://127.0.0.1:{port}"
    try:
        started = time.monotonic()
        while True:
            try:
                urllib.request.build_opener(urllib.request.ProxyHandler({})).open(url + "/healthz", timeout=5)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() - started > READY:
                    said = (folder / "phoenix.log").read_text(errors="replace")[-2000:]
                    raise RuntimeError(f"phoenix serve did not answer /healthz within {READY} s "
                                       f"(exit code {server.poll()}); the end of its log:\n{said}") from None
                time.sleep(1)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory):
    """Phoenix serving on 127.0.0.1, offline, from a working folder of its own: its address."""
    if not PHOENIX.exists():
        reason = (f"Arize Phoenix is not installed in {PHOENIX.parent.parent}: python3 -m venv .phoenix && "
                  f".phoenix/bin/pip install arize-phoenix=={VERSION} (as .ci/run does)")
        (pytest.fail if os.environ.get("MICROAGENT_PHOENIX") == "required" else pytest.skip)(reason)
    with running(tmp_path_factory.mktemp("phoenix")) as url:
        yield url


def refund(record, header: str | None = None):
    """A traced refund, each span to `record`, in a trace under `header`: an LLM brain (the
    stand-in, with a key), its order lookup over MCP, a refund bob approves, a token in the
    question. (the spans written, the model's headers, the answer)"""
    written = []
    script = [reply(calls=[("look_up_order", '{"order_id": "A1234"}')], usage=(21, 4)),
              reply(calls=[("check_policy", '{"order_id": "A1234"}')], usage=(48, 4)),
              reply(calls=[("issue_refund", '{"order_id": "A1234", "amount": 79}')], usage=(71, 9)),
              reply("Good news: I refunded $79.", usage=(95, 9))]
    with serve(script) as model, connect(DESK, name="the order desk") as orders:
        brain = chat_policy("stand-in", model.url, api_key=KEY, send=sending(hardened(retries=0)))
        lookup, = orders.tools()  # the order lookup, over MCP
        office = support_agent(brain)  # a refund waits for a human
        office = traced(Agent(office.policy, [lookup, *[t for t in office.tools.values()
                                                        if t.name != "look_up_order"]], name="support"),
                        lambda span: (written.append(span), record(span)), content=True)
        with tracing(header):
            paused = office.run(f"{QUESTION} My account token: {TOKEN}")
            assert paused.last().tool == "issue_refund"
            done = office.run(approve(paused, office.tools["issue_refund"], by="bob"))
        return written, model.headers, done.last().content


def spans_of(url: str, trace_id: str, count: int) -> list[dict]:
    """The trace's spans as Phoenix's REST API gives them, once all `count` are in (it takes
    spans in on a queue of its own, so a read straight after the POST may find fewer)."""
    for _ in range(60):
        found = get(f"{url}/v1/projects/default/spans?trace_id={trace_id}&limit=100")["data"]
        if len(found) >= count:
            return found
        time.sleep(0.5)
    return found


def outline(spans: list[dict]) -> list[str]:
    """Each span under its parent, in the order they started: its name and Phoenix's kind."""
    ids = {s["context"]["span_id"]: s for s in spans}

    def depth(s):
        return 0 if s["parent_id"] not in ids else 1 + depth(ids[s["parent_id"]])
    return ["  " * depth(s) + f"{s['name']} {s['span_kind']}"
            for s in sorted(spans, key=lambda s: (s["start_time"], -depth(s)))]


def test_a_traced_refund_sent_in_protobuf_is_drawn_by_phoenix_as_a_tree_with_its_words_and_no_secret(
        phoenix, tmp_path):
    told = []
    written, headers, answer = refund(Exporter(str(tmp_path / "spans.jsonl"), url=phoenix, report=told.append))
    assert answer == "Good news: I refunded $79."
    assert headers[0]["Authorization"] == f"Bearer {KEY}"  # the key went to the model only
    assert told == []  # Phoenix took the POST: protobuf, gzipped
    trace_id = written[-1].trace_id
    spans = spans_of(phoenix, trace_id, len(written))
    assert len(spans) == len(written) == 9
    # one run (resumed in the same block after the approval), with Phoenix's kinds: AGENT, LLM, TOOL
    assert outline(spans) == [
        "invoke_agent support AGENT",
        "  chat stand-in LLM", "  execute_tool look_up_order TOOL", "  chat stand-in LLM",
        "  execute_tool check_policy TOOL", "  chat stand-in LLM",
        "  execute_tool issue_refund TOOL",  # carried out by approve(), once bob said yes
        "  chat stand-in LLM", "  execute_tool final_answer TOOL"]
    [run] = [s["attributes"] for s in spans if s["span_kind"] == "AGENT"]
    assert (run["input.value"], run["output.value"]) == (f"{QUESTION} My account token: [hidden]",
                                                         "Good news: I refunded $79.")
    [looked] = [s["attributes"] for s in spans if s["name"] == "execute_tool look_up_order"]
    assert (looked["input.value"], looked["output.value"]) == (
        '{"order_id": "A1234"}', "A1234, Wireless Headphones, $79, delivered, reported defective")
    # the chat spans in Phoenix's own names, read from the GenAI ones: the model, its tokens, the
    # notebook it read, and the move it made
    first = min((s for s in spans if s["span_kind"] == "LLM"), key=lambda s: s["start_time"])["attributes"]
    assert (first["llm.model_name"], first["llm.token_count.prompt"], first["llm.token_count.completion"]) == (
        "stand-in", 21, 4)
    assert (first["llm.input_messages.0.message.role"], first["llm.input_messages.0.message.content"]) == (
        "user", f"{QUESTION} My account token: [hidden]")
    assert first["llm.output_messages.0.message.tool_calls.0.tool_call.function.name"] == "look_up_order"
    said = json.dumps([s["attributes"] for s in spans])
    assert KEY not in said and TOKEN not in said and "QXQX" not in said


def test_a_refund_relayed_through_the_apps_own_tracer_and_the_sdks_exporter_is_under_the_apps_span(phoenix):
    # the app: its tracer provider, exporting with OpenTelemetry's own OTLP/HTTP exporter
    sdk = pytest.importorskip("opentelemetry.sdk.trace", reason="pip install opentelemetry-sdk (the dev extra)")
    otlp = pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter",
                               reason="pip install opentelemetry-exporter-otlp-proto-http (the dev extra)")
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from microagent.otel.bridge import Relay, caller

    provider = sdk.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(otlp.OTLPSpanExporter(endpoint=phoenix + "/v1/traces")))
    with provider.get_tracer("app").start_as_current_span("POST /refunds") as request:
        written, headers, answer = refund(Relay(provider), caller())
    provider.shutdown()
    trace_id = f"{request.get_span_context().trace_id:032x}"
    assert answer == "Good news: I refunded $79." and {s.trace_id for s in written} == {trace_id}
    spans = spans_of(phoenix, trace_id, len(written) + 1)
    assert outline(spans) == [
        "POST /refunds UNKNOWN",
        "  invoke_agent support AGENT",
        "    chat stand-in LLM", "    execute_tool look_up_order TOOL", "    chat stand-in LLM",
        "    execute_tool check_policy TOOL", "    chat stand-in LLM", "    execute_tool issue_refund TOOL",
        "    chat stand-in LLM", "    execute_tool final_answer TOOL"]
    # our ids: each chat span the model server heard of is there by that id
    ids = {s["context"]["span_id"]: s["name"] for s in spans}
    assert [ids[h["traceparent"].split("-")[2]] for h in headers] == ["chat stand-in"] * 4
    said = json.dumps([s["attributes"] for s in spans])
    assert KEY not in said and TOKEN not in said and "QXQX" not in said


# --- the otel README's screenshot ------------------------------------------------------------

def screenshot(path: str) -> None:
    """The refund's trace in Phoenix's page, drawn by Chromium: the tree, the run's input and output.

        python tests/otel/test_phoenix.py docs/phoenix_trace.png
    """
    from playwright.sync_api import sync_playwright  # the dev extra; only this script needs it

    with tempfile.TemporaryDirectory() as folder, running(pathlib.Path(folder)) as url, \
            sync_playwright() as playwright:
        told = []
        written, _, _ = refund(Exporter(url=url, report=told.append))
        assert told == [], told
        spans_of(url, written[-1].trace_id, len(written))
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run", "--disable-sync"])
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(f"{url}/redirects/traces/{written[-1].trace_id}", timeout=60_000)
        page.get_by_text("invoke_agent support").first.wait_for(timeout=60_000)
        page.get_by_text("Notes").first.wait_for(timeout=60_000)  # the run's panel, drawn after the tree
        page.wait_for_timeout(1000)
        page.screenshot(path=path)
        browser.close()


if __name__ == "__main__":
    screenshot(sys.argv[1])
