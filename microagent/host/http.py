"""The server, and the HTTP plumbing: a request from the socket to a route and back.

`Server` holds what every request shares: the office's agent (each tool's
exception hidden from clients), the store, the users, the signing secret, and
the limits. `Handler` serves one request: its body read whole within a deadline
for the whole request (request.py), its bearer token read (users.py; on the events
route a signed events token may stand in, follow.py), then its route (routes.py, or
one the Server's maker gave, which reads its own token: A2A's);
a refusal is answered in JSON and written to the audit trail.
"""

import contextlib
import http.server
import json
import os
import re
import select
import socket
import sys
import threading
import urllib.parse

from microagent.agent import Agent
from microagent.host.follow import events_reader
from microagent.host.request import API_HEADERS, Refused, read_body
from microagent.host.routes import NO_ROUTE, ROUTES, TOP
from microagent.host.store import Store
from microagent.host.stream import CALL
from microagent.host.users import Users
from microagent.progress import keeping
from microagent.retry import hiding
from microagent.spans import tracing


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True  # a stuck client never keeps the process alive
    # connections waiting to be accepted (socketserver's 5 resets a crowd)
    request_queue_size = 128

    def __init__(self, office, db: str, users: dict, secret: bytes, *, port: int = 0,
                 token_ttl: int = 600, lease: float = 30.0, timeout: float = 10.0,
                 rate: tuple[float, int] = (1.0, 20), approve_own: bool = False,
                 quiet: bool = False, follows: int = 20, routes: dict | None = None):
        """Serve `office(db) -> Agent` on 127.0.0.1:port to `users` (users.read_users).

        approve_own: a user who asks and approves may approve their own requests too.
        follows: event streams (GET .../events) one user may follow at once in this
        process; each holds a thread.
        routes: more routes, (method, path) -> function(handler, body), looked up first
        and reading their own token (microagent.a2a.server.ROUTES: the office over A2A).
        """
        if not (type(follows) is int and follows >= 1):
            raise ValueError(f"follows is a whole number from 1 up, not {follows!r}")
        if not (isinstance(secret, bytes) and len(secret) >= 32):
            raise ValueError("the signing secret must be at least 32 random bytes "
                             "(secrets.token_bytes(32))")
        self.users = Users(users, approve_own)  # who may do what
        super().__init__(("127.0.0.1", port), Handler)
        self.store, self.secret, self.quiet = Store(db), secret, quiet
        self.token_ttl, self.lease = token_ttl, lease  # seconds
        self.client_timeout = timeout  # seconds a client may take to send a request
        self.rate = rate  # (per second, burst): runs a user may start
        self.routes = {} if routes is None else routes
        self.runs = {}  # session id -> the Stream running on it in this process
        self.news = threading.Event()  # set, and replaced, at each commit: followers look
        self.follows, self.following = follows, {}  # user -> a Semaphore of their follows
        agent = office(db)
        # every tool hidden: a tool's exception text goes to this server's log, never to
        # a client; and kept, so a failure's note says how far the tool got
        tools = [keeping(hiding(t, self.report, "the tool failed"))
                 for t in agent.tools.values()]
        self.agent = Agent(agent.policy, tools, agent.max_steps, name=agent.name)

    def limit(self, user: str) -> float:
        """Take one of the user's runs: 0.0 to go on, else seconds to wait (in the
        database, so the limit holds across processes)."""
        return self.store.take(user, *self.rate)

    def log(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)

    def report(self, error: Exception) -> None:
        self.log(f"{CALL.get('?')}: a tool failed: {type(error).__name__}: {error}")


# the page for the person who approves, beside this file: path -> (file, type)
PAGE = {"/": ("page.html", "text/html"), "/page.js": ("page.js", "text/javascript"),
        "/page.css": ("page.css", "text/css")}
# its script only from its file; blob: the run's picture, fetched with the token
CSP = ("default-src 'self'; script-src 'self'; img-src 'self' blob:; object-src 'none'; "
       "base-uri 'none'; frame-ancestors 'none'")


