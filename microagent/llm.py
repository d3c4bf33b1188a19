"""An LLM brain: a Policy that asks a language model for the next move, over HTTP.

It speaks the OpenAI-compatible chat completions API (`POST {base_url}/chat/completions`),
which OpenAI, Ollama, llama.cpp's server, vLLM, LM Studio and many others serve,
with the standard library alone: urllib for the HTTP, json for the wire.

Two plain functions are the whole translation, and each can be read and tested alone:

    to_request(ctx, tools, model)   the notebook as chat messages, the tools as function specs
    to_actions(message)             the model's reply as Actions

    notebook                          on the wire
    system note, question             {"role": "system"}, {"role": "user"}
    decision note (the n-th)          {"role": "assistant", "tool_calls": [{"id": "call_n", ...}]}
    result note                       {"role": "tool", "tool_call_id": "call_n", "content": ...}
    a human's verdict                 folded into the result: "approved by alice with {...}: ..."
    out-of-steps note                 {"role": "assistant", "content": ...}

    reply                             Actions
    tool calls                        one Action per call, in order, arguments as the raw JSON text
    words and no tool call            Action("final_answer", {"answer": words}): the run ends

`chat_policy(model, base_url, ...)` is the brain built on them: it sends the
request, retries politely, yields the reply's text piece by piece as it streams
in (and then the tokens it cost), and returns the Actions. For a model without
native tool calling, `native_tools=False` describes the tools in the prompt and
reads one JSON object per turn instead. `recorded` and `replayed` turn a live
run into a file of decisions and back into an offline brain.

Cancelling a run (`agent.steps(..., cancel=event)`) takes effect at the next
piece of a streamed reply: the response is closed and nothing half-decided is
written. The timeout bounds each wait for the server, not a whole reply.

It leaves out: SDKs, images and audio, several choices per reply, structured
output modes, async, and a deadline for a whole reply.
"""

import inspect
import json
import os
import pathlib
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from http.client import HTTPException

from microagent.context import Context
from microagent.message import ASSISTANT, TOOL, USER
from microagent.policy import Action, decisions, scripted
from microagent.tool import Tool

IN_WORDS = "(a reply in words: the final answer)"  # the reasoning written for such a reply
MAX_WAIT = 60.0  # seconds: the longest Retry-After honoured, so a server can't park a run for hours


@dataclass(frozen=True)
class Usage:
    """The tokens one reply cost, as the server counted them."""
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class LLMError(RuntimeError):
    """The model server could not be used; the message says what to do about it."""


# --- the notebook as a request ---------------------------------------------------------

def tool_spec(tool: Tool) -> dict:
    """A tool as the function spec a model is shown.

    >>> from microagent.tool import final_answer
    >>> tool_spec(final_answer)["function"]["parameters"]
    {'type': 'object', 'properties': {'answer': {'type': 'string'}}, 'required': ['answer']}
    """
    return {"type": "function",
            "function": {"name": tool.name, "description": tool.description, "parameters": tool.schema}}


def to_messages(ctx: Context, native: bool = True) -> list[dict]:
    """The notebook as chat messages; the n-th decision's call gets the id call_n.

    >>> from microagent.message import Message
    >>> ctx = Context((Message("user", "2 + 3?"), Message("assistant", "add", tool="add", args='{"a": 2, "b": 3}'),
    ...                Message("tool", "5", name="add")))
    >>> for m in to_messages(ctx): print(m)
    {'role': 'user', 'content': '2 + 3?'}
    {'role': 'assistant', 'content': 'add', 'tool_calls': [{'id': 'call_1', 'type': 'function', 'function': {'name': 'add', 'arguments': '{"a": 2, "b": 3}'}}]}
    {'role': 'tool', 'tool_call_id': 'call_1', 'content': '5'}
    """  # noqa: E501 (the wire format, as it is)
    out, n, verdict = [], 0, ""
    for m in ctx:
        if m.role == ASSISTANT and m.tool is not None:  # a decision
            n += 1
            if native:
                call = {"id": f"call_{n}", "type": "function", "function": {"name": m.tool, "arguments": m.args}}
                out.append({"role": "assistant", "content": m.content or None, "tool_calls": [call]})
            else:  # the move written back as the JSON object the model was asked for
                move = {"tool": m.tool, "args": _parsed(m.args), "reasoning": m.content}
                out.append({"role": "assistant", "content": json.dumps(move, ensure_ascii=False)})
        elif m.role == USER and m.tool is not None:
            # subtle: a human's verdict sits between a decision and its result in the notebook,
            # but nothing may sit between a tool call and its result on the wire. So an approval
            # travels inside the result, where the model sees what it asked and what was approved.
            # A denial needs no help: its result note already says who denied it and why.
            verdict = "" if m.args is None else f"approved by {m.name} with {m.args}: "
        elif m.role == TOOL:  # only the result travels, never an inner agent's notes
            content, verdict = verdict + m.content, ""
            out.append({"role": "tool", "tool_call_id": f"call_{n}", "content": content} if native
                       else {"role": "user", "content": f"{m.name} returned: {content}"})
        else:  # the system note, a question, an out-of-steps note: as they are
            out.append({"role": m.role, "content": m.content})
    return out


