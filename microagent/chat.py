"""The chat completions wire format: a notebook as a request, a reply as an Action.

Almost every model server speaks the OpenAI-compatible chat completions API. These
plain functions are the whole translation, with no HTTP in sight, so each can be read
and tested alone (microagent.llm sends what they make, and reads what comes back):
`to_request(ctx, tools, model)` makes the request, `to_action(message, tools)` reads
the reply.

The one rule: a request is made from the notebook and the settings alone, so the same
notebook always makes the same bytes, and each request starts with the whole of the one
before (a server's prompt cache reuses it). It leaves out images and audio, several
choices per reply, and the HTTP.
"""

import json
import re
from collections.abc import Mapping

from microagent.context import Context
from microagent.policy import Action
from microagent.schema import described
from microagent.tool import Tool

MOVE = 'reply with one JSON object: {"tool": ..., "args": {...}, "reasoning": ...}'
COMPACT = (",", ":")  # no space after a comma or a colon: each byte costs, each turn

# --- the notebook as a request ---------------------------------------------------------


def tool_spec(tool: Tool) -> dict:
    """A tool as the function spec a model is shown: its summary, and its parameters.

    >>> from microagent.tool import final_answer
    >>> tool_spec(final_answer)["function"]["parameters"]["properties"]
    {'answer': {'type': 'string'}}
    """
    summary, parameters = described(tool)
    return {"type": "function", "function": {
        "name": tool.name, "description": summary, "parameters": parameters}}


def to_messages(ctx: Context, native: bool = True, in_words=()) -> list[dict]:
    """The notebook as chat messages; the n-th decision's call gets the id call_n.

      a note                 on the wire
      system note, question  {"role": "system"}, {"role": "user"}
      the n-th decision      {"role": "assistant", "content": why, "tool_calls": [call_n]}
      its result             {"role": "tool", "tool_call_id": "call_n", "content": ...}
      a verdict              inside the result: "approved by alice with {...}: ..."
      a remark               {"role": "assistant", "content": ...}
      a no_move              {"role": "user", "content": "error: " + what was wrong}
      native=False           a move as compact JSON text; a result: "add returned: 5"

    A call of a tool named in `in_words` goes back as the words it answered with, as
    the assistant's content.

    >>> from microagent.message import Message
    >>> ctx = Context((Message("user", "2 + 3?"),
    ...                Message("assistant", "", tool="add", args='{"a": 2, "b": 3}'),
    ...                Message("tool", "5", name="add")))
    >>> for m in to_messages(ctx): print(m)  # doctest: +NORMALIZE_WHITESPACE
    {'role': 'user', 'content': '2 + 3?'}
    {'role': 'assistant', 'content': '',
     'tool_calls': [{'id': 'call_1', 'type': 'function',
                     'function': {'name': 'add', 'arguments': '{"a": 2, "b": 3}'}}]}
    {'role': 'tool', 'tool_call_id': 'call_1', 'content': '5'}
    """
    out, n, verdict, words = [], 0, "", False  # words: the last decision was words
    for m in ctx:
        if m.kind == "decision":
            verdict, words = "", m.tool in in_words
        if m.kind == "decision" and words:
            out.append({"role": "assistant", "content": _words(m)})
        elif m.kind == "decision" and native:
            n += 1
            call = {"id": f"call_{n}", "type": "function",
                    "function": {"name": m.tool, "arguments": m.args}}
            # "content" is text even when empty: some servers refuse a null
            out.append({"role": "assistant", "content": m.content, "tool_calls": [call]})
        elif m.kind == "decision":  # the move as the JSON the model was asked for
            move = {"tool": m.tool, "args": _parsed(m.args), "reasoning": m.content}
            out.append({"role": "assistant", "content": _compact(move)})
        elif m.kind == "verdict":
            # nothing may sit between a call and its result on the wire, so a yes travels
            # inside the result; a no needs no help: its result says who said no, and why
            verdict = "" if m.args is None else f"approved by {m.name} with {m.args}: "
        elif m.kind == "result" and words:  # the words were the answer: nothing to add,
            if m.error:                       # unless it failed
                out.append({"role": "user",
                            "content": "error: " + m.content.removeprefix("error: ")})
        elif m.kind == "result":  # only the result travels, never an inner agent's notes
            said = verdict + m.content
            if native:
                out.append({"role": "tool", "tool_call_id": f"call_{n}",
                            "content": said})
            else:
                out.append({"role": "user", "content": f"{m.name} returned: {said}"})
        elif m.kind == "no_move":
            out.append({"role": "user", "content": "error: " + m.content})
        else:  # the system note, a question, a remark: as they are
            out.append({"role": m.role, "content": m.content})
    return out


