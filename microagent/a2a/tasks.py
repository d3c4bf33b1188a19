"""A hosted session read as an A2A task: its state, its status message, its answer.

The task's id is the session's id, and so is its context's. Where a task stands is
read off the session as the store has it (its notebook, its lease, its waiting
approval), never kept anywhere else, so every host process on one database reads
the same task. The objects are A2A 1.0's JSON (camelCase fields, enums as their
names); the ids of the messages and the artifact are the session's id and a note's
index, so the same notebook always reads as the same task.

What it leaves out: the task's history (the notebook itself is at GET /sessions/{id}).
"""

from microagent.agent import DONE, OUT_OF_STEPS
from microagent.host.routes import is_running
from microagent.host.store import Session
from microagent.message import Message

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
    if last.kind == "decision":  # the run waits for a verdict: the caller's, or an approver's
        call = f"{last.tool} {last.args}"
        if server.users.may_approve(s.asker, s.asker):  # a host that lets askers approve
            return INPUT_REQUIRED, (f'{call} waits for your verdict: answer "yes" to '
                                    'approve it, or "no: <why>" to refuse it')
        return AUTH_REQUIRED, (f"{call} waits for an approver's verdict, given through "
                               "this host's approvals (GET /approvals, then POST "
                               "/sessions/<task id>/approvals); a message can't give it")
    if last.kind == "verdict":  # saved; the request that gave it carries it out
        return WORKING, f"the verdict on {last.tool} is given, and is being carried out"
    if last.kind == "remark" and last.content.startswith(CANCELLED):
        return CANCELED, last.content
    why = server.agent.why_stop(s.context)
    if why == DONE:
        return COMPLETED, None
    if why == OUT_OF_STEPS:
        return FAILED, last.content
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
