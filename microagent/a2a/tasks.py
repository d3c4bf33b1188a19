"""A hosted session read as an A2A task: its state, its status message, its answer.

The task's id is the session's id, and so is its context's. Where a task stands is
read off the session as the store has it (its notebook, its lease, its waiting
approval), never kept anywhere else, so every host process on one database reads
the same task. The objects are A2A 1.0's JSON (camelCase fields, enums as their
names); the ids of the messages and the artifact are the session's id and a note's
index, so the same notebook always reads as the same task.

A task is told as it goes in two ways: a run in this request, by `Told` (a host
Stream whose events are A2A's) through a `Line`; or, for a run anywhere else, by
`follow`, on the host's own follow: woken at each commit in this process, reading
the store across processes.

What it leaves out: the task's history (the notebook itself is at GET /sessions/{id}).
"""

from microagent.agent import DONE, OUT_OF_STEPS
from microagent.host.follow import changes, is_running
from microagent.host.request import API_HEADERS
from microagent.host.store import Session
from microagent.host.stream import Stream
from microagent.message import Message
from microagent.a2a.calls import result, write

SUBMITTED, WORKING, COMPLETED = "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", \
    "TASK_STATE_COMPLETED"
FAILED, CANCELED, REJECTED = "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"
INPUT_REQUIRED, AUTH_REQUIRED = "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"
TERMINAL = (COMPLETED, FAILED, CANCELED, REJECTED)  # nothing more happens to the task
CANCELLED = "cancelled over A2A by "  # how the remark that cancels a task begins


def state_of(server, s: Session) -> tuple[str, str | None]:
    """Where the session stands as a task: its state, and what its status message says."""
    last = s.context.last()
    if is_running(s):
        return WORKING, None
    if last is None:
        return SUBMITTED, None
    if last.kind == "verdict":  # saved; the request that gave it carries it out
        return WORKING, f"the verdict on {last.tool} is given, and is being carried out"
    if last.kind == "remark" and last.content.startswith(CANCELLED):
        return CANCELED, last.content
    why = server.agent.why_stop(s.context)
    if why == DONE:
        return COMPLETED, None
    if why == OUT_OF_STEPS:
        return FAILED, last.content
    if s.cancelled:  # its run let go when its asker cancelled it (here, or the host's cancel)
        return CANCELED, f"cancelled by {s.asker}"
    if last.kind == "decision":  # the run waits for a verdict: the caller's, or an approver's
        call = f"{last.tool} {last.args}"
        if server.users.may_approve(s.asker, s.asker):  # a host that lets askers approve
            return INPUT_REQUIRED, (f'{call} waits for your verdict: answer "yes" to '
                                    'approve it, or "no: <why>" to refuse it')
        return AUTH_REQUIRED, (f"{call} waits for an approver's verdict, given through "
                               "this host's approvals (GET /approvals, then POST "
                               "/sessions/<task id>/approvals); a message can't give it")
    return INPUT_REQUIRED, ("the run stopped before it had an answer (its client went "
                            "away, or the brain failed): send a message to go on")


def task_of(server, sid: str, s: Session, note: str | None = None) -> dict:
    """The session as an A2A Task; `note`, if given, says why the status changed."""
    state, text = state_of(server, s)
    task = {"id": sid, "contextId": sid,
            "status": status(sid, state, note or text, len(s.context) - 1)}
    if state == COMPLETED:
        task["artifacts"] = [answer(sid, s.context.last(), len(s.context) - 1)]
    return task


def status(sid: str, state: str, text: str | None, at: int | str) -> dict:
    """A TaskStatus; a message from the agent, if there is something to say, whose id
    names the note it is about (`at`)."""
    if text is None:
        return {"state": state}
    return {"state": state, "message": {"messageId": f"{sid}-{at}", "contextId": sid,
                                        "taskId": sid, "role": "ROLE_AGENT",
                                        "parts": [{"text": text}]}}


def answer(sid: str, done: Message, at: int) -> dict:
    """The Artifact of a finished task: the final answer's words."""
    return {"artifactId": f"{sid}-answer-{at}", "name": "answer",
            "parts": [{"text": done.content}]}


def update(sid: str, state: str, text: str | None, at: int | str) -> dict:
    """A StreamResponse that says the task's status changed."""
    return {"statusUpdate": {"taskId": sid, "contextId": sid,
                             "status": status(sid, state, text, at)}}