def json_rules(tools: Mapping[str, Tool]) -> str:
    """The prompt that stands in for native tool calls: the tools, one JSON a turn."""
    answer = _answer(tools)
    lines = ["You work by calling tools. Each turn, reply with exactly one JSON object "
             "and nothing else:",
             '{"tool": "<tool name>", "args": {<its arguments>}, "reasoning": "<why>"}']
    if answer is not None:
        lines.append(f"Call {answer.name} to give your answer.")
    lines.append("The tools, with the JSON Schema of their arguments:")
    lines += [f"- {t.name}: {summary} {_compact(schema)}"
              for t in tools.values() for summary, schema in [described(t)]]
    return "\n".join(lines)


def move_schema(tools: Mapping[str, Tool]) -> dict:
    """The JSON Schema of one move: a branch per tool, its name a constant, its args.

    >>> from microagent.tool import final_answer
    >>> move_schema({"final_answer": final_answer})["anyOf"][0]["properties"]["tool"]
    {'const': 'final_answer'}
    """
    return {"anyOf": [{"type": "object", "properties": {
        "tool": {"const": t.name}, "args": t.schema, "reasoning": {"type": "string"}},
        "required": ["tool", "args", "reasoning"], "additionalProperties": False}
        for t in tools.values()]}


def to_request(ctx: Context, tools: Mapping[str, Tool], model: str, *,
               native: bool = True, stream: bool = False, system: str | None = None,
               response_format: str | None = None, **fields) -> dict:
    """The JSON body of one chat completions request: settings, tools, then the notebook.

    `tools` is the agent's tools by name (agent.tools). `system` is a prompt sent first.
    `response_format` ("json_schema", OpenAI's form, or "json_object", llama.cpp's) sends
    the schema of a move, with `native=False`. `fields` (tool_choice, max_tokens,
    temperature, ...) are sent as given, unless None.

    A reply in words already is the answer, so the first terminal tool (final_answer)
    is not shown to the model (unless `tool_choice` forces a call every turn), and its
    calls go back as the words they answered with. A model without native tool calls
    gets `native=False`: the tools are described in the system prompt, and it replies
    with one JSON object a turn (`read_move`), or answers in words.
    """
    tools = _by_name(tools)
    choice = fields.get("tool_choice")
    forced = choice == "required" or isinstance(choice, dict)  # a call every turn
    answer = _answer(tools)  # its calls go back as words, unless the model must call it
    words = (answer.name,) if answer and not (native and forced) else ()
    messages = to_messages(ctx, native, words)
    head = [system] if system else []
    if messages and messages[0]["role"] == "system":  # one system message, first
        head.append(messages.pop(0)["content"])
    if not native:
        head.append(json_rules(tools))
    if head:
        messages.insert(0, {"role": "system", "content": "\n\n".join(head)})
    specs = [tool_spec(t) for t in tools.values() if native and t.name not in words]
    body = {"model": model}
    if specs:
        body["tools"] = specs
    else:
        fields.pop("tool_choice", None)  # no tools on the wire to choose from
    if response_format == "json_schema":
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "move", "schema": move_schema(tools)}}
    elif response_format == "json_object":
        body["response_format"] = {"type": "json_object", "schema": move_schema(tools)}
    elif response_format is not None:
        raise ValueError(f"response_format is json_schema, json_object or None, "
                         f"not {response_format!r}")
    if response_format is not None and native:
        raise ValueError("response_format describes a move as JSON text: it goes with "
                         "native=False")
    body.update({name: value for name, value in fields.items() if value is not None})
    if stream:  # and the last chunk counts the tokens
        body.update(stream=True, stream_options={"include_usage": True})
    # last: the notebook is the only part that grows, and only at its end
    body["messages"] = messages
    return body


