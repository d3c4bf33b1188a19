"""The chat completions wire format: a notebook as chat messages, a model's reply as Actions.

Almost every model server speaks the OpenAI-compatible chat completions API. These
plain functions are the whole translation, with no HTTP in sight, so each can be read
and tested alone (microagent.llm sends what they make, and reads what comes back):

    to_request(ctx, tools, model)   the notebook as chat messages, the tools as function specs
    to_actions(message)             the model's reply as Actions

    notebook                          on the wire
    system note, question             {"role": "system"}, {"role": "user"}
    decision note (the n-th)          {"role": "assistant", "content": "", "tool_calls": [{"id": "call_n", ...}]}
    result note                       {"role": "tool", "tool_call_id": "call_n", "content": ...}
    a human's verdict                 folded into the result: "approved by alice with {...}: ..."
    out-of-steps note                 {"role": "assistant", "content": ...}
    a reply that held no move         what the model wrote, as it wrote it, then a user note: "error: ..."
    a reply in words (the answer)     the words, as the model wrote them
    a move read in JSON mode          the move as compact JSON, not the model's own text (the notebook keeps no raw text)

    reply                             Actions
    tool calls                        one Action per call, in order, arguments as the raw JSON text
    words and no tool call            Action("final_answer", {"answer": words}): the run ends
    nothing, or cut off               no_move(what it wrote, the problem): an error note next turn

For a model without native tool calling, `native=False` describes the tools in the
prompt and reads one JSON object per turn instead (`read_move`); `move_schema` is
the JSON Schema of such a move, for servers that can hold a model to a schema.

The one rule: nothing the loop wrote on the model's behalf goes back as if the model
wrote it. The model's own text goes back unchanged for a reply in words and for a
reply that held no move; a JSON-mode move that was read goes back rewritten, as
compact JSON, since the notebook keeps the move and not the text around it. It leaves out: images and audio, several choices per reply, and the HTTP.
"""  # noqa: E501 (the wire format, as it is)

import json
import re

from microagent.context import Context
from microagent.message import Message
from microagent.policy import Action
from microagent.tool import Tool

IN_WORDS = "(a reply in words: the final answer)"  # the reasoning written for such a reply
MOVE = 'reply with one JSON object with a tool: {"tool": ..., "args": {...}, "reasoning": ...}'
COMPACT = (",", ":")  # JSON with no space after a comma or a colon: every byte is paid for, every turn
SECTIONS = ("Args:", "Arguments:", "Parameters:", "Returns:", "Raises:", "Examples:", "Example:", "Note:")  # docstring

# --- the notebook as a request ---------------------------------------------------------

def tool_spec(tool: Tool) -> dict:
    """A tool as the function spec a model is shown: its summary, and each parameter's own description.

    >>> from microagent.tool import final_answer
    >>> tool_spec(final_answer)["function"]["parameters"]
    {'type': 'object', 'properties': {'answer': {'type': 'string'}}, 'required': ['answer']}
    """
    summary, parameters = described(tool)
    return {"type": "function", "function": {"name": tool.name, "description": summary, "parameters": parameters}}