def json_rules(tools: tuple[Tool, ...]) -> str:
    """The instructions that stand in for native tool calling: the tools, and one JSON object a turn."""
    lines = ["You work by calling tools. Each turn, reply with exactly one JSON object and nothing else:",
             '{"tool": "<a tool name>", "args": {<its arguments>}, "reasoning": "<why, in a few words>"}',
             "Call final_answer to give your answer. The tools, with the JSON Schema of their arguments:"]
    lines += [f"- {t.name}: {t.description} {json.dumps(t.schema)}" for t in tools]
    return "\n".join(lines)


def to_request(ctx: Context, tools: tuple[Tool, ...], model: str, *, temperature: float | None = 0.0,
               stream: bool = False, native: bool = True) -> dict:
    """The JSON body of one chat completions request: the whole notebook, the tools, the settings."""
    messages = to_messages(ctx, native)
    if not native:  # the tools go into the system prompt instead
        rules = json_rules(tools)
        if messages and messages[0]["role"] == "system":
            messages[0] = {"role": "system", "content": messages[0]["content"] + "\n\n" + rules}
        else:
            messages.insert(0, {"role": "system", "content": rules})
    body = {"model": model, "messages": messages}
    if native and tools:
        body["tools"] = [tool_spec(t) for t in tools]
    if temperature is not None:  # None: the server's default (some models accept no other)
        body["temperature"] = temperature
    body["stream"] = stream
    if stream:
        body["stream_options"] = {"include_usage": True}  # so the last chunk counts the tokens
    return body


# --- a reply as Actions ------------------------------------------------------------------

def to_actions(message: dict, native: bool = True) -> list[Action]:
    """The model's reply message as Actions: each tool call in order, or its words as the final answer.

    >>> to_actions({"role": "assistant", "content": None, "tool_calls": [
    ...     {"id": "x7", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]})
    [Action(tool='add', args='{"a": 2, "b": 3}', reasoning='')]
    >>> to_actions({"role": "assistant", "content": "It is 5."})[0].args
    '{"answer": "It is 5."}'
    """
    text = (message.get("content") or "").strip()
    if not native:
        return [read_move(text)]
    calls = message.get("tool_calls") or []
    if not calls:
        return [_in_words(text)]
    actions = []
    for i, call in enumerate(calls):
        fn = call.get("function") or {}
        # subtle: the arguments stay raw text. Broken JSON from the model is not ours to
        # fix: the loop turns it into an error note, and the model reads it next turn.
        # A name that is not text becomes "", which the loop answers the same way; arguments
        # sent as an object instead of text are turned into JSON text by Action itself.
        actions.append(Action(_text(fn.get("name")), fn.get("arguments") or "{}", text if i == 0 else ""))
    return actions