def encoded(body: dict) -> bytes:
    """A request body as the bytes that go on the wire: compact JSON, text as UTF-8.

    >>> encoded({"model": "m", "messages": [{"role": "user", "content": "½?"}]})
    b'{"model":"m","messages":[{"role":"user","content":"\\xc2\\xbd?"}]}'
    """
    # half an emoji (a lone surrogate) can't be UTF-8; backslashreplace writes it as
    # \ud83d, which is how JSON escapes it, and it only ever stands inside a JSON string
    return _compact(body).encode("utf-8", "backslashreplace")


# --- a reply as an Action --------------------------------------------------------------


def to_action(message: dict, tools: Mapping[str, Tool], native: bool = True) -> Action:
    """The model's reply message as the next move: its first tool call, or its words.

      a reply                 the Action
      tool calls              the first call, its arguments as the raw JSON text
      words, and no call      the first terminal tool, called with the words
      nothing, or unreadable  Action(None, reasoning=what was wrong): a no_move note

    One move a reply: the loop makes one move a turn, so when a model asks for two
    calls at once, the first is made and the others are dropped. The model reads what
    its first call returned and asks again for what it still needs. (Keeping the
    others for later would be state outside the notebook, lost when a run pauses or
    is saved in between.) To make them all in one move, see
    microagent.parallel.at_once_action.

    Words sent as parts ([{"type": "text", "text": ...}, ...]) are joined; a part that
    is not text (an image, audio) is not read. A reply of any other shape is no move,
    whose reasoning says what was wrong, for the model to read.

    >>> from microagent.tool import final_answer
    >>> tools = {"final_answer": final_answer}
    >>> two = [{"function": {"name": "add", "arguments": '{"a": 2}'}},
    ...        {"function": {"name": "pay", "arguments": '{"amount": 9}'}}]
    >>> to_action({"content": None, "tool_calls": two}, tools)
    Action(tool='add', args='{"a": 2}', reasoning='')
    >>> to_action({"content": [{"type": "text", "text": "It is 5."}]}, tools)
    Action(tool='final_answer', args='{"answer": "It is 5."}', reasoning='')
    >>> to_action({"content": ""}, tools).reasoning
    'your reply was empty: call one of the tools, or answer in words'
    >>> to_action({"tool_calls": [None]}, tools).reasoning[:46]
    'your tool call could not be read (it was null)'
    """
    tools = _by_name(tools)
    expected = "call one of the tools, or answer in words" if native else MOVE
    if not isinstance(message, dict):  # the server's reader let something odd through
        return Action(None, reasoning=f"your reply could not be read (it was "
                                      f"{_kind(message)}, not a message): {expected}")
    content = message.get("content")
    try:
        text = text_of(content)
        unread = "no part of its content is text" if content and not text else ""
    except TypeError as e:  # content of another kind: no words to go on
        text, unread = "", str(e)
    calls = message.get("tool_calls") if native else None
    if unread and not (text.strip() or calls):  # nothing else to go on: say why
        return Action(None, reasoning=f"your reply held no words ({unread}): {expected}")
    if not native:
        return read_move(text, tools)
    if not calls:
        return _in_words(text, tools, expected)
    return _first_call(calls, tools, text.strip())


def _first_call(calls, tools: Mapping[str, Tool], why: str) -> Action:
    """The first of a reply's tool calls as the move, or no move saying what was wrong."""
    call = calls[0] if isinstance(calls, list) else None
    fn = call.get("function") if isinstance(call, dict) else None
    name = fn.get("name") if isinstance(fn, dict) else None
    if isinstance(name, str) and name:
        # the arguments stay the raw text: broken JSON is for the loop to turn into an
        # error note the model reads, not for us to mend
        return Action(name, _json_text(fn.get("arguments") or "{}"), why)
    if isinstance(fn, dict):
        return Action(None, reasoning=f"your tool call named no tool: call one of "
                                      f"{', '.join(tools)} by its name")
    if not isinstance(calls, list):
        what = f"the calls came as {_kind(calls)}, not a list"
    elif not isinstance(call, dict):
        what = f"it was {_kind(call)}"
    else:
        what = f"its function was {_kind(fn)}, not an object with a name and arguments"
    return Action(None, reasoning=f"your tool call could not be read ({what}): call one "
                                  f"of {', '.join(tools)} by its name")


