"""An LLM brain: a Policy that asks a language model for each next move, over HTTP.

The idea fits in a dozen lines (notebook 11 builds it): the notebook as a chat
completions request (microagent.chat), POSTed to the model's server, and its
reply as the next Action:

    def tiny_brain(ctx, tools):
        body = json.dumps(to_request(ctx, tools, "llama3.1")).encode()
        request = urllib.request.Request(LOCAL + "/chat/completions", body,
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            message = json.load(response)["choices"][0]["message"]
        return to_action(message, tools)

`chat_policy(model, base_url)` is that brain, grown to stream, to read any reply
honestly, and to send through one seam. The one rule: the brain only reads and
answers. It returns one Action a turn and writes nothing itself, so a brain stopped
half way leaves the notebook whole. It leaves out retries, a bound on a server that
sends a byte at a time, SDKs and async.
"""

import json
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPException

from microagent.chat import encoded, text_of, to_action, to_request
from microagent.context import Context
from microagent.policy import Action

LOCAL = "http://localhost:11434/v1"  # Ollama, on this machine
OURS = ("model", "messages", "tools", "stream", "stream_options")  # the brain's own
SAID = 300  # characters: the most of a server's own words an error quotes
NOT_CHAT = ("did not answer like a chat completions API: check the base URL (it usually "
            "ends in /v1)")


class LLMError(RuntimeError):
    """The model server could not be used; the message says what to do about it."""


WHAT_TO_DO = {  # an HTTP status (or its hundred) -> what to do about it
    300: "it was not followed, since the key and the notebook go only to base_url: "
         "if the new address is right, make it the base_url",
    400: "the server refused the request as it is: a setting may not suit it",
    401: "check the API key", 403: "check the API key",
    404: "check the model's name (is it served there?) and the base URL (it usually "
         "ends in /v1)",
    429: "the server is rate limiting: wait, then try again",
    500: "the server failed: try again later",
}


def problem(url: str, status: int, said: str = "", todo: str | None = None) -> str:
    """What an HTTP error status means, and what to do about it, quoting the server.

    A refused key (401, 403) quotes nothing: some servers echo part of a wrong key.

    >>> problem("http://127.0.0.1:8080/v1/chat/completions", 429, "slow down")
    'http://127.0.0.1:8080/v1/chat/completions answered HTTP 429 (the server said: \
slow down): the server is rate limiting: wait, then try again'
    """
    todo = todo or WHAT_TO_DO.get(status) or WHAT_TO_DO.get(status // 100 * 100, "")
    quoted = f" (the server said: {said})" if said and status not in (401, 403) else ""
    return f"{url} answered HTTP {status}{quoted}: {todo or 'read what it said'}"


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args):  # following it would send the key elsewhere,
        return None                     # so the 3xx comes back as the error it is


# no proxy from the environment either: it would read the key and every notebook
_OPEN = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirects).open


def post(url: str, body: bytes, headers: dict, *, timeout: float = 60.0):
    """Send one request with urllib; yield the whole reply, or each chunk of a stream.

    `timeout` bounds each wait for the server, in seconds. A stream is server-sent
    events: lines of `data: {chunk}`, then `data: [DONE]`.
    """
    key = headers.get("Authorization", "").removeprefix("Bearer ")
    try:
        response = _OPEN(urllib.request.Request(url, body, headers), timeout=timeout)
    except urllib.error.HTTPError as e:
        with e:  # the server's words (a page is plenty), or where a redirect points
            said = e.read(64 << 10).decode("utf-8", "replace")
        if 300 <= e.code < 400:
            said = "go to " + e.headers.get("Location", "?")
        raise LLMError(problem(url, e.code, _said(said, key))) from None
    except (OSError, HTTPException) as e:  # nobody there, a timeout, a hang-up
        raise LLMError(_unreached(url, e, timeout)) from None
    try:
        with response:
            if "event-stream" not in response.headers.get("Content-Type", ""):
                yield _json(response.read(), url)
                return
            for line in response:
                if line.startswith(b"data:") and line[5:].strip() == b"[DONE]":
                    return
                if line.startswith(b"data:"):
                    yield _json(line[5:], url)
    except (OSError, HTTPException) as e:
        raise LLMError(_unreached(url, e, timeout, "mid-reply")) from None
    raise LLMError(f"{url} stopped mid-reply, before data: [DONE]: try again, "
                   "or try stream=False")


