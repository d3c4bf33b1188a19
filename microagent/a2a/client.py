"""A remote A2A agent as a coworker: its agent card read, and made a Tool.

    refunds = coworker("http://127.0.0.1:8000", token=token, timeout=30)
    manager = Agent(policy, [refunds, final_answer])

`coworker(url)` reads the agent card at url's /.well-known/agent-card.json (strictly:
a card that lies is refused then, not at the first call) and hands back a Tool named
and described after the card's skill, taking a `request` and, to go on with a task,
its `task_id`. Each call is one A2A task's turn: the message goes out (streamed when
the card says the agent streams, its words reaching `on_text` as they come), and
the task as it then stands comes back as a note:

    completed                     its artifacts, as text: the result
    failed, rejected, cancelled   an error note saying so, with the agent's words
    input_required                what the agent asks, and how to answer: the task id
    auth_required                 what it waits for, and how to look again later

The one rule: whatever the remote agent does, the run gets a note, within `timeout`
seconds for the whole call (a stream included). A stop of ours (on_text raising,
as microagent.host's `thinking` does when its client has gone) cancels the remote
task with CancelTask before it goes on. README.md says what of A2A is left out.
"""

import json
import math
import time
import urllib.parse
import uuid

from microagent.a2a.exchange import A2AError, replies
from microagent.llm import endpoint
from microagent.mcp.tools import MAX_RESULT, cut, local_name, reads_as
from microagent.message import Message
from microagent.tool import Tool, error_note, final_answer

VERSION = "1.0"  # the A2A version spoken: sent as A2A-Version, looked for on the card
CARD = "/.well-known/agent-card.json"
CANCEL_WAIT = 5.0  # seconds: the most a CancelTask after a stop may take
SAID = 300  # characters: the most of a remote agent's words an error quotes
ABOUT = 2_000  # characters: the most of a skill's description the brain is shown

COMPLETED = "TASK_STATE_COMPLETED"
ENDED = {"TASK_STATE_FAILED": "failed", "TASK_STATE_REJECTED": "rejected",
         "TASK_STATE_CANCELED": "was cancelled"}  # the other ends a task may come to
INPUT_REQUIRED, AUTH_REQUIRED = "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"
WAITS = (INPUT_REQUIRED, AUTH_REQUIRED)  # for us, or for a human
GOING = ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
# A2A's errors, in the words a note quotes
REFUSALS = {-32001: "no such task", -32002: "the task can't be cancelled",
            -32004: "it does not do that (a message to a task that has ended?)",
            -32009: f"it does not speak A2A {VERSION}", -32601: "no such method",
            -32602: "it found the request invalid"}

ARGUMENTS = {"type": "object", "required": ["request"], "properties": {
    "request": {"type": "string", "description": "what to ask, or your answer to its "
                                                 "question"},
    "task_id": {"type": "string", "description": "to go on with a task it left waiting: "
                                                 "its id"}}}


