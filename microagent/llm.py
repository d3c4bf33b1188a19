"""An LLM brain: a Policy that asks a language model for the next move, over HTTP.

The idea fits in a dozen lines (notebook 11 builds it): turn the notebook into a
chat completions request (microagent.chat), POST it to `{base_url}/chat/completions`,
and turn the reply back into Actions:

    def tiny_brain(ctx, tools):
        body = json.dumps(to_request(ctx, tools, "llama3.1")).encode()
        request = urllib.request.Request(base_url + "/chat/completions", body,
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request) as response:
            return to_actions(json.load(response)["choices"][0]["message"])

`chat_policy(model, base_url, ...)` is that brain made reliable, with the standard
library alone. It retries politely, yields the reply's text piece by piece as it
streams in (then the tokens it cost), and says in every error what to do. Each
reply is read honestly: one cut off at the token limit, an empty one, a stream
that stops before its end are never taken for an answer. Settings carry what
servers differ on (tool_choice, max_tokens, extra request fields, a JSON Schema
for a move). `recorded` and `replayed` turn a live run into a file of decisions
and back into an offline brain.

Under a hostile server: the key never leaves `base_url` (a redirect is refused),
and it is blanked out of anything a server says before that is cut short and
shown. A reply may be at most MAX_REPLY bytes, and is read in one pass.
Cancelling a run (`agent.steps(..., cancel=event)`) takes effect at the next
piece of a streamed reply (keep-alives and pieces of tool calls included, as
Waiting events) and during a wait before a retry: the response is closed and
nothing half-decided is written. A reply is read as it comes, a piece at a time
(never a whole line or body in one blocking read), so a server that sends a byte
at a time is still heard between bytes: the timeout bounds each wait for the
server, and the deadline bounds the whole reply. A key the server repeats in a
reply (its words, a call's name or arguments) is blanked out before the notebook
or a caller sees it.

It leaves out: SDKs, async, and a bound on how slowly the server sends its headers
(http.client reads them; it stops at 100 header lines).
"""

import inspect
import json
import math
import os
import pathlib
import re
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from http.client import HTTPException

from microagent.chat import (IN_WORDS, MOVE, _json_text, _text, described, encoded, json_rules,  # noqa: F401
                             move_schema, no_move, read_move, to_actions, to_messages, to_request, tool_spec)
from microagent.context import Context
from microagent.policy import Action, decisions, scripted
from microagent.tool import Tool

MAX_WAIT = 60.0  # seconds: the longest Retry-After honoured, so a server can't park a run for hours
MAX_REPLY = 8 << 20  # bytes: the most one reply may be (8 MiB), so a runaway server can't fill the memory
SAID = 300  # characters: the most of a server's own words an error quotes
READ = 64 << 10  # bytes: the most one read of a reply takes, so a cancel is heard between reads
RESPONSE_FORMATS = ("json_schema", "json_object")  # OpenAI's form, and the one llama.cpp's servers take
OURS = ("model", "messages", "tools", "tool_choice", "stream", "stream_options", "response_format",
        "temperature", "max_tokens")  # request fields the brain writes itself: not for `extra`


@dataclass(frozen=True)
class Usage:
    """The tokens one reply cost, as the server counted them."""
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


@dataclass(frozen=True)
class Waiting:
    """The brain is still at work, with no words to show yet: each one is a chance to cancel."""
    what: str  # "a keep-alive", "a call to add", "2s before trying again", ...


class LLMError(RuntimeError):
    """The model server could not be used; the message says what to do about it."""


# --- the brain: one HTTP request per decision -------------------------------------------

