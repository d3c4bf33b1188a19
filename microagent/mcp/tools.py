"""A server's tools and answers, as the book's: a Tool, its name, its schema, a result.

The client's half of the translation (server.py's `listing` is the other way):
each tool a server lists becomes a `Tool` (`tool_from`, kept by microagent.progress,
so a failed call says how far its progress got) whose name chat APIs take
(`local_name`), none reading like another or like final_answer (`reads_as`), and
whose schema is one Tool's check can read (`checkable`); a call's result becomes
text (`said`), cut at MAX_RESULT characters (`cut`), or an error note (`failed`);
your secrets are blanked out of all it says (`blanked`).

Plain functions of data, no process and no wire: each has a worked example.
"""

import json
import re
import unicodedata

from microagent.message import Message
from microagent.mcp.wire import quote
from microagent.progress import keeping
from microagent.tool import Tool, error_note, final_answer

MAX_RESULT = 40_000  # characters of a result the brain reads (about 10,000 tokens)
NAME_LIMIT = 64  # characters of a tool's name the chat APIs take
MAX_DEPTH = 32  # levels of a schema the checks go into; below, any value passes


def tool_from(spec, call, prefix: str = "", taken=()) -> Tool:
    """One tool a server listed (`spec`), as a Tool whose run is `call(name, arguments)`
    under the server's own name; a ValueError saying why if it can't be one.

    >>> add = tool_from({"name": "get.sum", "inputSchema": {"type": "object"}},
    ...                 lambda name, arguments: f"{name} called with {arguments}")
    >>> add.name, add.run('{"a": 2}').content
    ('get_sum', "get.sum called with {'a': 2}")
    >>> tool_from({"name": "Final-Answer", "inputSchema": {}}, add)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: 'Final-Answer': its name reads like final_answer, the tool that ends...
    """
    name = spec.get("name") if isinstance(spec, dict) else None
    schema = spec.get("inputSchema") if isinstance(spec, dict) else None
    if not (isinstance(name, str) and name):
        raise ValueError(f"a tool with no name: {quote(json.dumps(spec))}")
    if not (isinstance(schema, dict) and schema.get("type", "object") == "object"):
        raise ValueError(f"{name!r}: its inputSchema is not a JSON Schema of an "
                         f"object: {quote(json.dumps(schema))}")
    if reads_as(local_name(prefix + name)) == reads_as(final_answer.name):
        raise ValueError(f"{name!r}: its name reads like {final_answer.name}, the tool "
                         "that ends a run; give tools(prefix=...) to keep it apart")
    about = spec.get("description")
    about = about if isinstance(about, str) and about else spec.get("title") or name
    fit = checkable(schema)
    fit.setdefault("type", "object")

    def run(**arguments) -> str | Message:
        return call(name, arguments)
    # kept: each call's progress checked on its own, and a failure says how far it got
    return keeping(Tool(local_name(prefix + name, taken), str(about), run, schema=fit))


def said(result: dict) -> str:
    """What a tools/call result says, as text: its text blocks, the others described.

    >>> said({"content": [{"type": "text", "text": "5"},
    ...                   {"type": "image", "data": "AAAA", "mimeType": "image/png"}]})
    '5\\n[an image, image/png, 3 bytes, not shown]'
    """
    blocks = result.get("content")
    parts = [_block(b) for b in blocks] if isinstance(blocks, list) else []
    if not parts and "structuredContent" in result:
        parts.append(json.dumps(result["structuredContent"], ensure_ascii=False))
    return "\n".join(parts)


def _block(block) -> str:
    if not isinstance(block, dict):
        return f"[a content block that is not an object: {quote(json.dumps(block))}]"
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return block["text"]
    if kind in ("image", "audio"):
        data = block.get("data")
        size = f", {len(data) * 3 // 4:,} bytes" if isinstance(data, str) else ""
        what = "an image" if kind == "image" else "audio"
        return f"[{what}, {_short(block.get('mimeType'))}{size}, not shown]"
    if kind == "resource_link":
        return (f"[a link to a resource: {_short(block.get('name'))}, "
                f"{_short(block.get('uri'))}]")
    if kind == "resource" and isinstance(block.get("resource"), dict):
        found = block["resource"]
        if isinstance(found.get("text"), str):
            return f"[a resource, {_short(found.get('uri'))}:]\n{found['text']}"
        return (f"[a resource, {_short(found.get('uri'))}, "
                f"{_short(found.get('mimeType'))}, not shown]")
    return f"[a content block of type {_short(kind)}, not shown]"