def described(tool: Tool) -> tuple[str, dict]:
    """A tool's summary, and its schema with a description for each parameter its docstring's `Args:` names.

    A docstring with no `Args:` (or `Returns:`, ...) section is the summary, whole.

    >>> from microagent.schema import as_tool
    >>> @as_tool
    ... def refund(order_id: str, amount: float) -> str:
    ...     '''Refund an order.
    ...
    ...     Args:
    ...         order_id: The order's id,
    ...             like A1234.
    ...         amount (float): In dollars.
    ...     '''
    >>> summary, schema = described(refund)
    >>> summary, schema["properties"]
    ('Refund an order.', {'order_id': {'type': 'string', 'description': "The order's id, like A1234."}, \
'amount': {'type': 'number', 'description': 'In dollars.'}})
    """
    lines = tool.description.splitlines()
    heads = [i for i, line in enumerate(lines) if line.strip() in SECTIONS] + [len(lines)]
    if len(heads) == 1:
        return tool.description, tool.schema
    props, said, name = tool.schema["properties"], {}, None  # said: parameter -> its description
    for head, end in zip(heads[:-1], heads[1:], strict=True):
        if lines[head].strip() not in ("Args:", "Arguments:", "Parameters:"):
            continue
        for line in lines[head + 1:end]:
            found = re.match(r"\s+(\w+)\s*(?:\([^)]*\))?:\s*(.*)", line)
            if found and found.group(1) in props:  # "name: what it is", or "name (type): what it is"
                name = found.group(1)
                said[name] = found.group(2)
            elif name is not None and line.strip():  # a description goes on over the next lines
                said[name] += " " + line.strip()
    summary = "\n".join(lines[:heads[0]]).strip() or tool.description  # a docstring that starts with Args:
    return summary, {**tool.schema, "properties": {n: {**s, "description": said[n]} if n in said else s
                                                   for n, s in props.items()}}


def to_messages(ctx: Context, native: bool = True) -> list[dict]:
    """The notebook as chat messages; the n-th decision's call gets the id call_n.

    >>> from microagent.message import Message
    >>> ctx = Context((Message("user", "2 + 3?"), Message("assistant", "", tool="add", args='{"a": 2, "b": 3}'),
    ...                Message("tool", "5", name="add")))
    >>> for m in to_messages(ctx): print(m)
    {'role': 'user', 'content': '2 + 3?'}
    {'role': 'assistant', 'content': '', 'tool_calls': [{'id': 'call_1', 'type': 'function', 'function': {'name': 'add', 'arguments': '{"a": 2, "b": 3}'}}]}
    {'role': 'tool', 'tool_call_id': 'call_1', 'content': '5'}
    """  # noqa: E501 (the wire format, as it is)
    out, n, verdict = [], 0, ""
    owed = None  # a decision the loop wrote for the model: the problem to tell it ("" for words)
    for m in ctx:
        if m.is_decision and (_problem(m) is not None or _words_of(m) is not None):
            # subtle: the loop wrote this decision on the model's behalf. The model gets back
            # what it really wrote, and then (for a reply with no move) what was wrong with it.
            problem = _problem(m)
            out.append({"role": "assistant", "content": _words_of(m) if problem is None else m.content})
            owed = problem or ""
        elif m.is_decision:
            n += 1
            if native:  # subtle: "content" is text even when empty: some servers refuse null
                call = {"id": f"call_{n}", "type": "function", "function": {"name": m.tool, "arguments": m.args}}
                out.append({"role": "assistant", "content": m.content, "tool_calls": [call]})
            else:  # the move written back as the JSON object the model was asked for
                move = {"tool": m.tool, "args": _parsed(m.args), "reasoning": m.content}
                out.append({"role": "assistant", "content": json.dumps(move, ensure_ascii=False, separators=COMPACT)})
        elif m.is_verdict:
            # subtle: a human's verdict sits between a decision and its result in the notebook,
            # but nothing may sit between a tool call and its result on the wire. So an approval
            # travels inside the result, where the model sees what it asked and what was approved.
            # A denial needs no help: its result note already says who denied it and why.
            verdict = "" if m.args is None else f"approved by {m.name} with {m.args}: "
        elif m.is_result and owed is not None:  # words were the answer: no result, unless it failed
            if owed or m.error:
                out.append({"role": "user", "content": "error: " + (owed or m.content.removeprefix("error: "))})
            owed = None
        elif m.is_result:  # only the result travels, never an inner agent's notes
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
    lines += [f"- {t.name}: {summary} {json.dumps(schema, ensure_ascii=False, separators=COMPACT)}"
              for t in tools for summary, schema in [described(t)]]
    return "\n".join(lines)


