"""Spans as OTLP JSON: the shape OpenTelemetry's collectors, and its file exporter, read.

One line of a file, or one POST to /v1/traces, is a TracesData object:

    {"resourceSpans": [{"resource": {"attributes": [service.name]},
                        "scopeSpans": [{"scope": {"name": "microagent.spans"},
                                        "spans": [{"traceId": ..., "spanId": ..., ...}]}]}]}

Protobuf's JSON mapping, as OTLP amends it: keys in lowerCamelCase, the ids as
lowercase hex (not base64), enums as their numbers (kind 1 is INTERNAL, 3 CLIENT;
status code 2 is ERROR), 64-bit integers (the times, intValue) as decimal strings,
and a field at its default (an empty list, a zero, no parent) left out.
"""

from microagent.spans import Span

SCOPE = {"name": "microagent.spans", "version": "0.1.0"}
KIND = {"internal": 1, "server": 2, "client": 3}  # Span.SpanKind's numbers
ERROR = 2                                          # Status.StatusCode.STATUS_CODE_ERROR
# Span.flags: the W3C trace flags in bits 0-7, then whether the parent is remote is known
HAS_IS_REMOTE, IS_REMOTE = 0x100, 0x200


def traces_data(spans: list[Span], service: str = "microagent") -> dict:
    """The TracesData holding `spans`, from one service: one line of a JSON lines file."""
    resource = {"attributes": attributes({"service.name": service})}
    scoped = {"scope": SCOPE, "spans": [span_json(s) for s in spans]}
    return {"resourceSpans": [{"resource": resource, "scopeSpans": [scoped]}]}


def span_json(span: Span) -> dict:
    """One Span in OTLP JSON."""
    out = {"traceId": span.trace_id, "spanId": span.span_id}
    if span.parent_id is not None:
        out["parentSpanId"] = span.parent_id
    out.update(flags=span.flags | HAS_IS_REMOTE | (IS_REMOTE if span.remote else 0),
               name=span.name, kind=KIND[span.kind],
               startTimeUnixNano=str(span.start), endTimeUnixNano=str(span.end))
    # a failed span names what failed as error.type too, as the GenAI conventions ask
    named = span.attributes if span.error is None else {**span.attributes,
                                                          "error.type": span.error}
    if named:
        out["attributes"] = attributes(named)
    if span.error is not None:
        out["status"] = {"message": span.error, "code": ERROR}
    return out


def attributes(named: dict) -> list[dict]:
    """Attributes as OTLP's key-value list.

    >>> attributes({"gen_ai.usage.input_tokens": 20, "gen_ai.tool.name": "add"})
    [{'key': 'gen_ai.usage.input_tokens', 'value': {'intValue': '20'}}, \
{'key': 'gen_ai.tool.name', 'value': {'stringValue': 'add'}}]
    """
    return [{"key": key, "value": any_value(value)} for key, value in named.items()]


def any_value(value) -> dict:
    """A value as OTLP's AnyValue: a string, a flag, a whole number, a number, or a list."""
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bool):  # before int: True is an int in Python
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}  # 64 bits: a decimal string
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [any_value(v) for v in value]}}
    raise TypeError(f"an attribute is a string, a bool, a number or a list of them, "
                    f"not {type(value).__name__}")
