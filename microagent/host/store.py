"""Where hosted sessions live: a notebook per session in sqlite, and an audit trail.

This is the one seam between the server and its database, small on purpose:
`load` a session, `create` one, `save` it only if nobody else has since (one
`UPDATE ... WHERE version = ?`: a writer that read an older version loses, in
this process or another one), list the sessions that wait for a verdict
(`waiting`, for the approvers' queue), and append to the `audit` trail, which the
database itself refuses to change or delete. Moving to a database server
(PostgreSQL, say) means these few statements and the connection, nothing else.

A notebook is saved as microagent.saving writes it, and every notebook read back
passes microagent.invariants.check, so a row edited by hand never reaches a run.

What it leaves out: a pool of connections (one, shared behind a lock, is enough
for a teaching server and fast with sqlite's WAL), and migrations.
"""

import dataclasses
import sqlite3
import threading
import time

from microagent.context import Context
from microagent.invariants import check
from microagent.saving import from_json, to_json

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, owner TEXT NOT NULL,
    notebook TEXT NOT NULL, version INTEGER NOT NULL, lease_until REAL NOT NULL DEFAULT 0,
    jti TEXT);
CREATE TABLE IF NOT EXISTS audit (n INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL,
    user TEXT, session TEXT, what TEXT NOT NULL, detail TEXT NOT NULL);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
"""


@dataclasses.dataclass(frozen=True)
class Session:
    owner: str
    context: Context
    version: int        # bumped by every save
    lease_until: float  # a run holds the session until then (time.time()); 0: nobody
    jti: str | None     # the id of the approval token issued for the waiting decision


class Store:
    def __init__(self, path: str):
        # one connection, shared by the threads and taken in turn (the lock); autocommit, so
        # each statement is a transaction of its own, and none spans a read and a write
        self.db = sqlite3.connect(str(path), timeout=30, isolation_level=None,
                                  check_same_thread=False)
        self.lock = threading.Lock()
        self.db.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
        # NORMAL: a commit survives a killed process, not a power cut (FULL: an fsync a write)
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
        rows, _ = self._run("SELECT owner, notebook, version, lease_until, jti FROM sessions "
                            "WHERE id = ?", (sid,))
        if not rows:
            return None
        owner, notebook, *rest = rows[0]
        return Session(owner, check(from_json(notebook)), *rest)

    def create(self, sid: str, owner: str, ctx: Context) -> None:
        self._run("INSERT INTO sessions (id, owner, notebook, version) VALUES (?, ?, ?, 0)",
                  (sid, owner, to_json(ctx)))

    def save(self, sid: str, ctx: Context, version: int, *, lease_until: float = 0.0,
             jti: str | None = None) -> int | None:
        """Write the session if it is still at `version`: the new version, or None if
        someone wrote first."""
        _, changed = self._run("UPDATE sessions SET notebook = ?, version = version + 1, "
                               "lease_until = ?, jti = ? WHERE id = ? AND version = ?",
                               (to_json(ctx), lease_until, jti, sid, version))
        return version + 1 if changed == 1 else None

    def waiting(self) -> list[str]:
        """The ids of the sessions whose decision waits for a verdict (a token is out for it),
        the oldest session first."""
        rows, _ = self._run("SELECT id FROM sessions WHERE jti IS NOT NULL ORDER BY rowid")
        return [sid for (sid,) in rows]

    def audit(self, user: str | None, sid: str | None, what: str, detail: str = "") -> None:
        """Append a line to the audit trail (the database refuses to change or delete one)."""
        # a stranger's 60 kB session id stays short
        cut = [None if v is None else v[:200] for v in (user, sid, detail)]
        self._run("INSERT INTO audit (at, user, session, what, detail) VALUES (?, ?, ?, ?, ?)",
                  (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), cut[0], cut[1], what,
                   cut[2]))

    def trail(self) -> list[tuple]:
        return self._run("SELECT at, user, session, what, detail FROM audit ORDER BY n")[0]