def read_move(text: str) -> Action:
    """The move in a reply written as JSON text: the first JSON object in it with a "tool".

    Code fences and chatter around the object are skipped. A reply with no "{" at all
    is the model answering in words (its final answer); one with an object that can't
    be read becomes a call to no tool, which the loop turns into an error note.

    >>> read_move('Sure!```json\\n{"tool": "add", "args": {"a": 2, "b": 3}, "reasoning": "sum"}\\n```')
    Action(tool='add', args='{"a": 2, "b": 3}', reasoning='sum')
    >>> read_move("It is 5.").tool, read_move('{"tool": "add", "args": {"a": 2,}}').tool
    ('final_answer', '')
    """
    decoder = json.JSONDecoder()
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            found, _end = decoder.raw_decode(text, start)  # one whole JSON value from here on
        except ValueError:
            continue
        if isinstance(found, dict) and isinstance(found.get("tool"), str):
            return Action(found["tool"], found.get("args", {}), _text(found.get("reasoning")))
    if "{" not in text:
        return _in_words(text)
    return Action("", "{}", f"(the reply was not one JSON object with a tool: {text})")


def _in_words(text: str) -> Action:
    if not text:  # an empty reply: final_answer without an answer, so the loop says what's missing
        return Action("final_answer", {}, "(the reply was empty)")
    return Action("final_answer", {"answer": text}, IN_WORDS)


def _text(value) -> str:
    return value if isinstance(value, str) else ""  # a name or a reasoning that is null, a number, ...


def _parsed(args: str):
    try:
        return json.loads(args)
    except ValueError:
        return args  # broken JSON goes back as the model wrote it


# --- the brain: one HTTP request per decision -------------------------------------------

