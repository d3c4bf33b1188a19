"""Where hosted sessions live: a notebook per session in sqlite, an audit trail, and signed approval tokens.

microagent.host serves the loop over HTTP; this is the one seam between it and
the database, small on purpose: `load` a session, `create` one, `save` it only
if nobody else has since (one `UPDATE ... WHERE version = ?`: a writer that
read an older version loses, in this process or another one), and append to
the `audit` trail, which the database itself refuses to change or delete.
Moving to a database server (PostgreSQL, say) means these few statements
and the connection, nothing else.

The approval token is JWT's compact form, signed with HMAC-SHA256 (HS256), so
any JWT library can read it; `verify` refuses a token that was tampered with,
signed with another secret, for another algorithm, or expired.

What it leaves out: a pool of connections (one, shared behind a lock, is
enough for a teaching server and much faster with sqlite's WAL), and keys
that rotate.
"""

import base64
import dataclasses
import hashlib
import hmac
import json
import sqlite3
import threading
import time

from microagent.context import Context
from microagent.invariants import check

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, owner TEXT NOT NULL, notebook TEXT NOT NULL,
    version INTEGER NOT NULL, lease_until REAL NOT NULL DEFAULT 0, jti TEXT);
CREATE TABLE IF NOT EXISTS audit (n INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, user TEXT,
    session TEXT, what TEXT NOT NULL, detail TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
"""


# ----------------------------------------------------------------------------
# the store: the one seam to the database (load, create, save if nobody else has since, audit)

@dataclasses.dataclass(frozen=True)
class Session:
    owner: str
    context: Context
    version: int          # bumped by every save
    lease_until: float    # a run holds the session until then (time.time()); 0: nobody
    jti: str | None       # the id of the approval token the waiting decision was issued


class Store:
    def __init__(self, path: str):
        # one connection, shared by the threads and taken in turn (the lock); autocommit, so each
        # statement is a transaction of its own, and no transaction ever spans a read and a write
        self.db = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
        self.lock = threading.Lock()
        self.db.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
        # NORMAL: a commit survives a killed process, not a power cut (FULL would: an fsync per write)
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)

    def _run(self, sql: str, args: tuple = ()) -> tuple[list[tuple], int]:
        """The rows a statement gives, and how many it changed."""
        with self.lock:
            # subtle: fetch every row, or the statement stays open and holds an old snapshot,
            # and this connection's next write fails at once with "database is locked"
            cursor = self.db.execute(sql, args)
            return cursor.fetchall(), cursor.rowcount

    def load(self, sid: str) -> Session | None:
        """The session, its notebook checked against the invariants; None if there is none."""
        rows, _ = self._run("SELECT owner, notebook, version, lease_until, jti FROM sessions WHERE id = ?", (sid,))
        return Session(rows[0][0], check(Context.from_json(rows[0][1])), *rows[0][2:]) if rows else None

    def create(self, sid: str, owner: str, ctx: Context) -> None:
        self._run("INSERT INTO sessions (id, owner, notebook, version) VALUES (?, ?, ?, 0)",
                  (sid, owner, ctx.to_json()))

    def save(self, sid: str, ctx: Context, version: int, *, lease_until: float = 0.0,
             jti: str | None = None) -> int | None:
        """Write the session if it is still at `version`: the new version, or None if someone wrote first."""
        _, changed = self._run("UPDATE sessions SET notebook = ?, version = version + 1, lease_until = ?, jti = ? "
                               "WHERE id = ? AND version = ?", (ctx.to_json(), lease_until, jti, sid, version))
        return version + 1 if changed == 1 else None

    def audit(self, user: str | None, sid: str | None, what: str, detail: str = "") -> None:
        """Append a line to the audit trail (the database refuses to change or delete one)."""
        cut = [None if v is None else v[:200] for v in (user, sid, detail)]  # a stranger's 60 kB id stays short
        self._run("INSERT INTO audit (at, user, session, what, detail) VALUES (?, ?, ?, ?, ?)",
                  (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), cut[0], cut[1], what, cut[2]))

    def trail(self) -> list[tuple]:
        return self._run("SELECT at, user, session, what, detail FROM audit ORDER BY n")[0]


# ----------------------------------------------------------------------------
# approval tokens: JWT's compact form, HS256 (base64url(header).base64url(claims).base64url(signature))

def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def sign(claims: dict, secret: bytes) -> str:
    """A token any JWT library can read, signed with HMAC-SHA256."""
    head = _b64(b'{"alg":"HS256","typ":"JWT"}') + "." + _b64(json.dumps(claims).encode())
    return head + "." + _b64(hmac.new(secret, head.encode(), hashlib.sha256).digest())


def verify(token: str, secret: bytes, now: float) -> dict:
    """The claims of a token signed with `secret` that has not expired; a ValueError otherwise."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ValueError("an approval token has three parts: header.claims.signature")
    expected = _b64(hmac.new(secret, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest())
    if not hmac.compare_digest(parts[2].encode(), expected.encode()):
        raise ValueError("the approval token's signature does not match: tampered, or signed elsewhere")
    header, claims = json.loads(_unb64(parts[0])), json.loads(_unb64(parts[1]))
    if header.get("alg") != "HS256":  # subtle: never let the token pick its own algorithm
        raise ValueError("only HS256 approval tokens are accepted")
    if not isinstance(claims.get("exp"), int) or claims["exp"] <= now:
        raise ValueError("the approval token has expired: POST /sessions/{id}/resume for a new one")
    return claims


def digest(args: str) -> str:
    """What a token says about the arguments it approves: the sha256 of their JSON text."""
    return hashlib.sha256(args.encode()).hexdigest()