def chat_policy(model: str, base_url: str = "http://localhost:11434/v1", *, api_key: str | None = None,
                api_key_env: str | None = None, temperature: float | None = 0.0, max_tokens: int | None = None,
                tool_choice: str | dict | None = None, extra: dict | None = None, timeout: float = 60.0,
                deadline: float = 300.0, retries: int = 3, stream: bool = True, native_tools: bool = True,
                response_format: str | None = None, sleep=time.sleep):
    """A brain that asks the model at `base_url` (OpenAI-compatible) for every next move.

    The key is `api_key`, or read from the environment variable named `api_key_env`;
    none is sent if neither is given (local servers need none). It is never printed.
    `max_tokens` caps each reply (a reply cut off there is an error note the model reads).
    `tool_choice` is sent as given: "auto" (most servers' default when it is left out, but
    vLLM refuses it unless started with a flag), "required", or one tool by name,
    {"type": "function", "function": {"name": ...}}, the only way to get a tool call from
    llama.cpp's Python server with a model's own chat template. A named tool is forced on
    EVERY turn, so the run never reaches final_answer: for a whole run on that server, use
    native_tools=False with response_format="json_object" instead.
    `extra` holds further request fields a server needs, sent as given (llama.cpp's
    {"cache_prompt": true}, Ollama's {"options": {"num_ctx": 8192}}, ...).
    `response_format` ("json_schema", OpenAI's form, or "json_object", llama.cpp's) sends
    the JSON Schema of a move with `native_tools=False`, for servers that constrain output.
    `timeout` bounds each wait for the server in seconds; `deadline` bounds one whole
    reply, from the server's first answer to its last byte (a reply still coming then,
    from a model that never stops or a server that drips, is an LLMError; it is checked
    after each read, so it may run over by up to the timeout). 429 and 5xx
    answers are tried again `retries` times, waiting as the server asks (`sleep` does
    the waiting), unless the answer says the request itself is wrong.
    The policy yields the reply's text (piece by piece when `stream`), then a Usage;
    Waiting events stand for the pieces that are not words (keep-alives, tool calls, retries,
    each read of a whole reply): each is a chance to cancel.
    """
    _check_settings(model, base_url, timeout, deadline, retries, max_tokens, tool_choice, extra, native_tools,
                    response_format)
    if api_key is not None and not isinstance(api_key, str):
        raise TypeError("api_key is a string (or leave it out and name an environment variable: api_key_env=)")
    if api_key is None and api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            raise ValueError(f"the environment variable {api_key_env} is not set: set it to your API key")
        key_hint = f"the key in ${api_key_env}"  # what a refused request points at
    elif api_key:
        key_hint = "the api_key passed"
    else:
        key_hint = "no key was sent: pass api_key= or api_key_env="
    if api_key and not (api_key.isascii() and api_key.isprintable() and " " not in api_key):
        # subtle: never echo the key here; a ValueError from http.client would print it whole
        raise ValueError(f"{key_hint} has a space, a line break or a character outside plain ASCII "
                         "(a newline left by a .env file?): strip it; the key is not shown here")
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json", "User-Agent": "microagent"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    fields = {"max_tokens": max_tokens, "tool_choice": tool_choice, **(extra or {})}

    def problem(status: int, detail: str, tries: int, settled: bool = False) -> str:
        """The words for a failed request; a server that repeats the key gets it blanked out."""
        return _http_problem(url, status, _quote(_the_point(detail), api_key), tries, settled, model,
                             key_hint, native_tools, _too_long(detail))

    def policy(ctx: Context, tools: tuple[Tool, ...]):
        if "final_answer" not in [t.name for t in tools]:
            raise ValueError("an LLM brain needs the final_answer tool among the agent's tools: "
                             "a reply in words is the model's final answer, given through it")
        body = to_request(ctx, tools, model, temperature=temperature, stream=stream, native=native_tools,
                          response_format=response_format, **fields)
        response = yield from _post(url, encoded(body), headers, timeout, retries, sleep, problem)
        until = time.monotonic() + deadline  # the whole reply must be in by then
        try:  # subtle: this finally also runs when the agent closes the generator on cancel
            if stream:
                message, usage, finish = yield from _read_stream(response, url, timeout, api_key, until)
            else:
                message, usage, finish = yield from _read_whole(response, url, timeout, api_key, until)
                if message["content"].strip():
                    yield message["content"]
                if usage is not None:
                    yield usage
        finally:
            response.close()
        if finish == "length":  # cut off: whatever it wrote is not a whole move
            limit = usage.completion_tokens if usage else max_tokens
            at = f" at {limit} tokens" if limit else ""
            return [no_move(message["content"] or "", f"your reply was cut off{at}, before it was whole: "
                            "write a shorter one" + ("" if native_tools else "; " + MOVE))]
        return to_actions(message, native_tools)
    return policy


