"""Spans through the app's own OpenTelemetry tracer: its request and the agent's run, one trace.

    from microagent.otel.bridge import Relay, caller

    agent = traced(support_agent(), Relay())  # the tracer provider the program has set
    with tracing(caller()):                   # a child of the app's span open here
        agent.run(QUESTION)

A program that already uses OpenTelemetry (a web app with its tracer provider and
exporter) gets the run in the traces it already sends, wherever it sends them. Like
the Exporter, a Relay keeps spans until the outermost ends, then starts each through
the tracer, parents first, with its times, kind, attributes and error status.

The one rule: ids are kept where the tracer lets us. The SDK's tracer
(opentelemetry-sdk) is given each span's own ids, so the traceparent a model request
carried names a span the backend has; another tracer gives ids of its own, and the
tree stays the same.

It needs opentelemetry-api (an optional extra: the book and the rest of microagent.otel
import nothing from it). It leaves out span links, events, and the app's sampler's say
in anything but whether a span is recorded.
"""

import contextvars
import threading

try:
    from opentelemetry import trace
    from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode
    from opentelemetry.trace import TraceFlags
except ImportError:  # what to install, not a traceback from deep inside
    raise ImportError("microagent.otel.bridge relays through the app's OpenTelemetry tracer, "
                      "so it needs opentelemetry-api: pip install '.[otel]' (in microagent's "
                      "folder), or the app's own OpenTelemetry packages") from None

from microagent.otel.export import keep, to_stderr
from microagent.otel.otlp import SCOPE
from microagent.spans import Parent, Span, traceparent

KIND = {"internal": SpanKind.INTERNAL, "server": SpanKind.SERVER, "client": SpanKind.CLIENT}
# (trace id, span id) of the span being started: what _Ours hands the SDK's tracer
_STARTING = contextvars.ContextVar("microagent.otel.bridge: the span being started",
                                   default=None)


def caller() -> str | None:
    """The traceparent of the app's OpenTelemetry span open here (None: none is)."""
    here = trace.get_current_span().get_span_context()
    if not here.is_valid:
        return None
    return traceparent(Parent(f"{here.trace_id:032x}", f"{here.span_id:016x}",
                              int(here.trace_flags)))


class Relay:
    """A `record` for traced(): spans started and ended through `provider`'s tracer (None:
    the one the program set with trace.set_tracer_provider)."""

    def __init__(self, provider=None, *, report=to_stderr):
        self.provider, self.report = provider, report
        self.kept: list[Span] = []
        self.lock = threading.Lock()
        self.tracers = {}  # provider -> our tracer from it (set late: it may come after us)

    def __call__(self, span: Span) -> None:
        """Keep a finished span; relay all kept once the span the others sit in has ended."""
        keep(self, span)

    def flush(self) -> None:
        """Start and end each kept span through the tracer; a failure goes to report."""
        with self.lock:
            spans, self.kept = self.kept, []
        try:
            self.relay(spans)
        except Exception as e:  # the app's tracer failing must not fail the run
            self.report(f"could not relay {len(spans)} spans: {type(e).__name__}")

    def relay(self, spans: list[Span]) -> None:
        started = {}  # our span id -> the tracer's span
        for span in sorted(spans, key=_depth(spans)):  # parents first
            above = started.get(span.parent_id)
            if above is None and span.parent_id is not None:  # in another process, or block
                above = NonRecordingSpan(SpanContext(int(span.trace_id, 16),
                                                     int(span.parent_id, 16), span.remote,
                                                     TraceFlags(span.flags & 1)))
            named = span.attributes if span.error is None else {**span.attributes,
                                                                  "error.type": span.error}
            token = _STARTING.set((span.trace_id, span.span_id))
            try:
                made = self.tracer().start_span(
                    span.name, None if above is None else trace.set_span_in_context(above),
                    KIND[span.kind], named, start_time=span.start)
            finally:
                _STARTING.reset(token)
            if span.error is not None:
                made.set_status(Status(StatusCode.ERROR, span.error))
            started[span.span_id] = made
        for span in spans:  # children end first, as they did
            started[span.span_id].end(end_time=span.end)

    def tracer(self):
        """Our tracer from the provider, its id generator giving our ids (the SDK's has one)."""
        provider = self.provider or trace.get_tracer_provider()
        if provider not in self.tracers:
            made = provider.get_tracer(SCOPE["name"], SCOPE["version"])
            if hasattr(made, "id_generator"):  # the SDK's: this tracer of ours only
                made.id_generator = _Ours(made.id_generator)
            if not isinstance(provider, trace.ProxyTracerProvider):  # set: keep it
                self.tracers[provider] = made
            return made
        return self.tracers[provider]


class _Ours:
    """An id generator that hands out the ids of the span being started, else its own."""

    def __init__(self, theirs):
        self.theirs = theirs

    def generate_span_id(self) -> int:
        ids = _STARTING.get()
        return self.theirs.generate_span_id() if ids is None else int(ids[1], 16)

    def generate_trace_id(self) -> int:
        ids = _STARTING.get()
        return self.theirs.generate_trace_id() if ids is None else int(ids[0], 16)

    def is_trace_id_random(self) -> bool:  # ours are (secrets.token_hex)
        return _STARTING.get() is not None or self.theirs.is_trace_id_random()

    def __getattr__(self, name):  # anything else a newer SDK asks: theirs
        return getattr(self.theirs, name)


def _depth(spans: list[Span]):
    """A sort key putting each span after its parent: (its depth, its start)."""
    ids = {s.span_id: s for s in spans}

    def depth(s: Span) -> int:
        return 0 if s.parent_id not in ids else 1 + depth(ids[s.parent_id])
    return lambda s: (depth(s), s.start)
