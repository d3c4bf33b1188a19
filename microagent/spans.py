"""Spans: a run as OpenTelemetry sees it, one span for each thing that took time.

A span is a named stretch of time in a trace: its own id, and its parent span's. A
traced agent writes three kinds, named as OpenTelemetry's conventions for gen AI do:

    invoke_agent support              a run: from its first decision to its last span
      chat support_policy             each decision of the brain (chat <model>)
      execute_tool look_up_order      each tool call; an error note is an error status
        invoke_agent orders           an agent used as a tool: its run, inside the call

    written = []
    agent = traced(support_agent(), written.append)   # its brain and tools write spans
    with tracing():                                   # a trace: the runs inside
        ctx = agent.run(QUESTION)

The one rule: a traced agent is the agent it wraps, its brain and each tool wrapped,
and nothing in the loop. A run's span opens with its brain's first decision and is
written when the `tracing` block (or the tool call) it ran in ends; outside a block
nothing is written, and a traced agent runs exactly as the agent it wraps. Across
processes a span travels as the W3C `traceparent` header.

What it leaves out: sampling (every run in a block is written), tracestate, events
and links, and the wire: microagent/otel/ writes spans as OTLP.
"""

import contextlib
import contextvars
import dataclasses
import functools
import json
import re
import secrets
import time
import urllib.parse
from typing import NamedTuple

from microagent import genai
from microagent.agent import Agent
from microagent.message import Message
from microagent.policy import Action
from microagent.tool import Tool

SAMPLED, RANDOM = 0x01, 0x02  # the trace flags W3C defines (every span here is written)
CAP = 4000  # characters of one text a span keeps with content=True (the rest: said cut)


class Parent(NamedTuple):
    """A caller's span, as its traceparent names it (span_id None: a new trace)."""

    trace_id: str         # 32 lowercase hex digits
    span_id: str | None   # 16 lowercase hex digits
    flags: int = SAMPLED