def _check_settings(model, base_url, timeout, deadline, retries, max_tokens, tool_choice, extra, native_tools,
                    response_format) -> None:
    """Settings that can't work are a ValueError now, not a puzzling failure at the first request."""
    if not (isinstance(model, str) and model):
        raise ValueError(f"model must be the model's name on the server, not {model!r}")
    if not (isinstance(base_url, str) and base_url.startswith(("http://", "https://"))):
        raise ValueError(f"base_url must start with http:// or https://, not {base_url!r}")
    if not (isinstance(timeout, (int, float)) and 0 < timeout < float("inf")):
        raise ValueError(f"timeout must be a number of seconds above 0, not {timeout!r}")
    if not (isinstance(deadline, (int, float)) and 0 < deadline < float("inf")):
        raise ValueError(f"deadline must be a number of seconds above 0 (for a whole reply), not {deadline!r}")
    if not (type(retries) is int and retries >= 0):  # subtle: True is an int in Python
        raise ValueError(f"retries must be a whole number, 0 or more, not {retries!r}")
    if not (max_tokens is None or (type(max_tokens) is int and max_tokens > 0)):
        raise ValueError(f"max_tokens must be a whole number above 0 (or None: the server's limit), not {max_tokens!r}")
    if not (tool_choice is None or isinstance(tool_choice, (str, dict))):
        raise ValueError(f'tool_choice is "auto", "required", "none" or a dict, as the server takes it, '
                         f"not {tool_choice!r}")
    if extra is not None:
        if not isinstance(extra, dict):
            raise ValueError(f"extra is a dict of further request fields, not {extra!r}")
        ours = [name for name in extra if name in OURS]
        if ours:
            raise ValueError(f"extra may not set {', '.join(ours)}: the brain writes those (use its own settings)")
        try:
            json.dumps(extra)
        except (TypeError, ValueError) as e:
            raise ValueError(f"extra must hold plain JSON values ({e})") from None
    if response_format not in (None, *RESPONSE_FORMATS):
        raise ValueError(f"response_format is one of {', '.join(RESPONSE_FORMATS)}, or None, not {response_format!r}")
    if response_format is not None and native_tools:
        raise ValueError("response_format describes a move as JSON text: it goes with native_tools=False")


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is not followed: it comes back as the HTTPError it is, and _post refuses it."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # subtle: following it would send the key (and the notebook) to another address


_OPENER = urllib.request.build_opener(_NoRedirects)  # urlopen's handlers, but this one for redirects


def _post(url: str, data: bytes, headers: dict, timeout: float, retries: int, sleep, problem):
    """Send the request; try again on 429 and 5xx; any other failure is an LLMError.

    It yields Waiting while it waits to try again, so a run can be cancelled then too.
    """
    before = None  # the last failure: the same 5xx twice is not going to change
    for attempt in range(retries + 1):
        try:
            return _OPENER.open(urllib.request.Request(url, data, headers), timeout=timeout)
        except urllib.error.HTTPError as e:
            status, detail, wait = e.code, _detail(e), _retry_after(e.headers.get("Retry-After"), attempt)
            if 300 <= status < 400:
                detail = str(e.headers.get("Location"))  # where it pointed is the detail that matters
            e.close()
            settled = status >= 500 and (_invalid(detail) or (status, detail) == before)
            if (status != 429 and status < 500) or attempt == retries or settled:
                raise LLMError(problem(status, detail, attempt + 1, settled)) from None
            before = status, detail
        except urllib.error.URLError as e:  # the request never got through: the reason says why
            raise LLMError(_not_reached(url, timeout, e.reason)) from None
        except TimeoutError:
            raise LLMError(_timed_out(url, timeout, "to start answering")) from None
        except (OSError, HTTPException) as e:  # e.g. the server hung up without answering
            raise LLMError(_broken(url, e)) from None
        while wait > 0:  # in short naps, so a cancel is heard between them
            yield Waiting(f"{wait:g}s before trying again")
            nap = min(wait, 1.0)
            sleep(nap)
            wait -= nap


