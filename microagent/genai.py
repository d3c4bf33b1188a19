"""A run's words as OpenTelemetry's gen AI conventions write them, for its spans.

A traced run (microagent.spans) writes the words only with `content=True`: the
question and answer, the notebook a brain read and its move, a tool's arguments and
result. They may be long or private, so each text is cut at a cap (saying how many
characters were left out), and what looks like a secret is written as [hidden].

The one rule: every text a span keeps passes through `said`, so none is kept whole
or unhidden. What it leaves out: a secret that looks like plain words (a card
number, a name): the patterns know a key by its prefix or by its name.
"""

import json
import re

from microagent.message import Message

# a bearer token, a key known by its prefix, a value named like a secret (key=..., token:)
SECRETS = [(re.compile(r"(?i)\b(bearer|basic)(\s+)[\w.~+/=-]{6,}"), r"\1\2[hidden]"),
           (re.compile(r"\b(?:sk|pk|rk)-[\w-]{6,}|\bgh[pousr]_\w{16,}"
                       r"|\bxox[abp]-[\w-]{8,}|\bAKIA[0-9A-Z]{16}\b"), "[hidden]"),
           (re.compile(r"(?i)((?:api[_-]?key|token|secret|password|passwd|authorization"
                       r"|credential|cookie)s?[\"']?\s*[:=]\s*[\"']?)"
                       r"(?!(?:bearer|basic)\s)[^\s\"',;&}]+"), r"\1[hidden]")]
SECRET_NAME = re.compile(r"(?i)key|token|secret|passw|authoriz|credential|cookie")


def said(text: str, cap: int) -> str:
    """A text as a span keeps it: what looks like a secret hidden, cut at `cap`.

    >>> said('Authorization: Bearer abc.def-123, {"api_key": "k-9", "id": "A1"}', 99)
    'Authorization: Bearer [hidden], {"api_key": "[hidden]", "id": "A1"}'
    >>> said("a long answer", 6)
    'a long… [7 more characters left out]'
    """
    for pattern, hidden in SECRETS:
        text = pattern.sub(hidden, text)
    return text if len(text) <= cap else \
        f"{text[:cap]}… [{len(text) - cap} more characters left out]"


def arguments(args: dict) -> str:
    """A tool's arguments as JSON text, a value under a secret's name hidden."""
    return json.dumps({k: "[hidden]" if SECRET_NAME.search(k) else v
                       for k, v in args.items()}, ensure_ascii=False, default=str)


def _text(words: str) -> dict:
    return {"type": "text", "content": words}


def answer(words: str) -> dict:
    """The run's answer as the message its agent ends with."""
    return {"role": "assistant", "parts": [_text(words)], "finish_reason": "stop"}


def message(note: Message, cap: int, finish: str | None = None) -> dict:
    """A note as the gen AI conventions write a message: a role and its parts."""
    if note.kind == "result":
        parts = [{"type": "tool_call_response", "response": said(note.content, cap)}]
    else:
        parts = [_text(said(note.content, cap))] if note.content else []
    if note.kind == "decision":
        try:
            args = arguments(json.loads(note.args))
        except (ValueError, TypeError, AttributeError, RecursionError):  # not a dict
            args = note.args
        parts.append({"type": "tool_call", "name": note.tool,
                      "arguments": said(args, cap)})
    out = {"role": note.role, "parts": parts}
    return out if finish is None else {**out, "finish_reason": finish}


def as_json(messages: list[dict]) -> str:
    """Messages as the JSON text a span's attribute holds."""
    return json.dumps(messages, ensure_ascii=False)
