"""Where hosted sessions live: each one's notes, a row a note, in pen; and an audit trail.

This is the one seam between the server and its database, small on purpose:
`load` a session, `create` one, `save` it only if nobody else has since, list
the sessions whose decision waits for a verdict (`waiting`, the approvers'
queue), `take` one of a user's runs from their budget (the rate limit), ask a
run to stop in whichever process it runs (`cancel`, heard by `cancelled`), and
append to the `audit` trail. Two databases sit behind it: a sqlite file, the
default and the standard library only (sqlite.py); or a PostgreSQL server, given
as a `postgresql://` URL, for several host processes on one database
(postgres.py; it needs psycopg 3: `pip install '.[postgres]'`). The statements
are the same for both.

Written in pen, as the notebook is. A session's notes are rows of `notes`, one
a note (microagent.saving's JSON of a notebook of that one note), numbered from
0. A save appends only the notes that are new since the version it read, and
bumps the session's `version` in the same transaction, if it is still the
version read: a writer that read an older version loses whole, and nothing of
its notes is written, in this process or another. The database refuses to
change or delete a note or an audit row (triggers), or to let an insert replace
one.

Read in pen too. A process keeps the notebooks it has read or written (up to
KEEP notes in all), and a later load of the session reads only the notes
appended since. Every note read is parsed strictly (microagent.saving) and
checked by microagent.invariants where it joins the notebook: its rules read at
most two notes on either side, so the notes from the last question before the
join on are checked as a notebook of their own (`checked`). A note that breaks
them is a ValueError, never run. So a message at the end of a long session
costs about what one at its start does (benchmarks/long_session.py).

What it leaves out: migrations, beyond adding the one column the host before this
one lacked (`upgrade`, in sqlite.py and postgres.py; a database made by an older
host still is refused with a message that says so); and a note changed behind
the database's back (which takes dropping its triggers) after a process has read
it: that process goes on with the note it read; a process that reads the changed
note refuses it if it breaks the rules.
"""

import collections
import dataclasses
import threading
import time
import urllib.parse

from microagent.context import Context
from microagent.invariants import check
from microagent.host.sqlite import Sqlite
from microagent.saving import from_json, to_json

KEEP = 200_000  # notes kept in memory over all sessions (about 100 MB at most)
SERVERS = ("postgresql://", "postgres://")  # a database server's URL; else a sqlite file

@dataclasses.dataclass(frozen=True)
class Session:
    asker: str          # who asked in it (the sessions table's column `owner`)
    context: Context
    version: int        # bumped by every save
    lease_until: float  # a run holds the session until then (time.time()); 0: nobody
    jti: str | None     # the id of the approval token issued for the waiting decision
    cancelled: bool = False  # its last write: a cancel, or the cancelled run letting go