def chat_policy(model: str, base_url: str = LOCAL, *, api_key: str | None = None,
                system: str | None = None, stream: bool = True, native: bool = True,
                on_text=None, send=post, **request):
    """A brain that asks the model at `base_url` (OpenAI-compatible) for each next move.

    `api_key` is sent as a bearer token, if given (local servers need none). `system`
    is a prompt sent before the notebook. `native=False` is for a model without native
    tool calls: one JSON object a turn, and `response_format` may send its schema.
    `request` holds further request fields, sent as given: temperature, max_tokens,
    tool_choice ("required", or one tool: {"type": "function", "function": {...}}),
    a server's own ({"cache_prompt": True} for llama.cpp), ...

    It grows the dozen-line brain above by three things:

    - Streaming. The reply comes a few words a chunk, and `on_text(piece)` hears each
      piece as it comes ("" for a chunk with no words), so whoever made the brain sees
      it think. Raising in on_text stops the brain mid-reply: the response is closed,
      and nothing is written, since the loop writes only the Action a brain returns.
    - Honest reading. A reply cut off at the token limit, an empty one, or one with
      no move in it is Action(None, reasoning=what was wrong), which the model reads
      next turn; a server that fails is an LLMError that says what to do.
    - One seam. `send(url, body, headers)` does the HTTP and yields the reply's JSON
      objects: the whole reply, or each chunk of a stream (and {} while it waits, a
      chance to stop). `post` is this module's, plain urllib. The workshop's
      `microagent.transport.hardened()` plugs in here with retries, a deadline for a
      whole reply, and the key kept out of everything a hostile server sends back.

    The key goes only in the Authorization header to base_url (never to a proxy or a
    redirect), and is blanked out of a server's words that an error quotes.
    """
    url = _check(model, base_url, api_key, system, native, stream, request)
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"

    def policy(ctx: Context, tools) -> Action:
        body = to_request(ctx, tools, model, native=native, stream=stream, system=system,
                          **request)
        replies = send(url, encoded(body), headers)
        try:
            message, finish, used = _read(replies, url, on_text, api_key)
        finally:  # also when on_text raised: hang up on the rest of the reply
            if hasattr(replies, "close"):
                replies.close()
        if finish == "length":  # cut off: whatever it wrote is not a whole move
            limit = used or request.get("max_tokens")
            at = f" at {limit} tokens" if limit else ""
            return Action(None, reasoning=f"your reply was cut off{at}, before it was "
                          f"whole{_began(message['content'])}: write a shorter one")
        return to_action(message, tools, native)
    return policy


def endpoint(url: str, path: str, what: str, like: str) -> str:
    """The address to POST to: `url` checked, with `path` after its own (unless it ends
    with it), its query kept at the end. An error names `what` the address is for
    ("base_url is the server's address") and shows one `like` it should be.

    Every address the library is given (the model's, a trace collector's) is read here,
    so the same address is refused the same way everywhere, and a user:password@ in it
    is refused without being echoed.

    >>> endpoint("https://x.example/v1?api-version=2", "/chat/completions", "", "")
    'https://x.example/v1/chat/completions?api-version=2'
    """
    where = url.split("/")[2].split("?")[0] \
        if isinstance(url, str) and url.count("/") > 1 else ""
    if "@" in where:  # a user and a password: never echoed
        raise ValueError(f"{what}; send credentials in a header (api_key=, headers=), "
                         "not in the address (which is not shown here)")
    try:
        parts = urllib.parse.urlsplit(url)
        well_formed = parts.scheme in ("http", "https") and parts.hostname \
            and parts.port != 0 and not parts.fragment  # a port that is no number raises
    except (TypeError, ValueError, AttributeError):  # "http://[::1/v1", say
        well_formed = False
    if not well_formed:
        raise ValueError(f"{what}, http:// or https://, like {like!r}, "
                         f"not {url!r}")
    mine = parts.path.rstrip("/")
    mine = mine if mine.endswith(path) else mine + path
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, mine, parts.query, ""))


def _check(model, base_url, api_key, system, native, stream, request) -> str:
    """Settings that can't work are a ValueError now, not a puzzle at the first call;
    the address to POST to."""
    if not (isinstance(model, str) and model):
        raise ValueError(f"model is the model's name on the server, not {model!r}")
    url = endpoint(base_url, "/chat/completions", "base_url is the server's address",
                   LOCAL)
    if not (api_key is None or isinstance(api_key, str) and api_key.isascii()
            and api_key.isprintable() and " " not in api_key):
        # never echo the key: http.client's own error would print it whole
        raise ValueError("api_key is text, with no space, line break or character "
                         "outside plain ASCII (a newline left by a .env file?): the key "
                         "is not shown here")
    if not (system is None or isinstance(system, str)):
        raise TypeError(f"system is a prompt, a string, not {system!r}")
    if ours := [name for name in request if name in OURS]:
        raise ValueError(f"the brain writes {', '.join(ours)} itself: leave them out "
                         "(stream=True is a setting of chat_policy)")
    # a first request, from an empty notebook: what to_request refuses is refused now
    first = to_request(Context(), {}, model, native=native, stream=stream, system=system,
                       **request)
    try:
        json.dumps(first, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"request fields must be plain JSON values ({e})") from None
    return url