@dataclasses.dataclass(eq=False)
class Span:
    """One stretch of time in a trace: a run, a decision, or a tool call."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str | None           # None: the first span of its trace
    kind: str = "internal"          # "client": a call to another process (a model)
    start: int = 0                  # nanoseconds since 1970
    end: int = 0
    attributes: dict = dataclasses.field(default_factory=dict)  # OpenTelemetry's names
    error: str | None = None        # what went wrong, in a word (None: nothing did)
    flags: int = SAMPLED
    remote: bool = False            # its parent is in another process
    above: object = dataclasses.field(default=None, repr=False)  # the Span or Parent
    by: object = dataclasses.field(default=None, repr=False)     # a run: whose it is
    to: object = dataclasses.field(default=None, repr=False)     # the record it goes to


# where new spans go: the Span open here, or the Parent of a block (None: not tracing)
_OPEN = contextvars.ContextVar("microagent.spans: the open span", default=None)
_RUNS = contextvars.ContextVar("microagent.spans: the runs of the innermost block")


def traced(thing: Agent | Tool, record, *, model: str | None = None,
           content: bool | int = False) -> Agent | Tool:
    """The same agent (or tool), writing each finished Span to `record` (a function).

    `model` names the brain in its chat spans (None: the brain function's name); an
    LLM brain whose send is `sending(...)` names its model itself. The words (the
    question and answer, the notebook a brain read and its move, a tool's arguments
    and result) may be long or private: only `content` writes them, each cut at CAP
    characters (or at `content`, a number), what looks like a secret as [hidden].
    """
    if not callable(record):
        raise TypeError("record is where finished spans go: a function of a Span, "
                        "like written.append or microagent.otel's Exporter")
    if not (type(content) is bool or (type(content) is int and content > 0)):
        raise TypeError(f"content is True, False, or the characters a text keeps (a "
                        f"whole number over 0), not {content!r}")
    cap = CAP if content is True else int(content)  # 0: no words
    if isinstance(thing, Tool):
        return _calling(thing, record, cap)
    if not isinstance(thing, Agent):
        raise TypeError(f"traced takes an Agent or a Tool, not {thing!r}")
    model = model or getattr(thing.policy, "__name__", "brain")
    tools = [_calling(t, record, cap) for t in thing.tools.values()]
    brain = _deciding(thing, record, model, cap)
    return Agent(brain, tools, thing.max_steps, name=thing.name)


@contextlib.contextmanager
def tracing(header: str | None = None):
    """A block whose runs are spans of one trace: children of the caller's span if
    `header` (its W3C traceparent, `00-<trace id>-<span id>-<flags>`) is well formed
    (if not, it is ignored, as W3C says); else of the span open here; else the start
    of a new trace."""
    above = None if header is None else parse_traceparent(header)
    with _block(above or _OPEN.get() or Parent(_new_id(16), None)):
        yield


def sending(send):
    """The LLM brain's seam (microagent.llm's `send`), traced: each request carries
    the traceparent of its chat span, which learns the model, the server, and the
    tokens and finish reason the reply reports. Outside a chat span it only sends."""
    def traced_send(url: str, body: bytes, headers: dict):
        chat = _OPEN.get()
        if not (isinstance(chat, Span)
                and chat.attributes["gen_ai.operation.name"] == "chat"):
            yield from send(url, body, headers)
            return
        _asked(chat, url, body)
        replies = send(url, body, {**headers, "traceparent": traceparent(chat)})
        try:
            for reply in replies:
                if isinstance(reply, dict):
                    _told(chat, reply)
                yield reply
        finally:  # the brain hung up (or the reply is over): so do we
            if hasattr(replies, "close"):
                replies.close()
    return traced_send


def traceparent(span: Span | Parent) -> str:
    """The W3C header that makes whoever receives it a child of `span`.

    >>> traceparent(Parent("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", 1))
    '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'
    """
    return f"00-{span.trace_id}-{span.span_id}-{span.flags:02x}"


def current() -> str | None:
    """The traceparent for a call made from here (the open span); None if none is open."""
    here = _OPEN.get()
    return None if here is None or here.span_id is None else traceparent(here)


# version-trace id-parent id-flags, in lowercase hex; a later version may add "-..."
_HEADER = re.compile(r"[ \t]*([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})"
                     r"(-[^\n]*)?[ \t]*\n?")


def parse_traceparent(header: str) -> Parent | None:
    """The caller's span in a W3C traceparent header; None if it is not well formed.

    >>> header = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    >>> parse_traceparent(header).span_id
    '00f067aa0ba902b7'
    >>> parse_traceparent(header.upper()) is None  # the hex digits are lowercase
    True
    """
    # 512 characters at most, a line break only at the very end (as OpenTelemetry reads)
    if not isinstance(header, str) or len(header) > 512:
        return None
    found = _HEADER.fullmatch(header)
    if found is None:
        return None
    version, trace_id, span_id, flags, more = found.groups()
    # ff is no version; 00 is exactly four fields; an id of all zeros names nothing
    if version == "ff" or (version == "00" and more) \
            or trace_id == "0" * 32 or span_id == "0" * 16:
        return None
    return Parent(trace_id, span_id, int(flags, 16))


# --- the wrappers: a brain, a tool ---------------------------------------------------


def _deciding(agent: Agent, record, model: str, cap: int):
    """The agent's brain, each decision a chat span inside the run it belongs to."""
    policy = agent.policy

    @functools.wraps(policy)
    def decide(ctx, tools):
        above = _OPEN.get()
        if above is None:  # not tracing
            return policy(ctx, tools)
        run = _run_for(above, ctx, agent.name, record, decide, cap)
        chat = _start(f"chat {model}", run, {
            "gen_ai.operation.name": "chat", "gen_ai.provider.name": "microagent",
            "gen_ai.request.model": model}, record)
        if cap:
            chat.attributes["gen_ai.input.messages"] = genai.as_json(
                [genai.message(m, cap) for m in ctx])
        token = _OPEN.set(chat)
        try:
            action = policy(ctx, tools)
            if cap and isinstance(action, Action):
                chat.attributes["gen_ai.output.messages"] = genai.as_json([genai.message(
                    agent.decision(action), cap, "stop" if action.tool is None else
                    "tool_call")])
            return action
        except BaseException as e:  # a brain that fails (or is stopped) ends its run
            chat.error = run.error = type(e).__name__
            raise
        finally:
            _OPEN.reset(token)
            _end(chat, record)
    return decide


def _run_for(above, ctx, name: str, record, by, cap: int) -> Span:
    """The run this decision belongs to: the one open here, or a new one."""
    last = ctx.last()
    fresh = last is None or last.kind == "question"  # the first move since a question
    if getattr(above, "by", None) is by:  # a run of this agent is open here
        if not fresh:
            return above
        above = above.above  # a new question: a new run beside the old one
    run = _start(f"invoke_agent {name}", above, {
        "gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "microagent",
        "gen_ai.agent.name": name}, record)
    run.by = by
    asked = [m for m in ctx if m.kind == "question"][-1:]  # a resumed run: its question
    if cap and asked:
        run.attributes.update({"input.value": genai.said(asked[0].content, cap),
                               "gen_ai.input.messages": genai.as_json(
                                   [genai.message(asked[0], cap)])})
    _RUNS.get().append((run, record))
    # subtle: left set, so the rest of the run is inside it; the block it runs in
    # (a tracing block, a tool call) puts back what was open, and writes the run
    _OPEN.set(run)
    return run


