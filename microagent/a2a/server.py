"""The office as an A2A agent: the host's sessions served as A2A 1.0 tasks over JSON-RPC.

The host serves its agent card at /.well-known/agent-card.json and A2A's methods at
POST /a2a when its maker gives it these ROUTES (`Server(..., routes=ROUTES)`, as
`python -m microagent.host` does). A run is a task whose id is its session's: each
Step goes out as a status update, and the run stops where the host's runs stop. A
decision that waits for an approver is `auth_required`, and only the host's own
approvals decide it: no message of the caller's can. A caller who may approve their
own (a host started with approve_own) is asked instead: `input_required`, answered
"yes" or "no: <why>" on the same task. The users, their tokens, the rate limit, the
audit trail and the request hygiene are the host's.

Read it with calls.py (JSON-RPC's errors, and params read field by field) and tasks.py
(a session as a task; `Told`, a host Stream whose events are A2A's, and `follow`, the
host's follow told in A2A's events). What it leaves out: README.md, "## Serving an
office".
"""

import secrets

from microagent import approval
from microagent.context import Context
from microagent.host.request import MAX_TEXT, Refused, read_fields
from microagent.host.follow import changes
from microagent.host.routes import session_for, session_to_run, stop_run, take_a_run
from microagent.host.users import ASKS
from microagent.message import ASSISTANT, USER, Message
from microagent.a2a.calls import (BAD_PARAMS, BAD_REQUEST, BAD_VERSION, CODES,
                                  CONTENT_TYPE, NO_METHOD, NO_PUSH, NOT_CANCELABLE, PARSE,
                                  UNSUPPORTED, Failed, fields, id_of, result, write)
from microagent.a2a.client import VERSION  # the A2A version spoken, both ways
from microagent.a2a import tasks


def get_card(h, body: bytes) -> None:
    """The agent card: who the office is, where it answers, and how to sign in."""
    agent, (host, port) = h.server.agent, h.server.server_address[:2]
    gated = [t.name for t in agent.tools.values() if t.needs_approval]
    about = f"Ask {agent.name} in plain words; it works with {', '.join(agent.tools)}." + \
        (f" {', '.join(gated)} waits for an approver of this host (auth_required)."
         if gated else "")
    h.reply(200, {
        "name": agent.name, "description": about, "version": "1.0.0",
        "supportedInterfaces": [{"url": f"http://{host}:{port}/a2a",
                                 "protocolBinding": "JSONRPC", "protocolVersion": VERSION}],
        "capabilities": {"streaming": True, "pushNotifications": False,
                         "extendedAgentCard": False},
        "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": agent.name, "name": agent.name, "description": about,
                    "tags": ["office"]}]})


def post_rpc(h, body: bytes) -> None:
    """One JSON-RPC call; a bad token is HTTP's 401 and a spent budget its 429."""
    user = h.server.users.who(h.headers.get("Authorization", ""))
    rid, task = id_of(body), None
    try:
        call = envelope(body, rid)
        if call["jsonrpc"] != "2.0":
            raise Failed(BAD_REQUEST, '"jsonrpc" must be "2.0"')
        given = h.headers.get("A2A-Version", "")
        if given.split(".")[:2] != VERSION.split("."):
            raise Failed(BAD_VERSION, f"this agent speaks A2A {VERSION}: send the header "
                                      f"A2A-Version: {VERSION} (not {given[:20]!r})")
        method = METHODS.get(call["method"])
        if method is None:
            raise Failed(NO_METHOD, f"no method {call['method'][:40]!r}; the methods are "
                                    f"{', '.join(METHODS)}")
        params = call.get("params", {})
        message = params.get("message")
        task = params.get("id") or (message.get("taskId") if isinstance(message, dict)
                                    else None)  # for the audit trail
        method(h, user, rid, params)
    except Refused as r:
        if r.status not in CODES:  # the Handler answers it, with its headers (Retry-After)
            h.server.store.audit(user, task if isinstance(task, str) else None,
                                 f"refused {r.status}", r.message)
            raise
        fail(h, user, task, rid, CODES[r.status],
             "task not found" if r.status == 404 else r.message)
    except Failed as f:  # JSON that can't be read has no id to answer
        fail(h, user, task, None if f.code == PARSE else rid, f.code, f.message)


def fail(h, user: str, task, rid, code: int, message: str) -> None:
    """Answer a JSON-RPC error (an event, if a stream has begun), and write it down."""
    h.server.store.audit(user, task if isinstance(task, str) else None,
                         f"refused {code}", message)
    error = {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}
    if h.streaming:
        write(h, error)
    else:
        h.reply(200, error)


def envelope(body: bytes, rid) -> dict:
    """The JSON-RPC request, read as strictly as the host's routes read theirs."""
    try:
        kind = str if rid is None else type(rid)  # a string or a number, as id_of found
        return read_fields(body, {"jsonrpc": str, "method": str, "id": kind},
                           {"params": dict})
    except Refused as r:
        # subtle: request.read_fields' words for a body that is no JSON at all begin so
        json_broken = r.message.startswith(("the body is not", "the JSON", "the text"))
        raise Failed(PARSE if json_broken else BAD_REQUEST, r.message) from None