def _read(replies, url: str, on_text, key: str | None):
    """A whole reply, or a stream's chunks, as one reply message; its finish_reason, and
    the tokens it used. A chunk's `delta` holds a piece of text, or pieces of tool calls
    keyed by `index` (the first brings the id and name, the rest bits of the arguments).
    """
    words, calls, growing = [], [], {}  # growing: a call's index (or place) -> the call
    finish, used, chat = None, None, False
    for reply in replies:
        if isinstance(reply, dict) and reply.get("error"):
            raise LLMError(f"{url} answered with an error: {_said(reply['error'], key)}")
        try:
            chat, said = chat or "choices" in reply, ""
            for choice in reply.get("choices") or []:
                # a chunk's delta (null: nothing), or the whole reply's message
                piece = choice["delta"] or {} if "delta" in choice else choice["message"]
                finish = choice.get("finish_reason") or finish
                said += text_of(piece.get("content"))
                for place, call in enumerate(piece.get("tool_calls") or []):
                    _add(calls, growing, call, place)
            used = (reply.get("usage") or {}).get("completion_tokens", used)
        except (AttributeError, TypeError, KeyError) as e:  # a list where text goes, ...
            raise LLMError(f"{url} sent a reply that is not well formed "
                           f"({type(e).__name__}: {e})") from None
        words.append(said)
        if on_text is not None:
            on_text(said)
    if not chat:
        raise LLMError(f"{url} {NOT_CHAT}")
    message = {"role": "assistant", "content": "".join(words), "tool_calls": calls}
    return message, finish, used


def _add(calls: list, growing: dict, piece: dict, place: int) -> None:
    """Add a piece of a tool call to its call, or start a new one (a new index, or id).

    Servers that send no index send whole calls: a piece's place stands in for it.
    """
    fn = piece.get("function") or {}
    index, new = piece.get("index", place), piece.get("id") or ""
    call = growing.get(index)
    if call is None or (new and call["id"] and new != call["id"]):
        call = growing[index] = {"id": "", "function": {"name": "", "arguments": ""}}
        calls.append(call)
    call["id"] = call["id"] or new
    said = call["function"]  # some servers repeat the name in every piece: kept once
    said["name"] = said["name"] or fn.get("name") or ""
    if isinstance(fn.get("arguments"), str) and isinstance(said["arguments"], str):
        said["arguments"] += fn["arguments"]
    elif fn.get("arguments") is not None:  # an object, whole: chat writes it as JSON
        said["arguments"] = fn["arguments"]


def _said(error, key: str | None) -> str:
    """A server's words about an error, fit to quote: the key blanked FIRST, then cut."""
    if isinstance(error, str):
        try:
            error = json.loads(error)["error"]
        except (ValueError, KeyError, TypeError, IndexError, RecursionError):
            pass  # not an OpenAI-style {"error": ...}: the words as they are
    said = error.get("message", error) if isinstance(error, dict) else error
    text = said if isinstance(said, str) else json.dumps(said, ensure_ascii=False)
    escaped = json.dumps(key or "")[1:-1]  # the key as JSON escapes it: " \ and /
    for form in filter(None, {key, escaped, escaped.replace("/", "\\/")}):
        text = text.replace(form, "[the key]")
    text = " ".join(text.split())
    return text if len(text) <= SAID else text[:SAID] + "..."


def _json(data: bytes, url: str):
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # not JSON, or nested too deeply to read
        raise LLMError(f"{url} {NOT_CHAT}") from None


def _began(text: str | None) -> str:
    text = " ".join((text or "").split())
    return f" (it began: {text[:60]}...)" if text else ""


def _unreached(url: str, e: Exception, timeout: float, when: str = "") -> str:
    reason = getattr(e, "reason", e)  # urllib wraps what went wrong in a URLError
    if isinstance(reason, TimeoutError):
        return (f"{url} sent nothing for timeout={timeout:g}s{when and ' ' + when}: is "
                "the model still loading? raise the timeout, or try a smaller model")
    if when:
        return f"the connection to {url} broke {when} ({type(reason).__name__}): retry"
    if isinstance(reason, ConnectionRefusedError):
        return (f"could not connect to {url}: connection refused. Is the model server "
                "running, at that address?")
    return (f"could not reach {url} ({type(reason).__name__}: {reason}): "
            "check the base URL")
