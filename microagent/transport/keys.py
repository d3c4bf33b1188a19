"""Keeping the API key out of what a server sends back.

A hostile or careless server may repeat the key it was sent: in its error texts,
in the model's words, inside a tool call's arguments. Whatever it says ends up in
an exception, a log, the notebook, a browser. So everything a reply holds passes
through a `Key` first, which writes the key as "[the key]" wherever it stands:

- as it is, and as JSON may escape it: any character as \\u0041 (either case of
  hex), and / " \\ as \\/ \\" \\\\ (so `abc\\/DEF` is the key abc/DEF, in a
  JSON text the server quoted inside its error);
- split across the chunks of a stream: a piece of words (or of a call's
  arguments) that ends with what may be the start of the key is held back until
  the next piece shows whether it is, so the key is never shown in two halves;
- before an error text is cut short, never after (a cut could halve the key).

`Key(None)` (no key was sent) blanks nothing. Beside the key it mends the two
halves of an emoji split across chunks (a high surrogate waits for the low one).

What it leaves out: a key the server changes (reversed, or in base64), and a
piece of the key shorter than the whole (a server that cuts the key itself).
"""

import re

BLANK = "[the key]"


class Key:
    """The API key, and every way a JSON text may spell it."""

    def __init__(self, key: str | None):
        self.key = key or ""
        self.spellings = [_spellings(c) for c in self.key]  # per character
        self.longest = sum(max(map(len, s)) for s in self.spellings)
        self.pattern = re.compile("".join("(?:" + "|".join(map(re.escape, s)) + ")"
                                          for s in self.spellings)) if key else None

    def blanked(self, text: str) -> str:
        """`text` with the key, however spelled, written as [the key]."""
        return self.pattern.sub(BLANK, text) if self.pattern else text

    def begun(self, text: str) -> int:
        """How many characters at the end of `text` may be the start of the key (0: none)."""
        for start in range(max(0, len(text) - self.longest), len(text)):
            if self._begins(text[start:]):
                return len(text) - start
        return 0

    def _begins(self, tail: str) -> bool:
        """Is `tail` the start of a spelling of the key, short of the whole key?"""
        at = 0
        for spellings in self.spellings:
            if at == len(tail):
                return True
            rest = tail[at:]
            for spelled in spellings:
                if rest.startswith(spelled):
                    at += len(spelled)
                    break
                if spelled.startswith(rest):  # the tail ends inside this character
                    return True
            else:
                return False
        return False  # the whole key: blanked already, nothing to hold back

    def everywhere(self, value):
        """A JSON value (as json.loads gives it) with every string in it blanked, keys too."""
        if self.pattern is None:
            return value
        holder = [value]
        todo = [(holder, 0)]  # a stack, not recursion: a reply may be nested deeply
        while todo:
            parent, at = todo.pop()
            item = parent[at]
            if isinstance(item, str):
                parent[at] = self.blanked(item)
            elif isinstance(item, list):
                todo += [(item, i) for i in range(len(item))]
            elif isinstance(item, dict):
                parent[at] = item = {self.blanked(k): v for k, v in item.items()}
                todo += [(item, k) for k in item]
        return holder[0]

    def quoted(self, text: str, limit: int, cut: bool = False) -> str:
        """A server's words, fit for an error: blanked FIRST, then cut to `limit`.

        `cut`: the words were cut short already (a body read only so far), so an end
        that may be the start of the key goes too.

        >>> Key("sk-0123456789").quoted("bad key sk-0123456789: " + "x" * 400, 30)
        'bad key [the key]: xxxxxxxxxxx...'
        """
        text = self.blanked(text)
        if cut:
            text = text[:len(text) - self.begun(text)]
        text = " ".join(text.split())
        return text if len(text) <= limit else text[:limit] + "..."


class Pieces:
    """The words and the arguments of one streamed reply, passed on a chunk at a time,
    each blanked, holding back an end that may be the start of the key until the next
    chunk (and half an emoji until its other half)."""

    def __init__(self, key: Key):
        self.key, self.held = key, {}  # held: (choice, "content" or a call) -> text

    def chunk(self, chunk):
        """One chunk, blanked everywhere, its texts minus what is held back."""
        chunk = self.key.everywhere(chunk)
        for place, holder, field in _texts(chunk):
            text = self.key.blanked(self.held.pop(place, "") + holder[field])
            n = self.key.begun(text)
            if n == 0 and "\ud800" <= text[-1:] <= "\udbff":  # half an emoji
                n = 1
            self.held[place] = text[len(text) - n:]
            holder[field] = mended(text[:len(text) - n])
        return chunk

    def rest(self) -> list[dict]:
        """Chunks that carry what is held back, when the stream is over."""
        out = []
        for (choice, what), text in self.held.items():
            if not text:
                continue
            delta = {"content": mended(text)} if what == "content" else {
                "tool_calls": [{"index": what[1], "function": {"arguments": mended(text)}}]}
            out.append({"choices": [{"index": choice, "delta": delta}]})
        self.held = {}
        return out

    def whole(self, reply):
        """A whole reply, blanked everywhere, its texts mended."""
        reply = self.key.everywhere(reply)
        for _place, holder, field in _texts(reply):
            holder[field] = mended(holder[field])
        return reply


def mended(text: str) -> str:
    """Text with each pair of emoji halves joined, and a half left alone as U+FFFD."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _texts(reply):
    """Where a reply (or a chunk) holds words and arguments: (place, holder, field).

    Only these are added up across chunks; a name, an id, the rest are whole in each.
    """
    choices = reply.get("choices") if isinstance(reply, dict) else None
    for c, choice in enumerate(choices if isinstance(choices, list) else []):
        piece = choice.get("delta", choice.get("message")) if isinstance(choice, dict) else None
        if not isinstance(piece, dict):
            continue
        at = _place(choice.get("index"), c)
        if isinstance(piece.get("content"), str):
            yield (at, "content"), piece, "content"
        calls = piece.get("tool_calls")
        for i, call in enumerate(calls if isinstance(calls, list) else []):
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str):
                yield (at, ("call", _place(call.get("index"), i))), fn, "arguments"


def _place(index, position: int):
    return index if isinstance(index, (int, str)) else position


def _spellings(c: str) -> list[str]:
    """The ways a JSON text may spell one character of the key."""
    escaped = f"\\u{ord(c):04x}"
    forms = {c, escaped, escaped.upper().replace("\\U", "\\u")}
    if c in '"\\/':
        forms.add("\\" + c)
    return sorted(forms, key=len)