def coworker(url: str, *, token: str | None = None, timeout: float = 30.0, on_text=None,
             skill: str | None = None, name: str | None = None) -> Tool:
    """The remote A2A agent at `url` (or its agent card's URL) as a Tool.

    `token` is sent as a bearer token, and never shown; `timeout` bounds each call,
    the card's reading included; `on_text(piece)` hears a streaming agent's words as
    they come, and "" while it waits (raise there to stop: the remote task is
    cancelled); `skill` picks one of the card's skills by id when it has several;
    `name` overrides the tool's name. An A2AError if the card can't be used.
    """
    if not (type(timeout) in (int, float) and 0 < timeout < math.inf):
        raise ValueError(f"timeout must be a number of seconds above 0, not {timeout!r}")
    if not (token is None or isinstance(token, str) and token.isascii()
            and token.isprintable() and " " not in token and token):
        raise ValueError("token is text, with no space, line break or character outside "
                         "plain ASCII: the token is not shown here")
    if on_text is not None and not callable(on_text):
        raise TypeError(f"on_text is a function of one piece of text, not {on_text!r}")
    card_url = endpoint(url, CARD, "url is the remote agent's address, or its card's",
                        "http://127.0.0.1:8000")
    headers = {"A2A-Version": VERSION, "Accept": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    listen = on_text if on_text is not None else _deaf
    _, got = replies(card_url, None, headers, until=time.monotonic() + timeout,
                     listen=listen, token=token)
    agent, rpc_url, streams, chosen = _card(next(got), card_url, skill)
    tool_name = name or local_name(chosen["id"])
    if reads_as(tool_name) == reads_as(final_answer.name):
        raise ValueError(f"the skill {chosen['id']!r} reads like {final_answer.name}, "
                         "the tool that ends a run: give coworker(..., name=...)")
    headers["Content-Type"] = "application/json"
    if streams:
        headers["Accept"] = "text/event-stream, application/json"

    def call(method: str, params: dict, until: float, hear=listen):
        """Whether a stream came, and the results of one JSON-RPC call, checked."""
        ask_id = str(uuid.uuid4())
        body = json.dumps({"jsonrpc": "2.0", "id": ask_id, "method": method,
                           "params": params}).encode()
        stream, got = replies(rpc_url, body, headers, until=until, listen=hear,
                              token=token)
        return stream, (_result(reply, ask_id, agent, method) for reply in got)

    def ask(request: str, task_id: str = "") -> str | Message:
        until = time.monotonic() + timeout
        task = {"id": task_id} if task_id else {}  # as far as we know it
        try:
            if task_id and not request:  # look how it stands, say nothing
                _, got = call("GetTask", {"id": task_id}, until)
                _follow(task, ({"task": found} for found in got), agent, _deaf, False)
            else:
                message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
                           "parts": [{"text": request}], **({"taskId": task_id}
                                                          if task_id else {})}
                method = "SendStreamingMessage" if streams else "SendMessage"
                stream, got = call(method, {"message": message}, until)
                if streams and not stream:
                    next(got)  # a JSON-RPC error says more than we could
                    raise A2AError(f"{agent}'s card says it streams, but it answered "
                                   "SendStreamingMessage with no stream: its card lies; "
                                   "ask whoever runs it")
                _follow(task, got, agent, listen, streams)
        except BaseException as e:  # a stop of ours, or a broken reply mid-task
            cancelled = _cancel(task, call, stopped=not isinstance(e, A2AError))
            if not isinstance(e, A2AError):
                raise
            return error_note(tool_name, f"{e}{cancelled}")
        return _told(task, agent, tool_name)
    about = (f"Ask {agent}, an agent in another process ({chosen['name'][:100]}: "
             f"{cut(chosen['description'], ABOUT)}). It may ask you something back, or "
             "wait for a human: then go on with the same task_id.")
    return Tool(tool_name, about, ask, schema=ARGUMENTS)


def _deaf(piece: str) -> None:
    """An on_text that hears nothing (nobody stops the call)."""


def _card(card, url: str, skill: str | None):
    """The agent's name, its JSON-RPC address, whether it streams, and the skill."""
    if not isinstance(card, dict):
        raise A2AError(f"{url} is not an agent card (a JSON object): check the address")
    agent = card.get("name")
    if not (isinstance(agent, str) and agent.strip()):
        raise A2AError(f"the agent card at {url} has no name: it is not an A2A card")
    agent = json.dumps(agent[:100], ensure_ascii=False)
    offers = card.get("supportedInterfaces")
    if not isinstance(offers, list) or not offers:
        old = card.get("protocolVersion")
        raise A2AError(f"{agent} has a card with no supportedInterfaces" + (
            f": it speaks A2A {json.dumps(str(old)[:20])}; this client speaks {VERSION}"
            if old is not None else f": it is not an A2A {VERSION} card"))
    offers = [o for o in offers if isinstance(o, dict)]
    ours = [o for o in offers if o.get("protocolBinding") == "JSONRPC"
            and str(o.get("protocolVersion")).split(".")[:2] == VERSION.split(".")]
    if not ours:
        spoken = sorted({f"{o.get('protocolBinding')} {o.get('protocolVersion')}"
                         for o in offers})
        raise A2AError(f"{agent} speaks A2A as {json.dumps(spoken)[:SAID]}; this client "
                       f"speaks only A2A {VERSION} over JSON-RPC")
    try:
        rpc_url = endpoint(ours[0].get("url"), "", f"{agent}'s card gives no usable URL",
                           "http://127.0.0.1:8000/")
    except ValueError as e:  # its words, cut: a card may hold a URL of a megabyte
        raise A2AError(cut(str(e), SAID)) from None
    if _origin(rpc_url) != _origin(url):  # it would take the token somewhere else
        raise A2AError(f"{agent}'s card, at {_origin(url)}, sends its calls to "
                       f"{_origin(rpc_url)}: the token goes only where you said, so it "
                       "is not used; give coworker() the agent's own address")
    capabilities = card.get("capabilities")
    streams = capabilities.get("streaming", False) if isinstance(capabilities,
                                                                 dict) else None
    if type(streams) is not bool:
        raise A2AError(f"{agent}'s card has no capabilities.streaming it could mean "
                       f"(true or false): it is not an A2A {VERSION} card")
    skills = card.get("skills")
    skills = [s for s in skills if isinstance(s, dict) and all(
        isinstance(s.get(k), str) and s[k] for k in ("id", "name", "description"))] \
        if isinstance(skills, list) else []
    ids = [s["id"] for s in skills]
    if skill is None and len(skills) == 1:
        return agent, rpc_url, streams, skills[0]
    if skill in ids:
        return agent, rpc_url, streams, skills[ids.index(skill)]
    if skill is None and not skills:
        raise A2AError(f"{agent}'s card lists no skill (with an id, a name and a "
                       "description): there is nothing to call it for")
    which = "" if skill is None else f"no skill {skill!r}; "
    raise A2AError(f"{agent}'s card has {which}its skills are "
                   f"{json.dumps(ids)[:SAID]}: give coworker(..., skill=...) one of them")