def _not_reached(url: str, timeout: float, reason) -> str:
    """Why a request never got through (connecting or sending), and what to do about it."""
    if isinstance(reason, TimeoutError):  # subtle: a server that is up accepts at once, even mid-load
        return (f"{url} did not accept the connection within timeout={timeout:g}s: "
                "check the base URL, and that this machine can reach it")
    if isinstance(reason, ConnectionRefusedError):
        return f"could not connect to {url}: connection refused. Is the model server running, at that address?"
    if isinstance(reason, ConnectionError):  # reset or hung up while we were still sending
        return _broken(url, reason)
    return f"could not reach {url} ({reason}): check the base URL"  # no such host, TLS to a plain server, ...


def _retry_after(header: str | None, attempt: int) -> float:
    """Seconds to wait before trying again: what the server asked for, or else 1, 2, 4, ..."""
    try:
        seconds = float(header)
    except (TypeError, ValueError):  # absent, or given as a date: back off on our own
        seconds = float("nan")
    if math.isnan(seconds):  # subtle: float("nan") parses, and time.sleep refuses it
        seconds = 2.0 ** attempt
    return min(max(seconds, 0.0), MAX_WAIT)


def _detail(e: urllib.error.HTTPError) -> str:
    """The server's own words about an error, whole: its JSON error message, or its body."""
    try:
        body = e.read(64 << 10).decode("utf-8", "replace")  # a page of words is plenty
    except (OSError, HTTPException):
        return ""
    try:
        said = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError, IndexError, RecursionError):
        said = body
    return _said(said)


def _said(error) -> str:
    said = error.get("message", error) if isinstance(error, dict) else error
    return said if isinstance(said, str) else _shown(said)


def _the_point(detail: str) -> str:
    """Of a server's list of validation errors, the ones that matter, if it is such a list.

    A message that fits none of the kinds a server knows gets an error for each kind it
    is not ("Input should be 'system'", ...); those kinds drop out, and what is left says
    what is wrong with the kind it is (llama.cpp's Python server writes them this way):

    >>> print(_the_point("2 validation errors: "
    ...     "{'loc': ('body', 'messages', 1, 'System', 'role'), 'msg': 'Input should be system'} "
    ...     "{'loc': ('body', 'messages', 1, 'Assistant', 'content'), 'msg': 'Input should be a valid string'}"))
    2 validation errors; what matters: messages.1.Assistant.content: Input should be a valid string
    """
    found = [([part.strip(" '\"") for part in loc.split(",")], msg) for loc, _mark, msg in _PYDANTIC.findall(detail)]
    wrong_kinds = {tuple(loc[:-1]) for loc, msg in found if loc[-1] == "role" and msg.startswith("Input should be")}
    left = [".".join(p for p in loc if p != "body") + ": " + msg for loc, msg in found
            if tuple(loc[:-1]) not in wrong_kinds]
    if not (found and left):
        return detail
    count = detail.split(":")[0].strip()
    return f"{count}; what matters: " + "; ".join(left)


_PYDANTIC = re.compile(r"""'loc': \(([^)]*)\), 'msg': (['"])(.*?)\2""")  # one error of a pydantic list


