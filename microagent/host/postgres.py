"""PostgreSQL behind the store's seam: several host processes on one database.

    python -m microagent.host --db postgresql://office@127.0.0.1:5432/office

store.py picks this for a postgresql:// URL. It needs psycopg 3
(`pip install '.[postgres]'`), which nothing else imports, so neither the book
nor the sqlite host ever needs it. The statements are store.py's, the same for
both databases (`?` becomes psycopg's `%s`); what differs is here: the schema,
and a few connections kept open and taken in turn instead of one shared.

The porting notes, each a trap:

- `user` is a reserved word: the audit's column is `who` (in sqlite too).
- AUTOINCREMENT is BIGSERIAL, and a REAL is four bytes: money is DOUBLE PRECISION.
- A trigger runs a function (PL/pgSQL here), and TRUNCATE fires no row trigger,
  so an append-only table needs a statement trigger BEFORE TRUNCATE as well.
- INSERT ... ON CONFLICT DO UPDATE fires the UPDATE trigger, so it cannot rewrite a
  note or an audit row (in sqlite, INSERT OR REPLACE would, without a trigger of its own).
- Text may not hold NUL: the notes are JSON (where it is \\u0000) and the store
  escapes it in the audit trail.
- Two processes creating the tables at once collide in the catalog, so the schema
  (the store's, and the ledger's table) is made under an advisory lock.
- CREATE TABLE IF NOT EXISTS asks for the right to create tables even when the
  table is there, and CREATE OR REPLACE asks to own what it replaces. A role that
  may only use the tables (made once by their owner) goes on if all is there.
- A connection kept open does not know the server restarted until it is used, and
  a pool that refills itself with a back-off kept serving requests 6 to 15 s after
  the server was back. So a kept connection is looked at before it is lent (an idle
  one with something to read has been hung up on) and a new one is made at once.

What it leaves out: TLS (libpq reads sslmode from the URL), and retrying a
statement that met the server going down (the request that met it fails, and
says so; the next one gets a new connection).
"""

import contextlib
import re
import select
import threading

try:
    import psycopg
except ImportError:  # the host says what to install, not a traceback
    raise ImportError("a postgresql:// database needs psycopg 3: "
                      "pip install '.[postgres]' (in microagent's folder)") from None

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (id TEXT PRIMARY KEY, owner TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL, version BIGINT NOT NULL, length BIGINT NOT NULL,
    lease_until DOUBLE PRECISION NOT NULL DEFAULT 0, jti TEXT,
    stop BIGINT NOT NULL DEFAULT -1);
CREATE TABLE IF NOT EXISTS notes (session TEXT NOT NULL, n BIGINT NOT NULL,
    note TEXT NOT NULL, PRIMARY KEY (session, n));