def move_schema(tools: tuple[Tool, ...]) -> dict:
    """The JSON Schema of one move: one branch per tool, its name a constant, its arguments its own schema.

    >>> from microagent.tool import final_answer
    >>> move_schema((final_answer,))["anyOf"][0]["properties"]["tool"]
    {'const': 'final_answer'}
    """
    return {"anyOf": [{"type": "object",
                       "properties": {"tool": {"const": t.name}, "args": t.schema, "reasoning": {"type": "string"}},
                       "required": ["tool", "args", "reasoning"], "additionalProperties": False}
                      for t in tools]}


def to_request(ctx: Context, tools: tuple[Tool, ...], model: str, *, temperature: float | None = 0.0,
               stream: bool = False, native: bool = True, response_format: str | None = None,
               **fields) -> dict:
    """The JSON body of one chat completions request: the settings, the tools, then the whole notebook.

    It carries what the model needs and nothing else. With native tool calls a reply in
    words already is the final answer, so final_answer is not sent, unless `tool_choice`
    makes the model call a tool every turn. `response_format` ("json_schema" or
    "json_object") sends the schema of a move when `native` is False; `fields`
    (tool_choice, max_tokens, ...) are sent as given unless None.
    """
    messages = to_messages(ctx, native)
    if not native:  # the tools go into the system prompt instead
        rules = json_rules(tools)
        if messages and messages[0]["role"] == "system":
            messages[0] = {"role": "system", "content": messages[0]["content"] + "\n\n" + rules}
        else:
            messages.insert(0, {"role": "system", "content": rules})
    choice = fields.get("tool_choice")
    forced = choice == "required" or isinstance(choice, dict)  # a call every turn: final_answer is one
    specs = [tool_spec(t) for t in tools if forced or t.name != "final_answer"] if native else []
    body = {"model": model}
    if specs:
        body["tools"] = specs
    else:
        fields.pop("tool_choice", None)  # there are no tools on the wire to choose from
    if response_format == "json_schema":  # OpenAI's form
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "move", "schema": move_schema(tools)}}
    elif response_format == "json_object":  # the form llama.cpp's servers take
        body["response_format"] = {"type": "json_object", "schema": move_schema(tools)}
    if temperature is not None:  # None: the server's default (some models accept no other)
        body["temperature"] = temperature
    body.update({name: value for name, value in fields.items() if value is not None})
    body["stream"] = stream
    if stream:
        body["stream_options"] = {"include_usage": True}  # so the last chunk counts the tokens
    # subtle: the notebook goes last. It is the only part that grows, and only at its end, so each
    # request starts with the whole of the one before, byte for byte: a server's prompt cache reuses it
    body["messages"] = messages
    return body


def encoded(body: dict) -> bytes:
    """A request body as the bytes that go on the wire: compact JSON, text as UTF-8.

    >>> encoded({"model": "m", "messages": [{"role": "user", "content": "½?"}]})
    b'{"model":"m","messages":[{"role":"user","content":"\xc2\xbd?"}]}'
    """
    text = json.dumps(body, ensure_ascii=False, separators=COMPACT)
    # subtle: half an emoji (a lone surrogate) can't be UTF-8; backslashreplace writes it as \ud83d,
    # which is how JSON escapes it, and it can only stand inside a JSON string
    return text.encode("utf-8", "backslashreplace")


# --- a reply as Actions ------------------------------------------------------------------

def to_actions(message: dict, native: bool = True) -> list[Action]:
    """The model's reply message as Actions: each tool call in order, or its words as the final answer.

    >>> to_actions({"role": "assistant", "content": None, "tool_calls": [
    ...     {"id": "x7", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]})
    [Action(tool='add', args='{"a": 2, "b": 3}', reasoning='')]
    >>> to_actions({"role": "assistant", "content": "It is 5."})[0].args
    '{"answer": "It is 5."}'
    """
    text = message.get("content") or ""
    if not native:
        return [read_move(text)]
    calls = message.get("tool_calls") or []
    if not calls:
        return [_in_words(text, "call one of the tools, or answer in words")]
    actions = []
    for i, call in enumerate(calls):
        fn = call.get("function") or {}
        # subtle: the arguments stay raw text. Broken JSON from the model is not ours to
        # fix: the loop turns it into an error note, and the model reads it next turn.
        # A name that is not text becomes "", which the loop answers the same way; arguments
        # sent as an object instead of text are turned into JSON text by Action itself.
        actions.append(Action(_text(fn.get("name")), _json_text(fn.get("arguments") or "{}"),
                              text.strip() if i == 0 else ""))
    return actions