def _invalid(detail: str) -> bool:
    """Does the server say the request itself is malformed (so trying again can't help)?"""
    return "validation error" in detail.lower()


def _too_long(detail: str) -> bool:
    """Does the server say the notebook is longer than the model's context?"""
    return bool(re.search(r"context.length|context window|maximum context|too many tokens|exceeds? the context",
                          detail, re.IGNORECASE))


def _http_problem(url: str, status: int, detail: str, tries: int, settled: bool, model: str, key_hint: str,
                  native: bool, too_long: bool) -> str:
    """What a failed status means, and what to do about it."""
    said = f" (the server said: {detail})" if detail else ""
    after = f", still after {tries} tries" if tries > 1 else ""  # 429 and 5xx are tried again
    if 300 <= status < 400:
        return (f"{url} redirected the request (HTTP {status}) to {detail}: it was not followed, since the "
                "key and the notebook go only to base_url. If that address is right, make it the base_url")
    if status in (401, 403):  # subtle: no detail here: some servers echo part of a wrong key
        return f"{url} refused the request (HTTP {status}): check the API key; {key_hint}"
    if too_long:
        return (f"{url} rejected the request (HTTP {status}): the notebook is longer than the model's context"
                f"{said}. Compact it (microagent.memory), or use a model with a longer context")
    if status == 404:
        return (f"{url} answered 404 not found{said}: check the model name {model!r} "
                "(is it served there?) and the base URL (it usually ends in /v1)")
    if status == 429:
        return f"{url} is rate limiting (HTTP 429){after}{said}: wait, then try again"
    if status >= 500 and settled:
        return (f"{url} failed with HTTP {status}{after}{said}: the server rejects this request as it is, "
                "so it was not tried again; a setting may not suit this server")
    if status >= 500:
        return f"{url} failed with HTTP {status}{after}{said}: try again later"
    about_tools = re.search(r"tool|function", detail, re.IGNORECASE)  # tools, tool_choice, function calling
    hint = " If the model cannot call tools, try native_tools=False." if native and about_tools else ""
    return f"{url} rejected the request (HTTP {status}){said}.{hint}"


def _timed_out(url: str, timeout: float, what: str) -> str:
    return (f"{url} took longer than timeout={timeout:g}s {what}: is the model still loading? "
            "raise the timeout, or try a smaller model")


def _broken(url: str, e: Exception) -> str:
    return f"the connection to {url} broke before the reply was whole ({type(e).__name__}): try again"


def _not_chat(url: str) -> str:
    return f"{url} did not answer like a chat completions API: check the base URL (it usually ends in /v1)"


def _too_big(url: str) -> str:
    return f"{url} sent a reply of more than {MAX_REPLY >> 20} MiB (MAX_REPLY): it was not read; set max_tokens"


def _overdue(url: str) -> str:
    return (f"{url} was still sending its reply at the deadline: a reply that may never end was cut off; "
            "set max_tokens, or raise the deadline (seconds for a whole reply)")


def _too_deep(url: str) -> str:
    return f"{url} sent a reply nested too deeply to read: it is not a chat completion"


def _malformed(url: str, what: str, value, key: str | None) -> str:
    return f"{url} sent a reply that is not well formed: its {what} is {_quote(_shown(value), key, 100)}"


def _shown(value) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (ValueError, TypeError, RecursionError):
        return "(something that can't be shown)"


