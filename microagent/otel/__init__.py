"""The workshop's trace export: a traced run's spans as OpenTelemetry reads them.

    from microagent.otel import Exporter
    from microagent.spans import traced, tracing

    exporter = Exporter("spans.jsonl", url="http://127.0.0.1:4318")  # a file, a collector
    agent = traced(support_agent(), exporter)
    with tracing():
        agent.run(QUESTION)

otlp.py writes spans as OTLP JSON (the TracesData of a line, or a POST);
protobuf.py writes the same in Protobuf's bytes (what most backends take);
export.py's Exporter writes each trace as one line of a file and POSTs it to a
collector's /v1/traces, with the standard library alone. bridge.py's Relay sends
them through the app's own OpenTelemetry tracer instead (it needs opentelemetry-api,
so it is imported from microagent.otel.bridge, not from here). It is built on the
book's public names only (microagent.spans); README.md beside this says more.
"""

from microagent.otel.export import MAX_BODY, Exporter, to_stderr
from microagent.otel.otlp import any_value, attributes, span_json, traces_data
from microagent.otel.protobuf import encode

__all__ = ["Exporter", "MAX_BODY", "to_stderr", "traces_data", "span_json", "attributes",
           "any_value", "encode"]