def _short(value) -> str:
    return value[:200] if isinstance(value, str) else "(none given)"


def cut(text: str, most: int) -> str:
    """`text`, or its first `most` characters and a note saying it was cut.

    >>> print(cut("a" * 12, 5))
    aaaaa
    [cut: the result was 12 characters; only the first 5 are above]
    """
    if len(text) <= most:
        return text
    return (f"{text[:most]}\n[cut: the result was {len(text):,} characters; only the "
            f"first {most:,} are above]")


def local_name(name: str, taken=()) -> str:
    """A name chat APIs take (^[a-zA-Z0-9_-]{1,64}$) for an MCP tool's name: accents
    dropped, each other odd character an _, cut at 64, and a number after it if it
    reads like a name `taken` (as `reads_as` compares them).

    >>> local_name("get-sum"), local_name("admin.tools.list"), local_name("2fa")
    ('get-sum', 'admin_tools_list', '_2fa')
    >>> local_name("météo"), local_name("mé téo")
    ('meteo', 'me_teo')
    >>> local_name("fіnal_answer")  # a Cyrillic і
    'f_nal_answer'
    >>> local_name("a.b", taken={"a_b"}), local_name("Get_Sum", taken={"get-sum"})
    ('a_b_2', 'Get_Sum_2')
    """
    # é: an e and an accent, and the accent goes
    plain = "".join(c for c in unicodedata.normalize("NFKD", name)
                    if not unicodedata.combining(c))
    plain = re.sub(r"[^A-Za-z0-9_-]", "_", plain)
    if not plain.replace("-", "").isidentifier():  # a digit first, or only hyphens
        plain = "_" + plain
    plain = plain[:NAME_LIMIT]
    seen = {reads_as(t) for t in taken}
    found, n = plain, 1
    while reads_as(found) in seen:
        n += 1
        found = f"{plain[:NAME_LIMIT - len(str(n)) - 1]}_{n}"
    return found


def reads_as(name: str) -> str:
    """What a name reads as, to a model: case and - against _ aside.

    >>> reads_as("Get-Sum") == reads_as("get_sum")
    True
    """
    return name.lower().replace("-", "_")


def checkable(schema, depth: int = 0):
    """A server's JSON Schema with every part the loop's checks read in a shape they
    can read: a copy, equal to the schema wherever it was well formed (`required` is
    kept only beside `properties`, the only place the checks read it).

    Tool checks type, enum, properties, required and items. A boolean schema, a
    `type` that names no type, `properties` that is not an object: any of these
    would make the check itself fail, so each is dropped (and passes anything),
    like everything below MAX_DEPTH levels. The rest ($ref, anyOf, descriptions)
    is kept as it came, for the brain to read.

    >>> checkable({"type": "object", "properties": {"x": True, "y": {"type": 5}}})
    {'type': 'object', 'properties': {'x': {}, 'y': {}}}
    """
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return {}
    kept = {k: v for k, v in schema.items()
            if k not in ("type", "enum", "properties", "required", "items")}
    kinds = schema.get("type")
    if isinstance(kinds, str) or (isinstance(kinds, list) and kinds
                                  and all(isinstance(k, str) for k in kinds)):
        kept["type"] = kinds
    if isinstance(schema.get("enum"), list):
        kept["enum"] = schema["enum"]
    props = schema.get("properties")
    if isinstance(props, dict):
        kept["properties"] = {k: checkable(v, depth + 1) for k, v in props.items()}
        required = schema.get("required")
        if isinstance(required, list):
            kept["required"] = [n for n in required if isinstance(n, str)]
    if isinstance(schema.get("items"), dict):
        kept["items"] = checkable(schema["items"], depth + 1)
    return kept


def failed(problem: str) -> Message:
    """An error note saying `problem` (once "error: ", however it came)."""
    return error_note(None, problem.removeprefix("error: "))


def blanked(value, secrets: dict[str, str]):
    """`value` (text, or a message read as JSON, keys too) with each of `secrets`'
    values written as its name: what a server says back never quotes your keys.

    >>> blanked({"said": ["the key is sk-12345678"]}, {"API_KEY": "sk-12345678"})
    {'said': ['the key is [API_KEY]']}
    """
    if not secrets:
        return value
    if isinstance(value, str):
        for key, secret in secrets.items():
            value = value.replace(secret, f"[{key}]")
        return value
    if isinstance(value, list):
        return [blanked(v, secrets) for v in value]
    if isinstance(value, dict):
        return {blanked(k, secrets): blanked(v, secrets) for k, v in value.items()}
    return value