def text_of(content) -> str:
    """A reply's words: its text, or its text parts joined (a part that is not text,
    an image or audio, is not read); content of any other kind is a TypeError.

    >>> text_of([{"type": "text", "text": "It is "}, {"type": "image_url"},
    ...          {"type": "text", "text": "5."}])
    'It is 5.'
    """
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise TypeError(f"its content was {_kind(content)}, not text")
    return "".join(p["text"] for p in content
                   if isinstance(p, dict) and isinstance(p.get("text"), str))


def read_move(text: str, tools: Mapping[str, Tool]) -> Action:
    """The move in a reply written as JSON text: its first JSON object with a "tool".

    Code fences and chatter around it are skipped; a reply with no "{" at all is words.

    >>> read_move('Sure! ```{"tool": "add", "args": {"a": 2}, "reasoning": "+"}```', {})
    Action(tool='add', args='{"a": 2}', reasoning='+')
    """
    if "{" not in text:
        return _in_words(text, _by_name(tools), MOVE)
    decoder, start, tries = json.JSONDecoder(), 0, 0
    # only a "{" then a quote can start a move, each is tried once, and at most 20 that
    # fail (each try may read to the end), so 400,000 "{" are read in one pass
    while tries < 20 and (found := _OPENING.search(text, start)):
        try:
            value, end = decoder.raw_decode(text, found.start())
        except (ValueError, RecursionError):  # broken, or nested too deeply to read
            tries, start = tries + 1, found.start() + 1
            continue
        if isinstance(value, dict) and isinstance(value.get("tool"), str):
            why = value.get("reasoning")
            return Action(value["tool"], _json_text(value.get("args", {})),
                          why if isinstance(why, str) else "")
        start = end  # an object that is not a move: nothing inside it is one either
    return Action(None, reasoning=f"your reply held no JSON object with a tool "
                                  f"(it began: {_start(text)}): {MOVE}")


_OPENING = re.compile(r'\{\s*"')


def _in_words(text: str, tools: Mapping[str, Tool], expected: str) -> Action:
    """A reply in words: the first terminal tool's call with them, or no move."""
    answer, words = _answer(tools), text.strip()
    if not words:  # the loop must not make up a move the model never made
        return Action(None, reasoning=f"your reply was empty: {expected}")
    if answer is None:
        return Action(None, reasoning=f"you answered in words ({_start(words)}), but no "
                                      f"tool here takes an answer: call one of "
                                      f"{', '.join(tools)}")
    schema = answer.schema
    names = schema.get("required") or list(schema.get("properties", {}))
    if not names:  # an answer that takes no arguments: the words are why
        return Action(answer.name, reasoning=words)
    return Action(answer.name, {names[0]: words})


def _answer(tools: Mapping[str, Tool]) -> Tool | None:
    """The tool a reply in words calls: the first terminal one."""
    return next((t for t in tools.values() if t.terminal), None)


def _by_name(tools) -> Mapping[str, Tool]:
    if not isinstance(tools, Mapping):
        raise TypeError("tools are the agent's tools by name (agent.tools), "
                        f"not {type(tools).__name__}")
    return tools


def _words(note) -> str:
    """The words a call in words answered with: its first text, or its reasoning."""
    args = _parsed(note.args or "{}")
    args = args.values() if isinstance(args, dict) else ()
    said = [v for v in args if isinstance(v, str)]
    return said[0] if said else note.content


def _start(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "..."


def _kind(value) -> str:
    """What kind of JSON value this is, in words: for a reply of the wrong shape."""
    return _KINDS.get(type(value), type(value).__name__)


_KINDS = {type(None): "null", bool: "true or false", int: "a number", float: "a number",
          str: "text", list: "a list", dict: "an object"}


def _compact(value) -> str:
    return json.dumps(value, ensure_ascii=False, separators=COMPACT)


def _json_text(args) -> str:
    """Arguments as JSON text: as the model wrote them, or written out from an object."""
    if isinstance(args, str):
        return args
    try:
        return json.dumps(args, ensure_ascii=False)  # as Action itself would write them
    except RecursionError:  # read within Python's limit, but one level too deep to write
        return "(arguments nested too deeply to write out)"  # not JSON: the loop says so


def _parsed(args: str):
    try:
        return json.loads(args)
    except (ValueError, RecursionError):
        return args  # broken JSON goes back as the model wrote it
