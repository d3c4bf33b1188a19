"""OTLP in Protobuf's binary form: otlp.py's TracesData, the same fields, as bytes.

Most trace backends take only this (Arize Phoenix, for one, refuses JSON). A message
is a run of fields, each a key (its number << 3 | how its value is written) then
the value: a varint (7 bits a byte, the lowest first, the top bit set while more
follow), 8 bytes little-endian (fixed64, a double), 4 (fixed32), or a length and
that many bytes (a string, bytes, a message inside a message). A repeated field is
its key again for each value; a field at its default is left out.

It reads otlp.py's JSON dict, so the two forms can't say different things; field
numbers are opentelemetry-proto's (trace.proto, common.proto, resource.proto). It
writes only what otlp.py writes: no events, links, dropped counts, or kvlist and
bytes values. tests/otel/test_otel.py checks every field with OpenTelemetry's own
parser.
"""

import struct

VARINT, I64, LEN, I32 = 0, 1, 2, 5  # wire types

# each message's fields by their JSON key: (number, a message's name or how it is written)
FIELDS = {
    "TracesData": {"resourceSpans": (1, "ResourceSpans")},  # and ExportTraceServiceRequest
    "ResourceSpans": {"resource": (1, "Resource"), "scopeSpans": (2, "ScopeSpans")},
    "Resource": {"attributes": (1, "KeyValue")},
    "ScopeSpans": {"scope": (1, "InstrumentationScope"), "spans": (2, "Span")},
    "InstrumentationScope": {"name": (1, "string"), "version": (2, "string")},
    "Span": {"traceId": (1, "hex"), "spanId": (2, "hex"), "parentSpanId": (4, "hex"),
             "flags": (16, "fixed32"), "name": (5, "string"), "kind": (6, "varint"),
             "startTimeUnixNano": (7, "fixed64"), "endTimeUnixNano": (8, "fixed64"),
             "attributes": (9, "KeyValue"), "status": (15, "Status")},
    "Status": {"message": (2, "string"), "code": (3, "varint")},
    "KeyValue": {"key": (1, "string"), "value": (2, "AnyValue")},
    "AnyValue": {"stringValue": (1, "string"), "boolValue": (2, "varint"),
                 "intValue": (3, "varint"), "doubleValue": (4, "double"),
                 "arrayValue": (5, "ArrayValue")},
    "ArrayValue": {"values": (1, "AnyValue")},
}


def encode(name: str, fields: dict) -> bytes:
    """A message of OTLP JSON (`fields`, as otlp.py writes it) in Protobuf's bytes.

    >>> encode("KeyValue", {"key": "n", "value": {"intValue": "300"}}).hex(" ")
    '0a 01 6e 12 03 18 ac 02'
    """
    out = bytearray()
    for key, value in fields.items():
        number, how = FIELDS[name][key]
        for one in value if isinstance(value, list) else [value]:
            out += field(number, how, one)
    return bytes(out)


def field(number: int, how: str, value) -> bytes:
    """One field: its key, then its value written as `how` says."""
    if how in FIELDS or how in ("string", "hex"):
        data = (encode(how, value) if how in FIELDS else value.encode() if how == "string"
                else bytes.fromhex(value))
        return varint(number << 3 | LEN) + varint(len(data)) + data
    if how == "varint":  # an enum, a flag, an int64 (JSON has it as a decimal string)
        return varint(number << 3 | VARINT) + varint(int(value))
    if how == "fixed64":
        return varint(number << 3 | I64) + struct.pack("<Q", int(value))
    if how == "double":
        return varint(number << 3 | I64) + struct.pack("<d", value)
    if how == "fixed32":
        return varint(number << 3 | I32) + struct.pack("<I", value)
    raise ValueError(f"no way to write {how!r}")


def varint(n: int) -> bytes:
    """A whole number, 7 bits a byte, the lowest first; a negative one as its 64 bits.

    >>> varint(1).hex(), varint(300).hex(), len(varint(-1))
    ('01', 'ac02', 10)
    """
    n &= (1 << 64) - 1  # subtle: two's complement, so -1 is ten bytes, as Protobuf has it
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
