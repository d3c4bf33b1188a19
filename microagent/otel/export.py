"""The Exporter: finished spans, written as OTLP JSON lines and POSTed to a collector.

    exporter = Exporter("spans.jsonl", url="http://127.0.0.1:4318")
    agent = traced(support_agent(), exporter)

A POST is OTLP/HTTP in Protobuf's binary form (protocol="http/protobuf", OTLP's
default, which every backend takes) or in JSON ("http/json"), gzipped unless the
server refuses that (415) or compression=None; the file is always JSON lines.

It keeps finished spans until an outermost one of its own ends (a span whose
parent is in another process, starts its trace, or is written somewhere else, as
an agent traced to its own Exporter and used as a tool by an office traced to
another: by then the spans inside it have ended), then flushes all it keeps: one
line in the file, one POST to the collector's /v1/traces.
"""

import gzip
import json
import socket
import sys
import threading
import time
import urllib.parse
from http.client import HTTPConnection, HTTPException, HTTPSConnection

from microagent.llm import endpoint
from microagent.otel.otlp import traces_data
from microagent.otel.protobuf import encode
from microagent.spans import Span

MAX_BODY = 64 << 20  # bytes: OTLP's advice for the most a client sends at once
SAID = 200           # characters of a collector's refusal that a report quotes
TYPES = {"http/protobuf": "application/x-protobuf", "http/json": "application/json"}


def to_stderr(problem: str) -> None:
    print(f"microagent.otel: {problem}", file=sys.stderr, flush=True)


class Exporter:
    """A `record` for traced(): spans as OTLP JSON lines in `path`, and POSTed to the
    collector at `url` (its /v1/traces) in `protocol`. A failure to write or to send
    is told to `report` and never raised: the run goes on, and the file keeps what it has."""

    def __init__(self, path: str | None = None, url: str | None = None, *,
                 protocol: str = "http/protobuf", compression: str | None = "gzip",
                 service: str = "microagent", headers: dict | None = None,
                 timeout: float = 5.0, report=to_stderr):
        if path is None and url is None:
            raise ValueError("an Exporter writes to a file (path=), a collector (url=), "
                             "or both")
        if protocol not in TYPES:
            raise ValueError(f"protocol is OTLP's 'http/protobuf' or 'http/json', not "
                             f"{protocol!r}")
        self.path, self.service, self.timeout, self.report = path, service, timeout, report
        self.url = None if url is None else _traces_url(url)
        if compression not in ("gzip", None):
            raise ValueError(f"compression is 'gzip' or None, not {compression!r}")
        self.protocol, self.compression = protocol, compression
        self.headers = {"Content-Type": TYPES[protocol], **(headers or {})}
        self.kept: list[Span] = []
        self.lock = threading.Lock()  # a host serves many runs at once, in threads

    def __call__(self, span: Span) -> None:
        """Keep a finished span; flush once the span the others sit in has ended."""
        keep(self, span)

    def flush(self) -> None:
        """Write what is kept: one line in the file, one POST to the collector."""
        with self.lock:
            spans, self.kept = self.kept, []
            if not spans:
                return
            data = traces_data(spans, self.service)
            line = json.dumps(data, separators=(",", ":"))
            if self.path is not None:
                try:
                    with open(self.path, "a", encoding="utf-8") as f:
                        f.write(line + "\n")
                except OSError as e:
                    self.report(f"could not write {len(spans)} spans to {self.path}: "
                                f"{type(e).__name__}: {e}")
        if self.url is not None:
            body = line.encode() if self.protocol == "http/json" \
                else encode("TracesData", data)
            self.post(body, len(spans))

    def post(self, body: bytes, count: int) -> None:
        """One POST of a TracesData to the collector; what went wrong goes to report.

        `timeout` bounds the whole POST, not each read: at the deadline the connection
        is shut, so a collector that answers a byte at a time can't hold the run. It
        goes to url only: http.client follows no redirect and reads no proxy setting.
        """
        if len(body) > MAX_BODY:
            return self.report(f"{count} spans were not sent: {len(body)} bytes is over "
                               f"{MAX_BODY}")
        deadline = time.monotonic() + self.timeout
        try:
            if self.compression == "gzip":
                status, said = self.send(gzip.compress(body, mtime=0),
                                         {**self.headers, "Content-Encoding": "gzip"}, deadline)
                if status != 415:  # 415: it takes no gzip; plain, from now on
                    return self.refused(status, said, count)
                self.compression = None
            self.refused(*self.send(body, self.headers, deadline), count)
        except (OSError, HTTPException) as e:  # nobody there, a timeout, a hang-up
            self.report(f"could not send {count} spans to {self.url}: {type(e).__name__}: {e}")

    def send(self, body: bytes, headers: dict, deadline: float) -> tuple[int, bytes]:
        """One POST to url, shut at the deadline: (the status, the start of the answer)."""
        left = max(deadline - time.monotonic(), 0.001)
        parts = urllib.parse.urlsplit(self.url)
        opened = HTTPSConnection if parts.scheme == "https" else HTTPConnection
        conn = opened(parts.hostname, parts.port, timeout=left)
        shut = threading.Event()  # set once the deadline has shut the connection
        late = threading.Timer(left, _shut, (conn, shut))
        late.start()
        try:
            where = parts.path + (f"?{parts.query}" if parts.query else "")
            conn.request("POST", where, body, headers)
            response = conn.getresponse()
            return response.status, response.read(4 << 10)  # success says nothing
        except (OSError, HTTPException):
            if shut.is_set():  # the deadline shut it
                raise TimeoutError(f"no whole answer within timeout={self.timeout:g}s") \
                    from None
            raise
        finally:
            late.cancel()
            conn.close()

    def refused(self, status: int, said: bytes, count: int) -> None:
        """Report an answer that is not a success, quoting the start of what it said."""
        if not 200 <= status < 300:
            said = " ".join(said.decode("utf-8", "replace").split())[:SAID]
            self.report(f"{self.url} refused {count} spans: HTTP {status}"
                        + (f" ({said})" if said else ""))


def keep(record, span: Span) -> None:
    """Keep a finished span in `record` (an Exporter, a Relay); flush all it keeps once
    the span the others sit in has ended."""
    if not isinstance(span, Span):
        raise TypeError(f"{type(record).__name__} records Spans, not {type(span).__name__}")
    with record.lock:
        record.kept.append(span)
    if outermost(span):
        record.flush()


def outermost(span: Span) -> bool:
    """Whether `span` is the outermost one written to its record: the others sit in it."""
    # its parent is in another process, or there is none, or it is written somewhere else
    return span.parent_id is None or span.remote or getattr(span.above, "to", None) \
        is not span.to


def _shut(conn, shut: threading.Event) -> None:
    """Shut a connection from another thread, so a read blocked on it returns now."""
    shut.set()
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:  # already closed
            pass


def _traces_url(url: str) -> str:
    """The collector's address, with its traces path: http://host:4318/v1/traces."""
    return endpoint(url, "/v1/traces", "url is the collector's address",
                    "http://127.0.0.1:4318")