CREATE TABLE IF NOT EXISTS audit (n BIGSERIAL PRIMARY KEY, at TEXT NOT NULL, who TEXT,
    session TEXT, what TEXT NOT NULL, detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS rates (who TEXT PRIMARY KEY,
    busy_until DOUBLE PRECISION NOT NULL);
CREATE OR REPLACE FUNCTION written_in_pen() RETURNS trigger LANGUAGE plpgsql
    AS $$ BEGIN RAISE EXCEPTION USING MESSAGE = TG_ARGV[0]; END $$;
CREATE OR REPLACE TRIGGER notes_in_pen BEFORE UPDATE OR DELETE ON notes
    FOR EACH ROW EXECUTE FUNCTION written_in_pen('a note is written in pen');
CREATE OR REPLACE TRIGGER notes_no_truncate BEFORE TRUNCATE ON notes
    FOR EACH STATEMENT EXECUTE FUNCTION written_in_pen('a note is written in pen');
CREATE OR REPLACE TRIGGER audit_in_pen BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION written_in_pen('the audit trail is append-only');
CREATE OR REPLACE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit
    FOR EACH STATEMENT EXECUTE FUNCTION written_in_pen('the audit trail is append-only');
"""

# the host before this one made `sessions` without `stop`: `upgrade` adds it
STOP = "ALTER TABLE sessions ADD COLUMN stop BIGINT NOT NULL DEFAULT -1"
COLUMNS = ("SELECT column_name FROM information_schema.columns "
           "WHERE table_schema = current_schema() AND table_name = 'sessions'")

# what a schema makes, and how to find out whether it is there
MADE = re.compile(r"CREATE (?:OR REPLACE )?(TABLE|FUNCTION|TRIGGER) "
                  r"(?:IF NOT EXISTS )?(\w+)")
FOUND = {"TABLE": "SELECT to_regclass(?) IS NOT NULL",
         "FUNCTION": "SELECT to_regproc(?) IS NOT NULL",
         "TRIGGER": "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = ?)"}


class Postgres:
    """A PostgreSQL database: up to `size` connections at once, kept open and taken in
    turn; each statement its own transaction unless several are run as one
    (`transaction`)."""

    serial = "BIGSERIAL PRIMARY KEY"  # a key the database numbers

    def __init__(self, url: str, shown: str, size: int = 8):
        """The database at `url`; `shown` is its name as a message may print it (no
        password)."""
        self.url, self.shown = url, shown
        self.lock, self.slots = threading.Lock(), threading.Semaphore(size)
        self.idle = [self._connect()]  # a wrong URL or password fails here, saying why

    def schema(self, sql: str = SCHEMA) -> None:
        """Make the tables and triggers `sql` makes, one process at a time. A role that
        may not make them goes on if they are all there (made by their owner); else it is
        told what to do, in one line."""
        try:
            with self.transaction() as run:
                run("SELECT pg_advisory_xact_lock(21021)")  # one process at a time
                run(sql, None)
        except psycopg.errors.InsufficientPrivilege as e:
            missing = [name for kind, name in MADE.findall(sql)
                       if not self.run(FOUND[kind], (name,))[0][0][0]]
            if missing:
                [(role,)] = self.run("SELECT current_user")[0]
                raise PermissionError(
                    f"the role {role} may not make {', '.join(missing)} in {self.shown} "
                    f"({e.diag.message_primary}): start the host once as the database's "
                    "owner, which makes them, then GRANT SELECT, INSERT, UPDATE ON ALL "
                    f"TABLES IN SCHEMA public TO {role}; GRANT USAGE ON ALL SEQUENCES IN "
                    f"SCHEMA public TO {role}"
                ) from None

    def upgrade(self) -> None:
        """Add `stop` to a sessions table the host before this one made, one process at a
        time (the schema's lock); a table older still (no `created`) is left as it is,
        for the store to refuse. A role that may not alter it is told what to do."""
        try:
            with self.transaction() as run:
                run("SELECT pg_advisory_xact_lock(21021)")  # as schema() takes it
                columns = {name for (name,) in run(COLUMNS)[0]}
                if "created" in columns and "stop" not in columns:
                    run(STOP)
        except psycopg.errors.InsufficientPrivilege as e:
            [(role,)] = self.run("SELECT current_user")[0]
            raise PermissionError(
                f"the role {role} may not add the column stop to sessions in "
                f"{self.shown}, made by an older host ({e.diag.message_primary}): start "
                "this host once as the database's owner, which adds it") from None

    def run(self, sql: str, args: tuple | None = ()) -> tuple[list[tuple], int]:
        """The rows a statement gives, and how many it changed."""
        with self.connection() as conn:
            return _run(conn, sql, args)

    @contextlib.contextmanager
    def transaction(self):
        """Yields run(sql, args); the statements are written together, or not at all."""
        with self.connection() as conn, conn.transaction():
            yield lambda sql, args=(): _run(conn, sql, args)

    @contextlib.contextmanager
    def connection(self):
        """A connection alive a moment ago: a kept one, or a new one; kept again after."""
        with self.slots:
            conn = self._kept() or self._connect()
            try:
                yield conn
            finally:
                idle = conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
                if conn.broken or not idle:
                    conn.close()
                if not conn.closed:
                    with self.lock:
                        self.idle.append(conn)

    def _kept(self):
        while True:
            with self.lock:
                conn = self.idle.pop() if self.idle else None
            if conn is None or _alive(conn):
                return conn
            conn.close()  # the server hung up on it (a restart, an idle timeout)

    def _connect(self):
        try:
            return psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except psycopg.Error as e:
            why = f"could not open the database {self.shown}: {e}"
            raise ConnectionError(why) from None

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for conn in idle:
            conn.close()


def _alive(conn) -> bool:
    """An idle connection has nothing to read: if it has, the server has hung up on it."""
    if conn.closed or conn.broken:
        return False
    try:
        return not select.select([conn.fileno()], [], [], 0)[0]
    except (OSError, ValueError):  # its socket is gone
        return False


def _run(conn, sql: str, args: tuple | None) -> tuple[list[tuple], int]:
    # args None: the text is sent as it is (the schema's % is no placeholder)
    cursor = conn.execute(sql if args is None else sql.replace("?", "%s"), args)
    return (cursor.fetchall() if cursor.description else []), cursor.rowcount
