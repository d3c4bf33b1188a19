"""Request hygiene: a whole body of known size, strict JSON, known fields.

Every route reads its body through here, and every refusal is a `Refused`: its
status, and a message that says what to do. Nothing here knows a route.
"""

import re

from microagent.tool import read_json

MAX_BODY = 64 * 1024  # bytes a request's body may hold
MAX_TEXT = 4000  # characters a message may hold
MAX_DEPTH = 8  # JSON objects and lists inside one another
# on every answer of the API: never read as another type, never kept by a cache or a proxy
API_HEADERS = {"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
TYPE_WORDS = {str: "string", bool: "true or false", dict: "object"}  # a refusal says them


class Refused(Exception):
    """A request the server turns down: its status, and a message that says what to do."""

    def __init__(self, status: int, message: str, headers: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


def read_body(h) -> bytes:
    """The body of the request the Handler `h` serves: whole, of one known size."""
    if "Transfer-Encoding" in h.headers:
        raise Refused(411, "send the body with a Content-Length, not chunked")
    sizes = h.headers.get_all("Content-Length", ["0"])
    if len(sizes) != 1 or not re.fullmatch("[0-9]{1,12}", sizes[0]):  # "²".isdigit()
        raise Refused(400, "send one Content-Length: a whole number of bytes")
    size = int(sizes[0])
    if size > MAX_BODY:
        h.rfile.read(min(size, 1 << 20))  # read some, so the client hears the answer
        raise Refused(413, f"the body is over {MAX_BODY} bytes")
    body = h.rfile.read(size)
    if len(body) < size:  # the connection closed (or was closed: too slow) before the end
        raise TimeoutError
    return body


def read_fields(body: bytes, required: dict, optional: dict | None = None) -> dict:
    """The request's JSON object, read strictly (microagent.tool.read_json: a key
    given twice, NaN, 1e999), no deeper than MAX_DEPTH, no lone surrogates, known
    fields only: `required` and `optional` map each field's name to its type."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Refused(400, f"the body is not UTF-8 (byte {e.start + 1} is "
                           f"{body[e.start]:#04x}): send JSON text in UTF-8") from None
    try:
        data = read_json(text or "{}")
    except ValueError as e:
        why = f"the body is not valid JSON (one object, in UTF-8): {e}"
        raise Refused(400, why) from None
    _plain(data, 0)
    fields = {**required, **(optional or {})}  # name -> type
    if not isinstance(data, dict):
        named = ", ".join(fields) or "no fields"
        raise Refused(400, f"the body must be a JSON object with {named}")
    for name in fields.keys() & data.keys():
        if type(data[name]) is not fields[name]:  # `is`: True is an int in Python
            raise Refused(400, f'"{name}" must be a JSON {TYPE_WORDS[fields[name]]}')
    missing, unknown = required.keys() - data.keys(), data.keys() - fields.keys()
    if missing or unknown:
        raise Refused(400, f"missing {sorted(missing)}, unknown {sorted(unknown)}: "
                           f"the fields are {list(fields)}")
    return data


def _plain(value, depth: int) -> None:
    """Refuse JSON nested deeper than MAX_DEPTH, and strings that are not Unicode."""
    if depth > MAX_DEPTH:
        raise Refused(400, f"the JSON is nested deeper than {MAX_DEPTH} levels (objects "
                           "and lists inside one another): send it flatter")
    half = re.search(r"[\ud800-\udfff]", value) if isinstance(value, str) else None
    if half:  # JSON may write one ("\\ud800"); no UTF-8 can hold it, nothing prints it
        raise Refused(400, "the text holds a lone surrogate "
                           f"({ascii(half.group())[1:-1]}), which is not valid Unicode: "
                           "send whole characters")
    if isinstance(value, dict):
        value = [*value, *value.values()]  # keys and values alike
    for item in value if isinstance(value, list) else ():
        _plain(item, depth + 1)