class Store:
    def __init__(self, db: str, keep: int = KEEP):
        """The store in `db`: a sqlite file's path, or a postgresql:// URL."""
        self.db = open_db(db)
        self.db.schema()
        self.db.upgrade()  # the host before this one kept no `stop`: added
        try:  # an older host still: a notebook a row, or no time a session was made
            self.db.run("SELECT created, length, stop FROM sessions WHERE id = ''")
        except Exception:  # the database's own error for a missing column (either one's)
            self.db.close()
            raise ValueError(f"{shown(db)} was made by an older host, which kept other "
                             "columns (a notebook a row, or no time a session was "
                             "made) that this one can't upgrade: start on a new "
                             "database") from None
        self.keep, self.lock = keep, threading.Lock()
        # session id -> (version, its notebook at that version), the last used last
        self.kept: collections.OrderedDict[str, tuple[int, Context]] = \
            collections.OrderedDict()
        self.kept_notes = 0

    def load(self, sid: str) -> Session | None:
        """The session, its notebook checked by the invariants; None if there is none."""
        if "\x00" in sid:  # no id holds one (and PostgreSQL's text can't)
            return None
        kept = self._kept(sid)
        for since in (len(kept[1]), 0) if kept else (0,):
            # one statement, so the session's row and its notes are read as of one moment
            rows, _ = self.db.run(
                "SELECT owner, version, length, lease_until, jti, stop, note "
                "FROM sessions s LEFT JOIN notes n "
                "ON n.session = s.id AND n.n >= ? AND n.n < s.length "
                "WHERE s.id = ? ORDER BY n.n", (since, sid))
            if not rows:
                return None
            asker, version, length, lease_until, jti, stop = rows[0][:6]
            notes = [row[6] for row in rows if row[6] is not None]
            cancelled = stop > 0 and version - stop <= 1  # the cancel, or its run let go
            if since and kept[0] == version and length == since:  # nothing new since
                return Session(asker, kept[1], version, lease_until, jti, cancelled)
            if since and not (kept[0] < version and since <= length):
                continue  # not a later version of what this process read: read it all
            if len(notes) != length - since:
                raise ValueError(f"session {sid} has {length} notes, and notes {since} "
                                 f"to {length - 1} are not all there")
            known = kept[1].messages if since else ()
            ctx = checked(Context(known + _read(notes, since)), since)
            self._keep(sid, version, ctx)
            return Session(asker, ctx, version, lease_until, jti, cancelled)

    def create(self, sid: str, asker: str, ctx: Context) -> None:
        check(ctx)
        with self.db.transaction() as run:
            run("INSERT INTO sessions (id, owner, created, version, length) "
                "VALUES (?, ?, ?, 0, ?)", (sid, asker, time.time(), len(ctx)))
            self._append(run, sid, 0, ctx)
        self._keep(sid, 0, ctx)

    def save(self, sid: str, ctx: Context, version: int, *, lease_until: float = 0.0,
             jti: str | None = None) -> int | None:
        """Write the session if it is still at `version`: the new version, or None if
        someone wrote first. `ctx` is the notebook read at `version` with notes added."""
        kept = self._kept(sid)
        if not (kept and kept[0] == version):  # not kept (or kept at a later version)
            s = self.load(sid)
            if s is None or s.version != version:
                return None  # someone wrote first
            kept = (version, s.context)
        before = kept[1].messages
        if ctx.messages[:len(before)] != before:  # fast: the same notes are one object
            raise ValueError("a save adds notes to the notebook it read, and changes "
                             "none")
        checked(ctx, len(before))
        with self.db.transaction() as run:
            _, changed = run("UPDATE sessions SET version = version + 1, length = ?, "
                             "lease_until = ?, jti = ? WHERE id = ? AND version = ?",
                             (len(ctx), lease_until, jti, sid, version))
            if changed != 1:
                return None  # someone wrote first: nothing of ours is written
            self._append(run, sid, len(before), ctx)
        self._keep(sid, version + 1, ctx)
        return version + 1

    def waiting(self) -> list[str]:
        """The ids of the sessions whose decision waits for a verdict (a token is out for
        it), the oldest session first."""
        rows, _ = self.db.run("SELECT id FROM sessions WHERE jti IS NOT NULL "
                              "ORDER BY created, id")
        return [sid for (sid,) in rows]

    def cancel(self, sid: str) -> bool:
        """Ask the run on the session to stop, in whichever process; False if none runs.
        It moves the version, so the run's next save misses and asks `cancelled` why;
        `stop` is the new version (SET reads the old row), so it stops no later run."""
        _, changed = self.db.run("UPDATE sessions SET version = version + 1, "
                                 "stop = version + 1 WHERE id = ? AND lease_until > ?",
                                 (sid, time.time()))
        return changed == 1

    def cancelled(self, sid: str, version: int) -> bool:
        """Was the run that took the session at `version` asked to stop since?"""
        rows, _ = self.db.run("SELECT stop FROM sessions WHERE id = ?", (sid,))
        return bool(rows) and rows[0][0] > version

    def take(self, user: str, per_second: float, burst: int) -> float:
        """Take one run from the user's budget: 0.0 if it may start, else seconds to wait.

        A budget of `burst` runs at once, refilled at `per_second`, kept in the database,
        so it holds across processes. Its one number is `busy_until`: when the runs taken
        so far are paid back, at per_second. A run may start while that is at most
        burst - 1 runs ahead of now; then it is one run later. One statement: no two
        processes can both take the last run.
        """
        now, each, ahead = time.time(), 1 / per_second, (burst - 1) / per_second
        _, taken = self.db.run(
            "INSERT INTO rates (who, busy_until) VALUES (?, ?) "
            "ON CONFLICT (who) DO UPDATE SET busy_until = "
            "CASE WHEN rates.busy_until > ? THEN rates.busy_until ELSE ? END + ? "
            "WHERE rates.busy_until - ? <= ?",
            (user, now + each, now, now, each, now, ahead))
        if taken:
            return 0.0
        rows, _ = self.db.run("SELECT busy_until FROM rates WHERE who = ?", (user,))
        [(busy_until,)] = rows
        return max(busy_until - ahead - now, 1e-3)

    def audit(self, user: str | None, sid: str | None, what: str,
              detail: str = "") -> None:
        """Append a line to the audit trail (the database refuses to change or delete
        one)."""
        # a stranger's 60 kB session id stays short; text a database can't hold is escaped
        cut = [None if v is None else _storable(v[:200]) for v in (user, sid, detail)]
        self.db.run("INSERT INTO audit (at, who, session, what, detail) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), cut[0], cut[1],
                     _storable(what), cut[2]))

    def trail(self) -> list[tuple]:
        """The audit trail, oldest first: (at, who, session, what, detail) each."""
        return self.db.run("SELECT at, who, session, what, detail FROM audit "
                           "ORDER BY n")[0]

    def close(self) -> None:
        self.db.close()

    def _append(self, run, sid: str, start: int, ctx: Context) -> None:
        for n in range(start, len(ctx)):
            run("INSERT INTO notes (session, n, note) VALUES (?, ?, ?)",
                (sid, n, to_json(Context((ctx[n],)))))

    def _kept(self, sid: str) -> tuple[int, Context] | None:
        with self.lock:
            kept = self.kept.get(sid)
            if kept:
                self.kept.move_to_end(sid)
            return kept

    def _keep(self, sid: str, version: int, ctx: Context) -> None:
        with self.lock:
            old = self.kept.pop(sid, None)
            if old and old[0] > version:  # another thread here kept a later one meanwhile
                self.kept[sid] = old
                return
            self.kept[sid] = (version, ctx)
            self.kept_notes += len(ctx) - (len(old[1]) if old else 0)
            while self.kept_notes > self.keep and len(self.kept) > 1:
                self.kept_notes -= len(self.kept.popitem(last=False)[1][1])


