"""A JSON-RPC call to the office, read as strictly as the host's routes read theirs.

The request is one JSON object, read by the host's own reader (server.envelope:
microagent.host.request.read_fields, each key once, no NaN, no deeper than 8), with
known fields only at every level of its params (`fields`); a refusal is a `Failed`
with A2A's or JSON-RPC's code and words that name the field. An answer is JSON-RPC's
too, sent whole or as one server-sent event. It imports nothing of the host's, so it
can be imported first whatever imports the host next.
"""

import json

# A2A's errors as JSON-RPC codes (the spec's section 5.4), and JSON-RPC's own
NOT_FOUND, NOT_CANCELABLE, NO_PUSH, UNSUPPORTED, CONTENT_TYPE, BAD_VERSION = \
    -32001, -32002, -32003, -32004, -32005, -32009
PARSE, BAD_REQUEST, NO_METHOD, BAD_PARAMS = -32700, -32600, -32601, -32602
# a refusal of the host's routes, as a JSON-RPC error (401 and 429 stay HTTP's)
CODES = {400: BAD_PARAMS, 403: BAD_REQUEST, 404: NOT_FOUND, 409: UNSUPPORTED}
WORDS = {str: "string", int: "whole number", bool: "true or false", dict: "object",
         list: "list"}


class Failed(Exception):
    """A JSON-RPC error: its code, and a message that says what to do."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def id_of(body: bytes) -> str | int | None:
    """The request's id, if it has one an answer can carry (a string or a number)."""
    try:
        peek = json.loads(body)
    except (ValueError, RecursionError):
        return None
    rid = peek.get("id") if isinstance(peek, dict) else None
    return rid if type(rid) in (str, int) else None


def fields(value, where: str, required: dict, optional: dict | None = None) -> dict:
    """`value`, a JSON object with the `required` fields and no unknown ones, each of
    its type (name -> type); else an error that names the field."""
    known = {**required, **(optional or {})}
    if not isinstance(value, dict):
        raise Failed(BAD_PARAMS, f"{where} must be a JSON object")
    missing, unknown = required.keys() - value.keys(), value.keys() - known.keys()
    if missing or unknown:
        raise Failed(BAD_PARAMS, f"{where}: missing {sorted(missing)}, unknown "
                                 f"{sorted(unknown)}; its fields are {list(known)}")
    for name in value.keys() & known.keys():
        if type(value[name]) is not known[name]:  # `is`: True is an int in Python
            raise Failed(BAD_PARAMS, f"{where}.{name} must be a JSON {WORDS[known[name]]}")
    return value


def write(h, data: dict) -> bool:
    """One server-sent event of JSON-RPC; False if the client has gone."""
    try:
        h.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
        return True
    except OSError:
        return False


def result(rid, data: dict) -> dict:
    return {"jsonrpc": "2.0", "id": rid, "result": data}