def said(note: Message) -> str:
    """A step's note in a line: a tool's result, or what was wrong with the brain's reply."""
    if note.kind == "result":
        return f"{note.name}{' failed' if note.error else ''}: {note.content}"
    return note.content


# ----------------------------------------------------------------------------
# a task told as it goes: a live run (Told, through a Line), or the store followed

def open_stream(h) -> None:
    """Begin the answer as server-sent events, on the Handler `h`."""
    h.send(200, {"Content-Type": "text/event-stream", **API_HEADERS})
    h.streaming = True  # from here on, a failure can only end the stream


class Line:
    """Where a `Told` stream writes: the A2A client's connection, streamed or blocking,
    or answered at once (`apart`: returnImmediately, a run the caller does not wait for).

    Stream.run opens its event stream through `send`, once the run has the session;
    here that begins A2A's stream with the task as it stands, or answers with it (apart),
    or, for a blocking call, sends nothing yet.
    """

    def __init__(self, h, sid: str, rid, streaming: bool, apart: bool = False):
        self.h, self.server, self.sid, self.rid, self.sse = h, h.server, sid, rid, streaming
        self.streaming = False  # Stream.run sets it; the Handler's own is set by open_stream
        self.said, self.error = (WORKING, None), None  # (state, status message) sent last
        self.told = 0  # the notes of the notebook told so far
        self.pieces = 0  # the brain's words sent so far, a piece at a time
        self.apart = apart

    def gone(self) -> bool:
        return self.h.gone()

    def send(self, status: int, headers: dict, payload: bytes = b"") -> None:
        if not (self.apart or self.sse):  # a blocking call answers when the run stops
            return
        s = self.server.store.load(self.sid)
        if self.apart:
            self.h.reply(200, result(self.rid, {"task": task_of(self.server, self.sid, s)}))
            self.h.streaming = True  # answered: a failure after this goes to the log only
        elif self.sse:
            open_stream(self.h)
            self.put({"task": task_of(self.server, self.sid, s)})
            self.told = len(s.context)

    def put(self, data: dict) -> bool:
        return not self.sse or write(self.h, result(self.rid, data))


class Told(Stream):
    """A Stream whose events are A2A's: a status update a step, and at the stop, where
    the task stands as the store has it (the answer as an artifact)."""

    def event(self, name: str, data: dict, id: int | None = None) -> bool:
        """Send the A2A events for one of the host's events (`id`: its SSE id, unused)."""
        line, sid = self.h, self.sid
        if name == "thinking":
            line.pieces += 1  # each piece a message of its own
            return line.put(update(sid, WORKING, data["text"], f"thinking-{line.pieces}"))
        if name in ("result", "no_move"):
            return line.put(update(sid, WORKING, said(self.ctx[data["at"]]), data["at"]))
        if name == "progress":  # a tool's progress: A2A has no event for it
            return True
        line.error = data.get("error")  # the run failed: its words are the status message
        s = self.server.store.load(sid)
        now = state_of(self.server, s)
        if now[0] == WORKING and line.error is None:  # a stop told again, while it runs on
            return True
        line.said, line.told = now, len(s.context)
        return all([line.put(e) for e in ending(sid, s, (now[0], line.error or now[1]))])


def follow(h, sid: str, rid, told: int, said_last: tuple, news) -> None:
    """Follow the task (whichever host process runs it: microagent.host.follow's
    `changes`, woken by `news`) until it stops or waits for the caller, sending its new
    steps and each change of where it stands (`said_last`: the state and status message
    sent last)."""
    looks = changes(h, sid, news)
    while said_last[0] not in (*TERMINAL, INPUT_REQUIRED) and (s := next(looks, None)):
        for at in range(told, len(s.context)):
            if s.context[at].kind in ("result", "no_move"):
                write(h, result(rid, update(sid, WORKING, said(s.context[at]), at)))
        told, now = len(s.context), state_of(h.server, s)
        if now != said_last and now[0] != WORKING:
            for event in ending(sid, s, now):
                write(h, result(rid, event))
        said_last = now


def ending(sid: str, s, now: tuple[str, str | None]) -> list[dict]:
    """The events that say where a task has stopped: its answer first, if it has one."""
    at = len(s.context) - 1
    events = [update(sid, now[0], now[1], at)]
    if now[0] == COMPLETED:
        events.insert(0, {"artifactUpdate": {"taskId": sid, "contextId": sid,
                                             "lastChunk": True,
                                             "artifact": answer(sid, s.context.last(), at)}})
    return events