def checked(ctx: Context, since: int) -> Context:
    """`ctx`, whose notes before `since` keep the rules of microagent.invariants, if all
    of them do; else the ValueError of `check`, naming the first bad note.

    Each rule of a note reads at most the two notes on either side, and a question has
    none but being first; so from a question at or before since - 2 on, the notes are
    checked as a notebook of their own, and each keeps the rules there as it does in
    the whole (tests/host/test_store.py checks this against `check` on generated
    notebooks).
    """
    notes, start = ctx.messages, since - 2
    if since >= len(notes):
        return ctx  # nothing new
    while start > 0 and notes[start].kind != "question":
        start -= 1
    if start <= 0:
        return check(ctx)
    try:
        check(Context(notes[start:]))
    except ValueError as e:
        raise ValueError(f"the notes from {start} on: {e}") from None
    return ctx


def _read(notes: list[str], since: int) -> tuple:
    """The notes read from their rows (each a saved notebook of one note), strictly."""
    read = []
    for n, text in enumerate(notes, since):
        one = from_json(text)  # a ValueError that says what is wrong
        if len(one) != 1:
            raise ValueError(f"note {n} holds {len(one)} notes, not one")
        read.append(one[0])
    return tuple(read)


def _storable(text: str) -> str:
    """Text any database holds: NUL and lone surrogates written as escapes."""
    escaped = text.replace("\x00", "\\x00")
    return escaped.encode("utf-8", "backslashreplace").decode("utf-8")


# ----------------------------------------------------------------------------
# which database: sqlite.py's or postgres.py's, each running a statement at a time
# (`run`), or several as one (`transaction`)

def open_db(db: str):
    """The database `db` names: a postgresql:// URL (needs psycopg), else sqlite's."""
    if db.startswith(SERVERS):
        from microagent.host.postgres import Postgres  # only then: psycopg is optional

        return Postgres(db, shown(db))
    return Sqlite(db)


def shown(db: str) -> str:
    """The database's name as it may be printed: a URL without its password.

    >>> shown("postgresql://host:secret@127.0.0.1:5432/office?password=secret&sslmode=on")
    'postgresql://host@127.0.0.1:5432/office?sslmode=on'
    """
    if not db.startswith(SERVERS):
        return db
    url = urllib.parse.urlsplit(db)
    where = url.netloc.rpartition("@")[2]
    name = url.username and urllib.parse.unquote(url.username)
    who = name and urllib.parse.quote(name, safe="") + "@"
    query = urllib.parse.urlencode([(k, v) for k, v in urllib.parse.parse_qsl(url.query)
                                    if k != "password"])
    return urllib.parse.urlunsplit((url.scheme, (who or "") + where, url.path, query, ""))