class Handler(http.server.BaseHTTPRequestHandler):
    server: Server
    disable_nagle_algorithm = True  # each event goes out as it is written, not 40 ms on

    def setup(self):
        self.timeout = self.server.client_timeout  # a client that stalls is dropped
        super().setup()
        # subtle: that timeout restarts with every byte, so a client that trickles its
        # request in a byte at a time would hold this thread for ever; so the whole
        # request has a deadline
        self.read, self.cut, self.cutting = False, False, threading.Lock()
        self.deadline = threading.Timer(self.server.client_timeout, self.hang_up)
        self.deadline.start()

    def hang_up(self) -> None:
        """The request is not whole in time: close the connection under the thread
        reading it."""
        with self.cutting:
            if self.read:  # just made it
                return
            self.cut = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    def read_whole(self) -> None:
        """The request has been read: from now on the deadline can't cut it. TimeoutError
        if it did already: a shut socket reads as the end of the headers, and must not
        pass for it."""
        self.deadline.cancel()
        with self.cutting:
            if self.cut:
                raise TimeoutError
            self.read = True

    def finish(self):
        self.deadline.cancel()
        super().finish()

    def log_message(self, format, *args):
        # an events token in a query (follow.py) stays out of the log
        told = re.sub(r"token=[^&\s]*", "token=*", format % args)
        self.server.log(f"{self.address_string()} {told}")

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def route(self, method: str) -> None:
        user = sid = None
        self.streaming = False  # once a stream has begun, a failure can only end it
        try:
            body = read_body(self) if method == "POST" else b""
            self.read_whole()  # the request is whole: a run may take as long as it takes
            where = self.path.split("?")[0]
            if (method, where) in self.server.routes:  # the maker's (A2A's, say)
                return self.server.routes[method, where](self, body)
            if method == "GET" and where in PAGE:  # no token: the page asks for one
                return self.page(*PAGE[where])
            path = where.split("/")[1:]  # "/sessions/{id}/x" -> [sessions, id, x]
            user = self.caller(method, path)
            if len(path) == 1 and (method, path[0]) in TOP:
                return TOP[method, path[0]](self, user, body)
            route = ROUTES.get((method, path[2] if len(path) == 3 else ""))
            if not (path[:1] == ["sessions"] and len(path) in (2, 3) and route):
                raise Refused(404, NO_ROUTE)
            sid = path[1]
            # W3C: one traceparent header, or none is trusted; a traced run is a child of
            # the caller's span
            told = self.headers.get_all("traceparent") or []
            with tracing(told[0] if len(told) == 1 else None):
                route(self, user, sid, body)
        except Refused as r:
            if user is not None:  # a stranger's requests fill the log, never the trail
                self.server.store.audit(user, sid, f"refused {r.status}", r.message)
            self.reply(r.status, {"error": r.message}, r.headers)
        except TimeoutError:  # the request never came whole: drop this client only
            self.server.log(f"{self.address_string()}: no whole request in "
                            f"{self.server.client_timeout}s; dropped")
            self.close_connection = True
        except Exception as e:  # a bug, or a notebook in the database breaking the rules
            self.server.log(f"{sid}: {type(e).__name__}: {e}")
            self.close_connection = True
            if not self.streaming:
                with contextlib.suppress(OSError):  # the client may be gone too
                    self.reply(500, {"error": "the server failed; the details went to "
                                              "its log"})

    def caller(self, method: str, path: list[str]) -> str:
        """Who sends the request: the bearer token's user; or, on the events route with no
        Authorization (a browser's EventSource can't send one), the events token's."""
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        if "Authorization" not in self.headers and "token" in query and method == "GET" \
                and len(path) == 3 and path[0] == "sessions" and path[2] == "events":
            return events_reader(self.server, path[1], query["token"][0])
        return self.server.users.who(self.headers.get("Authorization", ""))

    def send(self, status: int, headers: dict, payload: bytes = b"") -> None:
        """The one place an answer is written: status, headers, then the payload."""
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, str(value))
        self.end_headers()
        self.wfile.write(payload)

    def reply(self, status: int, data: dict, headers: dict | None = None) -> None:
        payload = json.dumps(data).encode()
        self.send(status, {"Content-Type": "application/json",
                           "Content-Length": len(payload),
                           **API_HEADERS, **(headers or {})}, payload)

    def send_error(self, code: int, message: str | None = None,
                   explain: str | None = None):
        """What http.server refuses itself (a broken request line, an unknown method) is
        JSON too."""
        self.close_connection = True
        self.reply(code, {"error": message or self.responses.get(code, ("refused",))[0]})

    def page(self, name: str, kind: str) -> None:
        """A file of the page, with headers that let the browser run no script but its
        own file."""
        with open(os.path.join(os.path.dirname(__file__), name), "rb") as f:
            payload = f.read()
        self.send(200, {"Content-Type": f"{kind}; charset=utf-8",
                        "Content-Length": len(payload), "Content-Security-Policy": CSP,
                        "X-Content-Type-Options": "nosniff"}, payload)

    def gone(self) -> bool:
        """Has the client closed its side? Its request was read whole, so a socket with
        something to read is at its end."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:  # reset by the client
            return True
