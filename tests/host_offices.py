"""Offices for the hosting tests, and a small HTTP client that reads server-sent events.

`gated_office` is the hosted refund office whose tools can be held at a gate the
test controls with files in $HOST_GATES, so a test can kill a server process
while a tool is running, or race two processes on one session:

    block-before-<tool>   the tool waits before it runs    (entered-<tool> says it got there)
    block-after-<tool>    the tool runs, then waits        (done-<tool> says it ran)
    release               every waiting tool goes on

A tool waits at most a minute, so a forgotten gate never hangs a test.
`gated_refund_office` holds check_policy at a threading.Event instead, for a
host in the test's own process. `Listener` reads a stream's events one at a
time as they come, and may leave mid-run.
"""

import dataclasses
import functools
import http.client
import json
import os
import pathlib
import socket
import threading
import time

from microagent import Agent, as_tool
from microagent.host import Server, refund_office


def gated_office(db: str):
    gates = pathlib.Path(os.environ["HOST_GATES"])
    agent = refund_office(db)

    def gated(tool):
        def wait(marker: str) -> None:
            (gates / marker).write_text("")
            deadline = time.monotonic() + 60
            while not (gates / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.02)

        @functools.wraps(tool.fn)
        def fn(**args):
            if (gates / f"block-before-{tool.name}").exists():
                wait(f"entered-{tool.name}")
            out = tool(**args)
            if (gates / f"block-after-{tool.name}").exists():
                wait(f"done-{tool.name}")
            return out
        return dataclasses.replace(tool, fn=fn)
    return Agent(agent.policy, [gated(t) for t in agent.tools.values()], agent.max_steps,
                 name=agent.name)


def gated_refund_office(entered: threading.Event, go: threading.Event):
    """The refund office, whose check_policy waits until the test lets it go."""
    def office(db):
        agent = refund_office(db)
        check = agent.tools["check_policy"]

        @as_tool(name="check_policy")
        def gated(order_id: str) -> str:
            """Check whether an order qualifies for a refund."""
            entered.set()
            assert go.wait(60)
            return check.fn(order_id=order_id)
        tools = [gated if t.name == "check_policy" else t for t in agent.tools.values()]
        return Agent(agent.policy, tools, agent.max_steps, name=agent.name)
    return office


def request(port: int, method: str, path: str, token: str | None, body=None, timeout: float = 60,
            authorization: str | None = None):
    """One request: (status, headers, the JSON answer, or the list of (event, data) of a stream).

    `token` goes as "Authorization: Bearer <token>"; `authorization` as that header, exactly.
    """
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    if authorization is not None:
        headers = {"Authorization": authorization}
    try:
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        text = response.read().decode()
    finally:
        conn.close()
    if response.getheader("Content-Type") == "text/event-stream":
        return response.status, response, events(text)
    if response.getheader("Content-Type", "").startswith("image/svg+xml"):
        return response.status, response, text  # the picture of a run
    return response.status, response, json.loads(text) if text else None


SECRET = b"s" * 32
QUESTION = "Can I get a refund for order A1234? It arrived broken."
ANSWER = "Good news, A1234 qualifies. I refunded $79 to your card, here in 3 to 5 days."
# alice and dan ask, bob approves, carol does both
USERS = {"alice": {"token": "alice-token-0123456789", "roles": ["asks"]},
         "bob": {"token": "bob-token-0123456789", "roles": ["approves"]},
         "carol": {"token": "carol-token-0123456789", "roles": ["asks", "approves"]},
         "dan": {"token": "dan-token-0123456789", "roles": ["asks"]}}


class Hosted:
    """A host serving `office` on a free port of 127.0.0.1, in a thread of this process."""

    def __init__(self, office, db: str, users: dict, secret: bytes, **settings):
        self.db = db
        self.server = Server(office, db, users, secret, quiet=True, **settings)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()  # quick to stop

    def trail(self) -> list[tuple]:
        return [row[1:] for row in self.server.store.trail()]  # without the time

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def events(text: str) -> list[tuple[str, dict]]:
    """The (event, data) pairs in a server-sent event stream."""
    out = []
    for block in text.split("\n\n"):
        if block:
            lines = dict(line.split(": ", 1) for line in block.splitlines())
            out.append((lines["event"], json.loads(lines["data"])))
    return out


class Listener:
    """A client that reads a stream's events one at a time as they come, and may leave mid-run.

    `headers` go with the request (Last-Event-ID, say); `status` and `head` are the answer's.
    """

    def __init__(self, port: int, method: str, path: str, token: str | None, body=None, headers=None,
                 timeout: float = 60):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        data = b"" if body is None else json.dumps(body).encode()
        lines = [f"{method} {path} HTTP/1.1", "Host: x", f"Content-Length: {len(data)}"]
        lines += [] if token is None else [f"Authorization: Bearer {token}"]
        lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        self.file = self.sock.makefile("rb")
        self.status, self.head = int(self.file.readline().split()[1]), {}
        while (line := self.file.readline().decode()) not in ("\r\n", ""):
            name, _, value = line.partition(":")
            self.head[name.strip()] = value.strip()

    def next(self) -> tuple[int | None, str, dict] | None:
        """The next event, (its id or None, its name, its data); None once the stream has ended."""
        fields = {}
        while True:
            line = self.file.readline().decode()
            if not line:
                return None
            if line.strip():
                name, _, value = line.rstrip("\n").partition(": ")
                fields[name] = value
            elif fields:
                return int(fields["id"]) if "id" in fields else None, fields["event"], json.loads(fields["data"])

    def rest(self) -> list[tuple[int | None, str, dict]]:
        """Every event until the stream ends."""
        out = []
        while (event := self.next()) is not None:
            out.append(event)
        self.leave()
        return out

    def answer(self) -> dict:
        """The JSON answer of a request that was not a stream."""
        text = self.file.read().decode()
        self.leave()
        return json.loads(text) if text else None

    def leave(self) -> None:
        self.file.close()
        self.sock.close()