def chat_policy(model: str, base_url: str = "http://localhost:11434/v1", *, api_key: str | None = None,
                api_key_env: str | None = None, temperature: float | None = 0.0, timeout: float = 60.0,
                retries: int = 3, stream: bool = True, native_tools: bool = True, sleep=time.sleep):
    """A brain that asks the model at `base_url` (OpenAI-compatible) for every next move.

    The key is `api_key`, or read from the environment variable named `api_key_env`;
    none is sent if neither is given (local servers need none). It is never printed.
    `timeout` bounds each wait for the server in seconds; 429 and 5xx answers are
    tried again `retries` times, waiting as the server asks (`sleep` does the waiting).
    The policy yields the reply's text (piece by piece when `stream`), then a Usage.
    """
    _check_settings(model, base_url, timeout, retries)
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
    url = base_url.rstrip("/") + "/chat/completions"
    headers = {"Content-Type": "application/json", "User-Agent": "microagent"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"

    def problem(status: int, detail: str, tries: int) -> str:
        """The words for a failed request; a server that repeats the key gets it blanked out."""
        detail = detail.replace(api_key, "[the key]") if api_key else detail
        return _http_problem(url, status, detail, tries, model, key_hint, native_tools)

    def policy(ctx: Context, tools: tuple[Tool, ...]):
        if "final_answer" not in [t.name for t in tools]:
            raise ValueError("an LLM brain needs the final_answer tool among the agent's tools: "
                             "a reply in words is the model's final answer, given through it")
        body = to_request(ctx, tools, model, temperature=temperature, stream=stream, native=native_tools)
        response = _post(url, json.dumps(body).encode(), headers, timeout, retries, sleep, problem)
        try:  # subtle: this finally also runs when the agent closes the generator on cancel
            if stream:
                message = yield from _read_stream(response, url, timeout)
            else:
                message, usage = _read_whole(response, url, timeout)
                if message["content"].strip():
                    yield message["content"]
                if usage is not None:
                    yield usage
        finally:
            response.close()
        return to_actions(message, native_tools)
    return policy


def _check_settings(model: str, base_url: str, timeout: float, retries: int) -> None:
    """Settings that can't work are a ValueError now, not a puzzling failure at the first request."""
    if not (isinstance(model, str) and model):
        raise ValueError(f"model must be the model's name on the server, not {model!r}")
    if not (isinstance(base_url, str) and base_url.startswith(("http://", "https://"))):
        raise ValueError(f"base_url must start with http:// or https://, not {base_url!r}")
    if not (isinstance(timeout, (int, float)) and 0 < timeout < float("inf")):
        raise ValueError(f"timeout must be a number of seconds above 0, not {timeout!r}")
    if not (isinstance(retries, int) and retries >= 0):
        raise ValueError(f"retries must be a whole number, 0 or more, not {retries!r}")


def _post(url: str, data: bytes, headers: dict, timeout: float, retries: int, sleep, problem):
    """Send the request; try again on 429 and 5xx; any other failure is an LLMError."""
    for attempt in range(retries + 1):
        try:
            return urllib.request.urlopen(urllib.request.Request(url, data, headers), timeout=timeout)
        except urllib.error.HTTPError as e:
            status, detail, wait = e.code, _detail(e), _retry_after(e.headers.get("Retry-After"), attempt)
            e.close()
            if (status != 429 and status < 500) or attempt == retries:
                raise LLMError(problem(status, detail, attempt + 1)) from None
        except urllib.error.URLError as e:  # the request never got through: the reason says why
            raise LLMError(_not_reached(url, timeout, e.reason)) from None
        except TimeoutError:
            raise LLMError(_timed_out(url, timeout, "to start answering")) from None
        except (OSError, HTTPException) as e:  # e.g. the server hung up without answering
            raise LLMError(_broken(url, e)) from None
        sleep(wait)


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
        return min(max(float(header), 0.0), MAX_WAIT)
    except (TypeError, ValueError):  # absent, or given as a date: back off on our own
        return min(2.0 ** attempt, MAX_WAIT)


def _detail(e: urllib.error.HTTPError) -> str:
    """The server's own words about an error, short: its JSON error message, or its body."""
    try:
        body = e.read().decode("utf-8", "replace")
    except (OSError, HTTPException):
        return ""
    try:
        said = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        said = body
    return " ".join(_said(said).split())[:200]


def _said(error) -> str:
    return str(error.get("message", error) if isinstance(error, dict) else error)


def _http_problem(url: str, status: int, detail: str, tries: int, model: str, key_hint: str,
                  native: bool) -> str:
    """What a failed status means, and what to do about it."""
    said = f" (the server said: {detail})" if detail else ""
    after = f", still after {tries} tries" if tries > 1 else ""  # 429 and 5xx are tried again
    if status in (401, 403):  # subtle: no detail here: some servers echo part of a wrong key
        return f"{url} refused the request (HTTP {status}): check the API key; {key_hint}"
    if status == 404:
        return (f"{url} answered 404 not found{said}: check the model name {model!r} "
                "(is it served there?) and the base URL (it usually ends in /v1)")
    if status == 429:
        return f"{url} is rate limiting (HTTP 429){after}{said}: wait, then try again"
    if status >= 500:
        return f"{url} failed with HTTP {status}{after}{said}: try again later"
    hint = " If the model cannot call tools, try native_tools=False." if native else ""
    return f"{url} rejected the request (HTTP {status}){said}.{hint}"


def _timed_out(url: str, timeout: float, what: str) -> str:
    return (f"{url} took longer than timeout={timeout:g}s {what}: is the model still loading? "
            "raise the timeout, or try a smaller model")


def _broken(url: str, e: Exception) -> str:
    return f"the connection to {url} broke before the reply was whole ({type(e).__name__}): try again"


def _not_chat(url: str) -> str:
    return f"{url} did not answer like a chat completions API: check the base URL (it usually ends in /v1)"


def _malformed(url: str, what: str, value) -> str:
    return f"{url} sent a reply that is not well formed: its {what} is {json.dumps(value)[:100]}"


def _words(content, url: str) -> str:
    """A reply's words: text, or OpenAI-style parts [{"type": "text", "text": ...}, ...] joined."""
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise LLMError(_malformed(url, "content", content))
    return "".join(p["text"] for p in content
                   if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))


def _calls(calls, url: str) -> list[dict]:
    """A reply's tool calls (or a delta's pieces of them), as long as they are a list of objects."""
    calls = [] if calls is None else calls
    if not (isinstance(calls, list) and all(isinstance(c, dict) and isinstance(c.get("function") or {}, dict)
                                            for c in calls)):
        raise LLMError(_malformed(url, "tool_calls", calls))
    return calls


def _read_whole(response, url: str, timeout: float) -> tuple[dict, Usage | None]:
    """A reply that was not streamed: its message (words as text, calls as a list) and its usage."""
    try:
        reply = json.loads(response.read())
        if reply.get("error"):
            raise LLMError(f"{url} answered with an error: {_said(reply['error'])}")
        message, usage = reply["choices"][0]["message"], _usage(reply.get("usage"))
    except TimeoutError:
        raise LLMError(_timed_out(url, timeout, "to send the reply")) from None
    except (OSError, HTTPException) as e:
        raise LLMError(_broken(url, e)) from None
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise LLMError(_not_chat(url)) from None
    if not isinstance(message, dict):
        raise LLMError(_malformed(url, "message", message))
    return {**message, "content": _words(message.get("content"), url),
            "tool_calls": _calls(message.get("tool_calls"), url)}, usage