def _calling(tool: Tool, record, cap: int) -> Tool:
    """The tool, each call an execute_tool span; an error note, or a raise, an error."""
    @functools.wraps(tool.fn)
    def call(**args):
        above = _OPEN.get()
        if above is None:  # not tracing
            return tool.fn(**args)
        span = _start(f"execute_tool {tool.name}", above, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool.name,
            "gen_ai.tool.type": "function"}, record)
        if cap:
            span.attributes["gen_ai.tool.call.arguments"] = span.attributes[
                "input.value"] = genai.said(genai.arguments(args), cap)
            span.attributes["input.mime_type"] = "application/json"
        try:
            with _block(span):  # an agent used as this tool runs its run in here
                out = tool.fn(**args)
            if isinstance(out, Message) and out.error:
                span.error = "tool_error"  # OpenTelemetry's word for an error result
            if cap:
                text = out.content if isinstance(out, Message) else str(out)
                said = genai.said(text, cap)
                span.attributes["gen_ai.tool.call.result"] = \
                    span.attributes["output.value"] = said
                if tool.terminal and span.error is None and getattr(above, "by", None):
                    above.attributes.update({"output.value": said,  # the run's answer
                                             "gen_ai.output.messages": genai.as_json(
                                                 [genai.answer(said)])})
            return out
        except BaseException as e:  # its type only: its words may hold a secret (hiding)
            span.error = type(e).__name__
            raise
        finally:
            _end(span, record)
    return dataclasses.replace(tool, fn=call)


# --- spans: opened, ended, written -----------------------------------------------------


@contextlib.contextmanager
def _block(above):
    """New spans go under `above` in here; runs opened in here are written at the end."""
    tokens = _OPEN.set(above), _RUNS.set([])
    try:
        yield
    finally:
        runs = _RUNS.get()
        _OPEN.reset(tokens[0])
        _RUNS.reset(tokens[1])
        for run, record in runs:
            record(run)


def _start(name: str, above, attributes: dict, record) -> Span:
    # the random flag stays with its trace id; the others W3C reserves are sent as 0
    return Span(name, above.trace_id, _new_id(8), above.span_id, start=time.time_ns(),
                attributes=attributes, flags=above.flags & RANDOM | SAMPLED,
                remote=isinstance(above, Parent) and above.span_id is not None,
                above=above, to=record)


def _end(span: Span, record) -> None:
    span.end = time.time_ns()
    if isinstance(span.above, Span):  # a run ends with the last span inside it
        span.above.end = max(span.above.end, span.end)
    record(span)


def _new_id(size: int) -> str:
    """`size` random bytes in hex: a trace id (16) or a span id (8), never all zeros."""
    while (new := secrets.token_hex(size)) == "0" * 2 * size:
        pass
    return new


# --- what a model request and its reply say -------------------------------------------

FINISH = re.compile(r"[a-z_]{1,40}")  # "stop", "length", "tool_calls": a word, not words


def _asked(chat: Span, url: str, body: bytes) -> None:
    """The chat span learns the model and the server it asks."""
    try:
        model = json.loads(body).get("model")
    except (ValueError, AttributeError, RecursionError):
        model = None
    parts = urllib.parse.urlsplit(url)
    chat.kind = "client"
    chat.attributes.update({"gen_ai.provider.name": "openai",  # the wire format's maker
                            "server.address": parts.hostname or "",
                            "server.port": parts.port or (443 if parts.scheme == "https"
                                                          else 80)})
    if isinstance(model, str) and model:
        chat.name, chat.attributes["gen_ai.request.model"] = f"chat {model}", model


def _told(chat: Span, reply: dict) -> None:
    """What a reply (or a chunk of one) says of itself: the tokens used, why it ended.

    Only numbers and a word each are kept: a hostile server's text goes nowhere.
    """
    usage = reply.get("usage")
    if isinstance(usage, dict):
        for theirs, ours in (("prompt_tokens", "input_tokens"),
                             ("completion_tokens", "output_tokens")):
            if type(usage.get(theirs)) is int and 0 <= usage[theirs] < 2 ** 63:
                chat.attributes["gen_ai.usage." + ours] = usage[theirs]
    choices = reply.get("choices")
    for choice in choices if isinstance(choices, list) else ():
        why = choice.get("finish_reason") if isinstance(choice, dict) else None
        if isinstance(why, str) and FINISH.fullmatch(why):
            chat.attributes["gen_ai.response.finish_reasons"] = [why]
