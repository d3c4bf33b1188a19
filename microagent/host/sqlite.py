"""The store's database in a sqlite file: its schema, and one connection shared in turn.

The default database, the standard library only. store.py runs the same
statements on it as on PostgreSQL (postgres.py beside this file: its schema, and
the porting notes); `open_db` there picks one by the name it is given.
"""

import contextlib
import sqlite3
import threading

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, owner TEXT NOT NULL,
    created REAL NOT NULL, version INTEGER NOT NULL, length INTEGER NOT NULL,
    lease_until REAL NOT NULL DEFAULT 0, jti TEXT, stop INTEGER NOT NULL DEFAULT -1);
CREATE TABLE IF NOT EXISTS notes (session TEXT NOT NULL, n INTEGER NOT NULL,
    note TEXT NOT NULL, PRIMARY KEY (session, n)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS audit (n INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL,
    who TEXT, session TEXT, what TEXT NOT NULL, detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rates (who TEXT PRIMARY KEY, busy_until REAL NOT NULL);
-- written in pen: no note or audit row is changed or deleted. subtle: INSERT OR REPLACE
-- deletes the row it replaces without firing a DELETE trigger, so an insert onto a row
-- that is there is refused too
CREATE TRIGGER IF NOT EXISTS notes_no_update BEFORE UPDATE ON notes
    BEGIN SELECT RAISE(ABORT, 'a note is written in pen'); END;
CREATE TRIGGER IF NOT EXISTS notes_no_delete BEFORE DELETE ON notes
    BEGIN SELECT RAISE(ABORT, 'a note is written in pen'); END;
CREATE TRIGGER IF NOT EXISTS notes_no_replace BEFORE INSERT ON notes
    WHEN EXISTS (SELECT 1 FROM notes WHERE session = NEW.session AND n = NEW.n)
    BEGIN SELECT RAISE(ABORT, 'a note is written in pen'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_replace BEFORE INSERT ON audit
    WHEN EXISTS (SELECT 1 FROM audit WHERE n = NEW.n)
    BEGIN SELECT RAISE(ABORT, 'the audit trail is append-only'); END;
"""
# the host before this one made `sessions` without `stop`: `upgrade` adds it
STOP = "ALTER TABLE sessions ADD COLUMN stop INTEGER NOT NULL DEFAULT -1"


class Sqlite:
    """A sqlite file: one connection, shared by the threads and taken in turn (the lock).

    Autocommit, so each statement is a transaction of its own, and none spans a read and
    a write; a transaction takes the file's write lock first (BEGIN IMMEDIATE).
    """

    serial = "INTEGER PRIMARY KEY AUTOINCREMENT"  # a key the database numbers

    def __init__(self, path: str):
        self.db = sqlite3.connect(str(path), timeout=30, isolation_level=None,
                                  check_same_thread=False)
        self.lock = threading.Lock()
        self.db.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
        # NORMAL: a commit survives a killed process, not a power cut (FULL: an fsync a
        # write)
        self.db.execute("PRAGMA synchronous=NORMAL")

    def schema(self, sql: str = SCHEMA) -> None:
        with self.lock:
            self.db.executescript(sql)

    def upgrade(self) -> None:
        """Add `stop` to a sessions table the host before this one made, one process at a
        time (the file's write lock); a table older still (no `created`) is left as it
        is, for the store to refuse."""
        with self.transaction() as run:
            columns = {row[1] for row in run("PRAGMA table_info(sessions)")[0]}
            if "created" in columns and "stop" not in columns:
                run(STOP)

    def run(self, sql: str, args: tuple = ()) -> tuple[list[tuple], int]:
        """The rows a statement gives, and how many it changed."""
        with self.lock:
            return self._run(sql, args)

    @contextlib.contextmanager
    def transaction(self):
        """Yields run(sql, args); the statements are written together, or not at all."""
        with self.lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self._run
                self.db.execute("COMMIT")
            except BaseException:
                if self.db.in_transaction:
                    self.db.execute("ROLLBACK")
                raise

    def _run(self, sql: str, args: tuple = ()) -> tuple[list[tuple], int]:
        # subtle: fetch every row, or the statement stays open and holds an old snapshot,
        # and this connection's next write fails at once with "database is locked"
        cursor = self.db.execute(sql, args)
        return cursor.fetchall(), cursor.rowcount

    def close(self) -> None:
        self.db.close()