def _quote(text: str, key: str | None, limit: int = SAID) -> str:
    """A server's words, fit for an error: the key blanked out FIRST, then cut short.

    >>> _quote("bad key sk-0123456789: " + "x" * 400, "sk-0123456789", 30)
    'bad key [the key]: xxxxxxxxxxx...'
    """
    # subtle: cutting first could cut the key in two, and the half before the cut would show
    text = _blanked(text, key)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _words(content, url: str, key: str | None) -> str:
    """A reply's words: text, or OpenAI-style parts [{"type": "text", "text": ...}, ...] joined."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise LLMError(_malformed(url, "content", content, key))
    return "".join(p["text"] for p in content
                   if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))


def _calls(calls, url: str, key: str | None) -> list[dict]:
    """A reply's tool calls (or a delta's pieces of them), as long as they are a list of objects."""
    calls = [] if calls is None else calls
    if not (isinstance(calls, list) and all(isinstance(c, dict) and isinstance(c.get("function") or {}, dict)
                                            for c in calls)):
        raise LLMError(_malformed(url, "tool_calls", calls, key))
    return calls


def _pieces(response, url: str, timeout: float, until: float):
    """A reply's bytes as they come, one read at a time, up to MAX_REPLY and the deadline.

    subtle: read1 returns what has come so far; readline() or read() would wait for a
    whole line or body, and a server that sends a byte at a time could hold that for ever.
    """
    size = 0
    while True:
        try:
            data = response.read1(READ)
        except TimeoutError:
            raise LLMError(_timed_out(url, timeout, "to send the next piece of the reply")) from None
        except (OSError, HTTPException) as e:
            raise LLMError(_broken(url, e)) from None
        if not data:
            return
        size += len(data)
        if size > MAX_REPLY:
            raise LLMError(_too_big(url))
        if time.monotonic() > until:
            raise LLMError(_overdue(url))
        yield data


def _lines(response, url: str, timeout: float, until: float):
    """The lines of a stream as they come (bytes), and None after a read that ended no line."""
    start = []  # the start of a line whose end has not come yet
    for data in _pieces(response, url, timeout, until):
        *ended, rest = data.split(b"\n")
        if ended:
            ended[0], start = b"".join(start) + ended[0], []
        start.append(rest)
        yield from ended or [None]
    if any(start):  # the last line, with no line break after it
        yield b"".join(start)


def _read_whole(response, url: str, timeout: float, key: str | None = None, until: float = math.inf):
    """A reply that was not streamed: its message (words as text, calls as a list), usage, finish_reason.

    It yields Waiting after each read, so a reply that comes slowly can be cancelled.
    """
    body = []
    for data in _pieces(response, url, timeout, until):
        body.append(data)
        yield Waiting("the reply comes in")
    try:
        reply = json.loads(b"".join(body))
    except RecursionError:
        raise LLMError(_too_deep(url)) from None
    except ValueError:
        raise LLMError(_not_chat(url)) from None
    if isinstance(reply, dict) and reply.get("error"):
        raise LLMError(f"{url} answered with an error: {_quote(_said(reply['error']), key)}")
    try:
        choice = reply["choices"][0]
        message, finish, usage = choice["message"], choice.get("finish_reason"), _usage(reply.get("usage"))
    except (KeyError, IndexError, TypeError, AttributeError):
        raise LLMError(_not_chat(url)) from None
    if not isinstance(message, dict):
        raise LLMError(_malformed(url, "message", message, key))
    calls = []
    for place, call in enumerate(_calls(message.get("tool_calls"), url, key)):
        _add_piece(calls, {}, {**call, "index": place}, place)  # each call whole, read by a stream's rule
    return _unkeyed({**message, "content": _words(message.get("content"), url, key), "tool_calls": calls},
                    key), usage, finish


def _read_stream(response, url: str, timeout: float, key: str | None = None, until: float = math.inf):
    """A streamed reply: yield its text pieces as they come, then its Usage; return what the whole one would.

    The stream is server-sent events: lines of `data: {chunk}`, ending with `data: [DONE]`.
    A chunk's `delta` holds a piece of text, or pieces of tool calls keyed by `index`:
    the first piece of a call brings its id and name, the rest bring bits of its arguments.
    Some servers send no index, only whole calls: then a piece's place in the delta's list
    stands in for it, and a piece with a new id starts a new call. Anything that is not
    words (a keep-alive, a piece of a call, a read that ended no line) is yielded as
    Waiting, so a cancel is heard.
    """
    text, calls, usage, finish = [], [], None, None  # calls: [{"id", "type", "function": {"name", "arguments"}}]
    events, growing, held = 0, {}, ""  # growing: index (or place) -> its call; held: words not shown yet
    done, alien = False, False  # [DONE] seen; a line no stream has
    try:
        for line in _lines(response, url, timeout, until):
            if line is None:  # half a line so far: the server is still writing it
                yield Waiting("the reply goes on")
                continue
            line = line.decode("utf-8").strip()
            if line.startswith(":"):  # a comment: a keep-alive while the model thinks
                yield Waiting("a keep-alive")
                continue
            if not line.startswith("data:"):  # the blank line after each event, event: and id: lines, ...
                alien = alien or not (line == "" or line.startswith(("event:", "id:", "retry:")))
                continue
            events, data = events + 1, line[len("data:"):].strip()
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if chunk.get("error"):
                raise LLMError(f"{url} reported an error mid-reply: {_quote(_said(chunk['error']), key)}")
            usage, said = _usage(chunk.get("usage")) or usage, ""
            for choice in chunk.get("choices") or []:
                finish = choice.get("finish_reason") or finish
                delta = choice.get("delta") or {}
                shown, held = _held_back(held + _words(delta.get("content"), url, key), key)
                # subtle: an emoji escaped as two halves (\ud83d\ude00) may be split between two
                # chunks; the half that comes first waits for the other before it is shown
                if not held and "\ud800" <= shown[-1:] <= "\udbff":
                    shown, held = shown[:-1], shown[-1:]
                said += shown
                for position, piece in enumerate(_calls(delta.get("tool_calls"), url, key)):
                    _add_piece(calls, growing, piece, position)
            if said:
                text.append(_mended(said))
                yield text[-1]
            else:
                name = _blanked(calls[-1]["function"]["name"], key) if calls else ""
                yield Waiting(f"a call to {name}" if calls else "the reply goes on")
    except RecursionError:
        raise LLMError(_too_deep(url)) from None
    except (ValueError, AttributeError, TypeError):
        raise LLMError(_not_chat(url)) from None
    if not done:
        if alien:  # not a stream of chunks at all: a web page, say
            raise LLMError(_not_chat(url))
        if events == 0:
            raise LLMError(f"{url} ended the stream without a reply: the server may not stream this request; "
                           "try stream=False")
        raise LLMError(f"{url} stopped mid-reply: the stream ended before data: [DONE], so the reply may not be "
                       "whole; try again, or try stream=False")
    if held:
        text.append(_mended(held))
    if usage is not None:
        yield usage
    for call in calls:
        call["function"]["arguments"] = _mended(call["function"]["arguments"])
    message = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = calls  # in the order they began
    # shaped like a reply that was not streamed, so to_actions can't tell
    return _unkeyed(message, key), usage, finish


def _add_piece(calls: list[dict], growing: dict, piece: dict, position: int) -> None:
    """Add one streamed piece of a tool call to the call it belongs to, or start a new one."""
    key, new_id = piece.get("index", position), piece.get("id") or ""
    call = growing.get(key)
    if call is None or (new_id and call["id"] and new_id != call["id"]):
        call = growing[key] = {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        calls.append(call)
    fn = piece.get("function") or {}
    call["id"] = call["id"] or new_id
    # subtle: some servers repeat the name in every piece: it is kept once, not added up
    call["function"]["name"] = call["function"]["name"] or _text(fn.get("name"))
    # some servers send the object itself, whole: written out by the rule a whole reply's follows
    call["function"]["arguments"] += _json_text(fn.get("arguments") or "")


def _blanked(text: str, key: str | None) -> str:
    """Text with the key (as it is, and as JSON escapes it) written as "[the key]"."""
    for form in {key, json.dumps(key)[1:-1]} if key else ():
        text = text.replace(form, "[the key]")
    return text


def _held_back(text: str, key: str | None) -> tuple[str, str]:
    """Streamed words, the key blanked: what can be shown now, and an end that may be the key's start.

    >>> _held_back("my key is sk-12", "sk-1234")
    ('my key is ', 'sk-12')
    """
    text = _blanked(text, key)
    for n in range(min(len(key or "") - 1, len(text)), 0, -1):
        if text.endswith(key[:n]):  # subtle: the rest of the key may come in the next chunk
            return text[:-n], text[-n:]
    return text, ""


def _unkeyed(message: dict, key: str | None) -> dict:
    """A reply message with the key blanked out of its words and its calls' names and arguments."""
    calls = [{**c, "function": {name: _blanked(value, key) for name, value in c["function"].items()}}
             for c in message.get("tool_calls") or []]
    return {**message, "content": _blanked(message["content"] or "", key) or message["content"],
            "tool_calls": calls}