def _origin(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return f"{parts.scheme}://{parts.hostname}:{port}"


def _result(reply, ask_id: str, agent: str, method: str) -> dict:
    """The result of a JSON-RPC reply to `method`, or an A2AError saying what is wrong."""
    if not (isinstance(reply, dict) and reply.get("jsonrpc") == "2.0"
            and reply.get("id") == ask_id and ("result" in reply) != ("error" in reply)):
        raise A2AError(f"{agent} answered {method} with no JSON-RPC 2.0 reply to it: "
                       f"{json.dumps(reply)[:SAID]}")
    if "error" in reply:
        error = reply["error"] if isinstance(reply["error"], dict) else {}
        code, said = error.get("code"), error.get("message")
        what = REFUSALS.get(code, f"error {code}") if type(code) is int else "an error"
        raise A2AError(f"{agent} refused {method}: {what}: "
                       f"{json.dumps(said, ensure_ascii=False)[:SAID]}")
    if not isinstance(reply["result"], dict):
        raise A2AError(f"{agent} answered {method} with a result that is not an object")
    return reply["result"]


def _follow(task: dict, results, agent: str, listen, stream: bool) -> None:
    """Bring `task` (what we know of it) up to date with `results` (a whole reply's
    one, or a stream's events), until it ends or waits; words heard go to `listen`."""
    for result in results:
        if isinstance(result.get("message"), dict) and len(result) == 1:
            task.update(state=COMPLETED, words=_text(result["message"].get("parts")),
                        answered=True)  # an answer with no task
            return
        if isinstance(found := result.get("task"), dict):
            _same(task, found.get("id"), agent)
            task["artifacts"] = _artifacts(found.get("artifacts"), agent)
            status = found.get("status")
        elif isinstance(update := result.get("statusUpdate"), dict):
            _same(task, update.get("taskId"), agent)
            status = update.get("status")
        elif isinstance(update := result.get("artifactUpdate"), dict):
            _same(task, update.get("taskId"), agent)
            _artifact(task.setdefault("artifacts", {}), update, agent, listen)
            continue
        else:
            raise A2AError(f"{agent} sent an event that is none of A2A's: "
                           f"{json.dumps(result)[:SAID]}")
        state = status.get("state") if isinstance(status, dict) else None
        if state not in (COMPLETED, *ENDED, *WAITS, *GOING):
            raise A2AError(f"{agent} said task {task['id']} is in a state A2A has not: "
                           f"{json.dumps(state)[:SAID]}")
        message = status.get("message")
        words = _text(message.get("parts")) if isinstance(message, dict) else ""
        task.update(state=state, words=words)
        if state in GOING and words:
            listen(words)
        if state not in GOING:
            return  # the stream should end here; whatever follows is not read
    if stream:  # a whole reply may leave a task under way; a stream may not
        raise A2AError(f"{agent} stopped answering before task "
                       f"{task.get('id', '(none)')} ended or waited (it was "
                       f"{task.get('state', 'not begun')})")


def _same(task: dict, task_id, agent: str) -> None:
    """Refuse an event about another task than the one we follow."""
    if not (isinstance(task_id, str) and task_id):
        raise A2AError(f"{agent} sent a task with no id: it is no A2A task")
    if task.setdefault("id", task_id) != task_id:
        raise A2AError(f"{agent} answered about task {json.dumps(task_id)[:100]} while "
                       f"task {task['id']} was under way: a task whose id changes is not "
                       "followed")


def _artifacts(found, agent: str) -> dict:
    """A task's artifacts as {artifactId: [part, ...]}."""
    kept = {}
    for artifact in found if isinstance(found, list) else ():
        _artifact(kept, {"artifact": artifact}, agent, _deaf)
    return kept


def _artifact(kept: dict, update: dict, agent: str, listen) -> None:
    """Add an artifact (or, with append, a chunk of one) to `kept`; its words to listen."""
    artifact = update.get("artifact")
    parts = artifact.get("parts") if isinstance(artifact, dict) else None
    if not isinstance(parts, list):
        raise A2AError(f"{agent} sent an artifact with no parts: it is no A2A artifact")
    key = str(artifact.get("artifactId"))
    if update.get("append") is True and key in kept:
        kept[key] = kept[key] + parts
    else:
        kept[key] = parts
    if words := _text(parts):
        listen(words)


def _text(parts) -> str:
    """What a message's or an artifact's parts say, as text; files and data described.

    >>> _text([{"text": "refunded"}, {"data": {"amount": 79}},
    ...        {"url": "https://x.example/r.pdf", "mediaType": "application/pdf"}])
    'refunded\\n{"amount": 79}\\n[a file at https://x.example/r.pdf, application/pdf]'
    """
    said = []
    for part in parts if isinstance(parts, list) else ():
        part = part if isinstance(part, dict) else {}
        kind = part.get("mediaType", "no media type")
        if isinstance(part.get("text"), str):
            said.append(part["text"])
        elif "data" in part:
            said.append(json.dumps(part["data"], ensure_ascii=False))
        elif isinstance(part.get("url"), str):
            said.append(f"[a file at {part['url'][:SAID]}, {str(kind)[:100]}]")
        elif isinstance(part.get("raw"), str):
            said.append(f"[a file of {len(part['raw']) * 3 // 4:,} bytes, "
                        f"{str(kind)[:100]}, not shown]")
        else:
            said.append("[a part that is none of A2A's, not shown]")
    return "\n".join(said)


def _told(task: dict, agent: str, tool_name: str) -> str | Message:
    """What the brain reads: the task as it stands, in words."""
    state, task_id = task.get("state"), task.get("id")
    words = task.get("words", "")
    if task.get("answered"):
        return cut(words, MAX_RESULT)
    if state == COMPLETED:
        got = [_text(parts) for parts in task.get("artifacts", {}).values()]
        return cut("\n".join(got) or words or "(done, with nothing to show)", MAX_RESULT)
    said = f": {cut(words, MAX_RESULT)}" if words else ""
    if state in ENDED:
        return error_note(tool_name, f"{agent} {ENDED[state]} task {task_id}{said}")
    again = f'call {tool_name} again with task_id="{task_id}"'
    if state == INPUT_REQUIRED:
        return (f"{agent} needs more from you to go on with task {task_id}{said}\n"
                f"To answer, {again} and your answer as the request.")
    if state == AUTH_REQUIRED:
        return (f"{agent} waits for an authorization on task {task_id}{said}\n"
                f"If it asks you for something, {again} and it as the request. An "
                "approval given elsewhere is not given by you saying yes: to see how the "
                f"task stands later, {again} and an empty request.")
    return (f"{agent} is still working on task {task_id}{said}\nTo see how it "
            f"stands later, {again} and an empty request.")


def _cancel(task: dict, call, stopped: bool) -> str:
    """Ask the remote agent to cancel a task left under way (or maybe under way, when
    we `stopped` before it said how it stands); what to add to a note."""
    state = task.get("state")
    if "id" not in task or not (state in GOING or state is None and stopped):
        return ""
    try:
        _, got = call("CancelTask", {"id": task["id"]},
                      time.monotonic() + CANCEL_WAIT, _deaf)
        next(got)
        return f"; task {task['id']} was cancelled"
    except A2AError as e:
        return f"; task {task['id']} could not be cancelled ({e})"