def named(state: str) -> str:
    """A task's state in words: TASK_STATE_COMPLETED is "completed"."""
    return state.removeprefix("TASK_STATE_").lower()


def text_of(message: dict) -> str:
    """The words of the caller's message: its text parts, one after another."""
    if message["role"] != "ROLE_USER":
        raise Failed(BAD_PARAMS, 'params.message.role must be "ROLE_USER"')
    texts = []
    for i, part in enumerate(message["parts"]):
        where = f"params.message.parts[{i}]"
        if isinstance(part, dict) and part.keys() & {"raw", "url", "data"}:
            raise Failed(CONTENT_TYPE, f"{where}: this agent reads text parts only")
        fields(part, where, {"text": str}, {"metadata": dict, "mediaType": str,
                                            "filename": str})
        if part.get("mediaType", "text/plain") != "text/plain":
            raise Failed(CONTENT_TYPE, f"{where}: this agent reads text/plain only")
        texts.append(part["text"])
    text = "\n".join(texts)
    if not (text.strip() and len(text) <= MAX_TEXT):
        raise Failed(BAD_PARAMS, f"the message's text must hold 1 to {MAX_TEXT} "
                                 "characters, not only spaces")
    return text


# ----------------------------------------------------------------------------
# the methods: each takes (handler, user, the request's id, params)

def send_message(h, user: str, rid, params: dict, streaming: bool = False) -> None:
    """A new task, or the next message on one; a blocking call answers once it stops."""
    p = fields(params, "params", {"message": dict},
               {"configuration": dict, "metadata": dict, "tenant": str})
    message = fields(p["message"], "params.message",
                     {"messageId": str, "role": str, "parts": list},
                     {"contextId": str, "taskId": str, "metadata": dict,
                      "extensions": list, "referenceTaskIds": list})
    setting = fields(p.get("configuration", {}), "params.configuration", {},
                     {"acceptedOutputModes": list, "historyLength": int,
                      "returnImmediately": bool, "taskPushNotificationConfig": dict})
    if "taskPushNotificationConfig" in setting:
        raise Failed(NO_PUSH, "this agent sends no push notifications: follow the task "
                              "with SubscribeToTask, or GetTask")
    text, server = text_of(message), h.server
    server.users.needs(user, ASKS)
    sid, audit = message.get("taskId"), None
    if sid is None:
        if "contextId" in message:
            raise Failed(BAD_PARAMS, "here a context is one task, with the task's id: "
                                     "send its taskId to go on, or neither to begin")
        take_a_run(server, user)
        sid = secrets.token_urlsafe(16)  # 128 random bits, as the host's sessions
        server.store.create(sid, user, Context())
        server.store.audit(user, sid, "created", "over A2A")
        s = server.store.load(sid)
        ctx = s.context.add(Message(USER, text))
    else:
        s = session_to_run(server, user, sid)  # 404 unless it is theirs to see; 409, 429
        if message.get("contextId", sid) != sid:
            raise Failed(BAD_PARAMS, "the contextId is not this task's (it is the task's "
                                     "id): send the same, or none")
        state, _ = tasks.state_of(server, s)
        if state in tasks.TERMINAL:
            raise Failed(UNSUPPORTED, f"the task is {named(state)}, and takes no "
                                      "more messages: send one without a taskId to begin "
                                      "a new task")
        if s.asker != user:
            raise Refused(403, "only the person who asked in this task may write in it")
        ctx, audit = reply_on(server, user, s, text)
    apart = setting.get("returnImmediately", False) and not streaming
    line = tasks.Line(h, sid, rid, streaming, apart)
    # returnImmediately: answered as the run begins, which goes on without its caller
    tasks.Told(line, user, sid, s, "continue" if apart else "cancel").run(ctx, audit=audit)
    if apart:
        return
    if not streaming:
        task = tasks.task_of(server, sid, server.store.load(sid), line.error)
        h.reply(200, result(rid, {"task": task}))
    elif line.said[0] == tasks.AUTH_REQUIRED:  # an approver decides out of band: stay, and tell
        tasks.follow(h, sid, rid, line.told, line.said, server.news)


