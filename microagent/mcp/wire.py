"""The wire both ends of MCP share: JSON-RPC 2.0, one message a line, over stdio.

A message is one JSON object on one line (JSON escapes every newline inside a
string, so a line is never cut in two). A request has an `id` and a `method`; its
reply has the same `id` and a `result` or an `error`; a notification has a
`method` and no `id`, and nobody answers it.

Two generations of the protocol are in use, and each end here speaks both:

    2026-07-28    no handshake: every request carries, in params._meta, its
                  protocol version and the client's capabilities; the server
                  answers `server/discover`, and every result says its resultType
    2025-11-25    (and earlier) a handshake first: `initialize`, its answer, then
                  the client's `notifications/initialized`

What it leaves out: batches (a JSON array of messages; MCP dropped them), and
every transport but stdio.
"""

import json

from microagent.tool import read_json

MODERN = ("2026-07-28",)  # the generations with no handshake, newest last
LEGACY = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")  # with initialize
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
CLIENT_KEY = "io.modelcontextprotocol/clientInfo"
SERVER_KEY = "io.modelcontextprotocol/serverInfo"

# JSON-RPC's own error codes, and the one MCP code both ends here use
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
INTERNAL_ERROR, UNSUPPORTED_VERSION = -32603, -32022

MAX_LINE = 16 << 20  # bytes: the longest message either end reads (16 MiB), so memory can't fill


def line(message: dict) -> bytes:
    """A message as the bytes of one line, ready to write.

    >>> line({"jsonrpc": "2.0", "method": "notifications/initialized"})
    b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\\n'
    """
    return json.dumps(message, ensure_ascii=False).encode() + b"\n"


def message(raw: bytes, clean=None) -> dict:
    """One line read off the wire as a message; a ValueError that says what is wrong
    if it is not JSON, a TypeError if it is JSON but not a message (an object).

    Read strictly (microagent.tool.read_json): a key given twice is refused, so a
    reply can't say one thing to one reader and another to the next. `clean`, a
    function of text, is run on the line before an error quotes (and cuts) it.

    >>> message(b'{"jsonrpc": "2.0", "id": 1, "result": {}}\\n')
    {'jsonrpc': '2.0', 'id': 1, 'result': {}}
    >>> message(b'Starting server on stdio...\\n')
    Traceback (most recent call last):
    ...
    ValueError: not JSON: 'Starting server on stdio...'
    >>> message(b'[1, 2]')
    Traceback (most recent call last):
    ...
    TypeError: not a JSON-RPC message (a JSON object): '[1, 2]'
    """
    text = raw.decode("utf-8", "replace").strip()
    try:
        found = read_json(text)
    except ValueError as e:  # not JSON at all, or JSON read_json refuses (a key twice, NaN)
        why = "not JSON" if str(e).startswith("the text is not valid JSON") else str(e)
        raise ValueError(f"{why}: {quote(text if clean is None else clean(text))}") from None
    if not isinstance(found, dict):
        raise TypeError(f"not a JSON-RPC message (a JSON object): "
                        f"{quote(text if clean is None else clean(text))}")
    return found


def quote(text: str, most: int = 200) -> str:
    """Someone else's words in ours: repr'd (so no control character passes), cut short."""
    return repr(text if len(text) <= most else text[:most] + "...")


def reply(id_, result: dict | None = None, *, code: int | None = None,
          said: str = "", data=None) -> dict:
    """The answer to request `id_`: its result, or (with `code`) an error."""
    if code is None:
        return {"jsonrpc": "2.0", "id": id_, "result": result}
    error = {"code": code, "message": said}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": id_, "error": error}