def _mended(text: str) -> str:
    """Text with each pair of emoji halves joined into the emoji, and a half left alone as U+FFFD."""
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def _usage(counts) -> Usage | None:
    if not isinstance(counts, dict):
        return None
    prompt, completion, total = (counts.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens"))
    prompt, completion = (n if type(n) is int else 0 for n in (prompt, completion))
    return Usage(prompt, completion, total if type(total) is int else prompt + completion)


# --- record a live brain, replay it offline ----------------------------------------------

def recorded(policy, path: str | pathlib.Path):
    """`policy`, writing the run's decisions so far to `path` (JSON lines) each time it decides.

    It writes the decisions in the notebook it is handed (`decisions(ctx)`), those a
    memory summary folded included, so it records them all inside or outside
    `remembering` (microagent.memory).
    """
    if not callable(policy):
        raise TypeError("recorded takes a policy: a function (context, tools) -> Action")

    def recording(ctx: Context, tools: tuple[Tool, ...]):
        out = policy(ctx, tools)
        # subtle: the `yield from` makes `recording` a generator even when `policy` is a plain
        # function; the agent takes either kind of brain, so that changes nothing for it.
        if inspect.isgenerator(out):
            chosen = yield from out  # pass its events on; what it returns is its Action(s)
        else:
            chosen = out
        if isinstance(chosen, Action):
            chosen = [chosen]
        if not isinstance(chosen, (list, tuple)) or not all(isinstance(a, Action) for a in chosen):
            raise TypeError(f"the policy must return an Action or a list of them, not {chosen!r}")
        # subtle: the whole file is written again from the notebook, not appended to. The
        # notebook holds exactly the decisions that were made; an Action the agent dropped
        # (left over when a run paused or stopped) would put an appended file out of step.
        lines = [json.dumps({"tool": a.tool, "args": a.args, "reasoning": a.reasoning}, ensure_ascii=False)
                 for a in decisions(ctx) + list(chosen)]
        # subtle: half an emoji can't be written as UTF-8; backslashreplace writes it as \ud83d,
        # which is exactly how JSON escapes it, so the line still reads back as it was
        pathlib.Path(path).write_bytes(("\n".join(lines) + "\n").encode("utf-8", "backslashreplace"))
        return chosen
    return recording


def read_actions(path: str | pathlib.Path) -> list[Action]:
    """The Actions in a file written by `recorded`; a malformed line is a ValueError that says which."""
    actions = []
    for n, line in enumerate(pathlib.Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        try:
            d = json.loads(line)
            actions.append(Action(d["tool"], d["args"], d["reasoning"]))
        except RecursionError:
            raise ValueError(f"{path}, line {n}: not a recorded action (nested too deeply to read)") from None
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}, line {n}: not a recorded action ({e})") from None
    return actions


def replayed(path: str | pathlib.Path):
    """A brain that makes again, offline, the decisions recorded in `path`."""
    return scripted(*read_actions(path))