def reply_on(server, user: str, s, text: str) -> tuple[Context, tuple | None]:
    """The notebook with the caller's next message, and what the audit trail says of it.
    A waiting decision takes a verdict, and only from someone who may give it."""
    last = s.context.last()
    if last is not None and last.kind == "verdict":
        raise Failed(UNSUPPORTED, f"the verdict on {last.tool} is given and not carried "
                                  "out yet: the host's resume carries it out")
    if last is None or last.kind != "decision":
        return s.context.add(Message(USER, text)), None
    if not server.users.may_approve(user, s.asker):  # auth_required: never by a message
        raise Failed(UNSUPPORTED, f"{last.tool} waits for an approver's verdict, given "
                                  "through this host's approvals; a message can't give "
                                  "it. Follow the task (SubscribeToTask), or withdraw it "
                                  "(CancelTask)")
    word = text.strip()
    yes = word.lower() in ("yes", "approve", "approved")
    if not (yes or word.lower() == "no" or word.lower().startswith(("no:", "no,", "no "))):
        raise Failed(BAD_PARAMS, f'{last.tool} waits for your verdict: answer "yes" to '
                                 'approve it, or "no: <why>" to refuse it')
    tool = server.agent.tools.get(last.tool)
    if tool is None:
        raise Failed(UNSUPPORTED, f"{last.tool} is no longer in this office")
    why = {} if yes else {"reason": word[2:].lstrip(":, ").strip() or "no reason given"}
    ctx = approval.verdict(s.context, tool, yes, by=user, **why)
    v = ctx.last()
    return ctx, (("approved", f"asked by {s.asker}: {v.tool} {v.args}") if yes
                 else ("denied", f"asked by {s.asker}: {v.tool}: {v.content}"))


def send_streaming_message(h, user: str, rid, params: dict) -> None:
    send_message(h, user, rid, params, streaming=True)


def get_task(h, user: str, rid, params: dict) -> None:
    fields(params, "params", {"id": str}, {"historyLength": int, "tenant": str})
    task = tasks.task_of(h.server, params["id"], session_for(h.server, user, params["id"]))
    h.reply(200, result(rid, task))


def cancel_task(h, user: str, rid, params: dict) -> None:
    """Withdraw a task: its run, if one goes on, stopped by the host's cancel (wherever
    it runs) and waited for; then a no to what it waits on, and a remark that cancels it."""
    fields(params, "params", {"id": str}, {"metadata": dict, "tenant": str})
    server, sid = h.server, params["id"]
    take_a_run(server, user)
    news = server.news  # a commit after this wakes the wait for the run to stop
    s = session_for(server, user, sid)
    if s.asker != user:
        raise Refused(403, "only the person who asked in this task may cancel it")
    if stop_run(server, user, sid, s):  # heard between steps, and inside a model's reply
        # until it lets go: a run in this process is waited for even past its lease (a
        # long tool), so its last step is kept before the remark; one elsewhere, until its
        # lease runs out (its step, if it comes later, is lost and it says so)
        s = next((now for now in changes(h, sid, news)
                  if not tasks.is_running(now) and sid not in server.runs), None)
        if s is None:  # the caller left: the run stops all the same
            return
    state, _ = tasks.state_of(server, s)
    # a run that let go when it was cancelled reads canceled: the remark makes it last
    if state not in (tasks.INPUT_REQUIRED, tasks.AUTH_REQUIRED) \
            and not (state == tasks.CANCELED and s.cancelled):
        raise Failed(NOT_CANCELABLE, f"the task is {named(state)}: it can no longer "
                                     "be cancelled")
    ctx, waits = s.context, approval.waiting(s.context)
    if waits is not None and waits.tool in server.agent.tools:
        ctx = approval.deny(ctx, server.agent.tools[waits.tool], "the task was cancelled",
                            by=user)
    ctx = ctx.add(Message(ASSISTANT, f"{tasks.CANCELLED}{user}", server.agent.name))
    if server.store.save(sid, ctx, s.version) is None:
        raise Failed(NOT_CANCELABLE, "the task changed while it was being cancelled: "
                                     "read it again (GetTask)")
    server.store.audit(user, sid, "cancelled", "over A2A")
    get_task(h, user, rid, {"id": sid})


def subscribe_to_task(h, user: str, rid, params: dict) -> None:
    """The task as it stands, then each change, until it stops or waits for the caller."""
    fields(params, "params", {"id": str}, {"tenant": str})
    server, sid = h.server, params["id"]
    take_a_run(server, user)  # a subscription holds a thread for as long as it follows
    news = server.news  # a commit after this wakes the follow
    s = session_for(server, user, sid)
    state, _ = tasks.state_of(server, s)
    if state in tasks.TERMINAL:
        raise Failed(UNSUPPORTED, f"the task is {named(state)}: nothing more will "
                                  "happen to it (GetTask reads it)")
    tasks.open_stream(h)
    write(h, result(rid, {"task": tasks.task_of(server, sid, s)}))
    tasks.follow(h, sid, rid, len(s.context), tasks.state_of(server, s), news)


# the methods by their names, and the routes for A2A to give the host's Server
METHODS = {"SendMessage": send_message, "SendStreamingMessage": send_streaming_message,
           "GetTask": get_task, "CancelTask": cancel_task,
           "SubscribeToTask": subscribe_to_task}
ROUTES = {("GET", "/.well-known/agent-card.json"): get_card, ("POST", "/a2a"): post_rpc}