def _read_stream(response, url: str, timeout: float):
    """A streamed reply: yield its text pieces as they come, then its Usage; return the whole message.

    The stream is server-sent events: lines of `data: {chunk}`, ending with `data: [DONE]`.
    A chunk's `delta` holds a piece of text, or pieces of tool calls keyed by `index`:
    the first piece of a call brings its id and name, the rest bring bits of its arguments.
    Some servers send no index, only whole calls: then a piece's place in the delta's list
    stands in for it, and a piece with a new id starts a new call.
    """
    text, calls, usage = [], [], None  # calls: [{"id", "type", "function": {"name", "arguments"}}]
    events, growing = 0, {}  # growing: index (or place in the list) -> the call its pieces add to
    try:
        for line in response:
            line = line.decode("utf-8").strip()
            if not line.startswith("data:"):  # the blank line after each event, ": comments"
                continue
            events, data = events + 1, line[len("data:"):].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if chunk.get("error"):
                raise LLMError(f"{url} reported an error mid-reply: {_said(chunk['error'])}")
            usage = _usage(chunk.get("usage")) or usage
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                words = _words(delta.get("content"), url)
                if words:
                    text.append(words)
                    yield words
                for position, piece in enumerate(_calls(delta.get("tool_calls"), url)):
                    key, new_id = piece.get("index", position), piece.get("id") or ""
                    call = growing.get(key)
                    if call is None or (new_id and call["id"] and new_id != call["id"]):
                        call = growing[key] = {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                        calls.append(call)
                    fn = piece.get("function") or {}
                    call["id"] = call["id"] or new_id
                    call["function"]["name"] = call["function"]["name"] or fn.get("name") or ""
                    more = fn.get("arguments") or ""
                    if not isinstance(more, str):  # some servers send the object itself, whole: write it as Action does
                        more = json.dumps(more, ensure_ascii=False)
                    call["function"]["arguments"] += more
    except TimeoutError:
        raise LLMError(_timed_out(url, timeout, "to send the next piece of the reply")) from None
    except (OSError, HTTPException) as e:
        raise LLMError(_broken(url, e)) from None
    except (ValueError, AttributeError, TypeError):
        raise LLMError(_not_chat(url)) from None
    if events == 0:  # not one event: whatever this is, it is not a stream of chunks
        raise LLMError(_not_chat(url))
    if usage is not None:
        yield usage
    message = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = calls  # in the order they began
    return message  # shaped like a reply that was not streamed, so to_actions can't tell them apart


def _usage(counts: dict | None) -> Usage | None:
    if not isinstance(counts, dict):
        return None
    prompt, completion = counts.get("prompt_tokens") or 0, counts.get("completion_tokens") or 0
    return Usage(prompt, completion, counts.get("total_tokens") or prompt + completion)


# --- record a live brain, replay it offline ----------------------------------------------

def recorded(policy, path: str | pathlib.Path):
    """`policy`, writing the run's decisions so far to `path` (JSON lines) each time it decides.

    It writes the decisions in the notebook it is handed. So wrap it around a brain
    that compacts (microagent.memory): `recorded(remembering(p), path)` records them
    all, while `remembering(recorded(p, path))` would see only the compacted notebook,
    and the decisions folded into its summary would drop out of the file.
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
        pathlib.Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
        return chosen
    return recording


def read_actions(path: str | pathlib.Path) -> list[Action]:
    """The Actions in a file written by `recorded`; a malformed line is a ValueError that says which."""
    actions = []
    for n, line in enumerate(pathlib.Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        try:
            d = json.loads(line)
            actions.append(Action(d["tool"], d["args"], d["reasoning"]))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}, line {n}: not a recorded action ({e})") from None
    return actions


def replayed(path: str | pathlib.Path):
    """A brain that makes again, offline, the decisions recorded in `path`."""
    return scripted(*read_actions(path))