def read_move(text: str) -> Action:
    """The move in a reply written as JSON text: the first JSON object in it with a "tool".

    Code fences and chatter around the object are skipped. A reply with no "{" at all
    is the model answering in words (its final answer); one with no object that can be
    read as a move is no move: the model reads next turn what it wrote and what was wrong.

    >>> read_move('Sure!```json\\n{"tool": "add", "args": {"a": 2, "b": 3}, "reasoning": "sum"}\\n```')
    Action(tool='add', args='{"a": 2, "b": 3}', reasoning='sum')
    >>> read_move("It is 5.").tool, read_move('{"tool": "add", "args": {"a": 2,}}').tool
    ('final_answer', '')
    """
    if "{" not in text:
        return _in_words(text, MOVE)
    decoder, start, tries = json.JSONDecoder(), 0, 0
    # subtle: only a "{" followed by a quote can start a move, each start is tried once, and at
    # most 20 that fail: a failed try costs up to the whole text, so a reply of 400,000 "{" is
    # read in one pass, not 400,000.
    while tries < 20 and (found := _OPENING.search(text, start)):
        try:
            value, end = decoder.raw_decode(text, found.start())  # one whole JSON value from here on
        except (ValueError, RecursionError):  # broken, or nested too deep to read
            tries, start = tries + 1, found.start() + 1
            continue
        if isinstance(value, dict) and isinstance(value.get("tool"), str):
            return Action(value["tool"], _json_text(value.get("args", {})), _text(value.get("reasoning")))
        start = end  # an object that is not a move: what is inside it isn't either
    return no_move(text, f"your reply was not one JSON object with a tool: {MOVE}")


_OPENING = re.compile(r'\{\s*"')


def no_move(text: str, problem: str) -> Action:
    """The loop's stand-in for a reply that held no move: it keeps what the model wrote."""
    return Action("", {"problem": problem}, text)


def _problem(note: Message) -> str | None:
    """What was wrong with a reply that held no move, if this decision stands in for one."""
    if note.tool != "":
        return None
    said = _parsed(note.args)
    return said["problem"] if isinstance(said, dict) and isinstance(said.get("problem"), str) else None


def _words_of(note: Message) -> str | None:
    """The words the model wrote, if this decision is the final answer the loop wrote from them."""
    if note.tool != "final_answer" or note.content != IN_WORDS:
        return None
    said = _parsed(note.args)
    return said.get("answer") if isinstance(said, dict) and isinstance(said.get("answer"), str) else None


def _in_words(text: str, expected: str) -> Action:
    if not text.strip():  # an empty reply is no move: the loop must not make one up
        return no_move(text, f"your reply was empty: {expected}")
    return Action("final_answer", {"answer": text.strip()}, IN_WORDS)


def _json_text(args) -> str:
    """Arguments as JSON text: as the model wrote them, or written out if it sent an object."""
    if isinstance(args, str):
        return args
    try:
        return json.dumps(args, ensure_ascii=False)  # as Action itself would write them
    except RecursionError:  # subtle: read back within Python's limit, but one level too deep to write
        return "(arguments nested too deeply to write out)"  # not JSON: the loop says so in an error note


def _text(value) -> str:
    return value if isinstance(value, str) else ""  # a name or a reasoning that is null, a number, ...


def _parsed(args: str):
    try:
        return json.loads(args)
    except (ValueError, RecursionError):
        return args  # broken JSON goes back as the model wrote it
