"""The host's store, written in pen: a note a row, appended; read once, then only what is new.

Every test that touches a database runs on both: a sqlite file, and a real
PostgreSQL server (the `postgres` fixture in conftest.py; without PostgreSQL's
binaries those runs skip and say why). Two Store objects on one database stand
for two host processes: neither sees the other's memory, only the database.
"""

import subprocess
import sys
import threading
import time
import urllib.parse

import pytest
from hypothesis import given, settings, strategies as st

from microagent import Context, Message, to_json
from microagent.host import ledger_refund, refund_office
from microagent.host.store import Store, checked, open_db, shown
from microagent.invariants import check
from test_host import ANSWER, QUESTION, Host

ASK = Message("user", "refund A1234?")
LOOK = (Message("assistant", "look first", "support", "look_up_order", '{"order_id": "A1234"}'),
        Message("tool", "A1234, $79, delivered", "look_up_order"))
REFUND = Message("assistant", "a human signs off", "support", "issue_refund", '{"amount": 79}')
YES = Message("user", "approved", "alice", "issue_refund", '{"amount": 79}')
PAID = Message("tool", "$79 refunded", "issue_refund")


@pytest.fixture(params=["sqlite", "postgres"])
def db(request, tmp_path) -> str:
    """A new database: a sqlite file, or a PostgreSQL database's URL."""
    return str(tmp_path / "host.db") if request.param == "sqlite" else request.getfixturevalue("postgres")


@pytest.fixture
def stores(db):
    """stores() -> a new Store on the database: each one as another process would be."""
    made = []

    def new(**settings) -> Store:
        made.append(Store(db, **settings))
        return made[-1]
    yield new
    for store in made:
        store.close()


def rows(store: Store, sid: str) -> list[tuple]:
    return store.db.run("SELECT n, note FROM notes WHERE session = ? ORDER BY n", (sid,))[0]


def tamper(store: Store, sid: str, n: int, note: str, length: int) -> None:
    """Someone adds a note by hand, and bumps the session's length and version."""
    with store.db.transaction() as run:
        run("INSERT INTO notes (session, n, note) VALUES (?, ?, ?)", (sid, n, note))
        run("UPDATE sessions SET length = ?, version = version + 1 WHERE id = ?", (length, sid))


def test_the_sessions_that_wait_for_a_verdict_are_listed_oldest_first_in_every_process(stores):
    store, other = stores(), stores()
    for sid in ["s-late", "s-none", "s-early"]:  # made in this order; the ids sort the other way
        store.create(sid, "alice", Context())
        time.sleep(0.002)
    waiting = Context().add(ASK, *LOOK, REFUND)
    assert store.save("s-early", waiting, 0, jti="j1") == 1
    assert other.save("s-late", waiting, 0, jti="j2") == 1  # another process's write
    assert store.save("s-none", waiting, 0) == 1  # no token out: nothing waits on it
    assert store.waiting() == other.waiting() == ["s-late", "s-early"]
    assert other.save("s-late", waiting.add(YES), 1) == 2  # the verdict written: the token gone
    assert store.waiting() == ["s-early"]


# ----------------------------------------------------------------------------
# written in pen: a save appends its new notes, and a writer that read an old version loses whole

def test_a_save_appends_only_its_new_notes_each_a_row_and_bumps_the_version(stores):
    store = stores()
    store.create("s1", "alice", Context())
    ctx, version = Context(), 0
    for notes in [(ASK,), LOOK, (REFUND,), (YES,), (PAID,)]:
        ctx = ctx.add(*notes)
        version = store.save("s1", ctx, version, lease_until=5.0, jti="j")
        # each note once, in order, as microagent.saving writes a notebook of that one note
        assert rows(store, "s1") == [(n, to_json(Context((m,)))) for n, m in enumerate(ctx)]
    assert version == 5
    s = stores().load("s1")  # another process reads it whole
    assert (s.asker, s.context, s.version, s.lease_until, s.jti) == ("alice", ctx, 5, 5.0, "j")


def test_a_writer_that_read_an_older_version_loses_and_writes_nothing(stores):
    a, b = stores(), stores()
    a.create("s1", "alice", Context((ASK,)))
    read_by_a, read_by_b = a.load("s1"), b.load("s1")
    assert a.save("s1", read_by_a.context.add(*LOOK), read_by_a.version) == 1
    assert b.save("s1", read_by_b.context.add(REFUND), read_by_b.version) is None  # b lost
    assert b.save("s1", read_by_b.context, read_by_b.version) is None  # a save that adds nothing too
    assert [n for n, _ in rows(a, "s1")] == [0, 1, 2]  # nothing of b's
    assert stores().load("s1").context == Context((ASK, *LOOK))
    assert b.load("s1").context == Context((ASK, *LOOK))  # b reads what a wrote, and goes on from it


def test_a_cancel_asked_in_another_process_makes_the_runs_next_save_miss_and_stops_no_later_run(stores):
    run, other = stores(), stores()
    run.create("s1", "alice", Context((ASK,)))
    assert other.cancel("s1") is False  # no run holds the session: nothing to cancel
    took = run.save("s1", Context((ASK,)), 0, lease_until=time.time() + 30)  # a run takes it: version 1
    assert run.cancelled("s1", took) is False
    assert other.cancel("s1") is True
    assert run.save("s1", Context((ASK, *LOOK)), took, lease_until=time.time() + 30) is None  # missed
    assert run.cancelled("s1", took) is True  # and why: a cancel, not another run
    version = run.load("s1").version
    assert run.save("s1", Context((ASK, *LOOK)), version) == version + 1  # its step kept, the session let go
    later = run.save("s1", Context((ASK, *LOOK)), version + 1, lease_until=time.time() + 30)
    assert run.cancelled("s1", later) is False  # the next run is not stopped by the old cancel


def test_of_many_writers_racing_for_one_version_exactly_one_wins(stores):
    processes = [stores() for _ in range(2)]
    processes[0].create("s1", "alice", Context((ASK,)))
    for _ in range(3):
        loaded = [p.load("s1") for p in processes for _ in range(4)]  # 8 writers, two processes
        go, won = threading.Barrier(len(loaded)), []

        def write(i, go=go, loaded=loaded, won=won):
            go.wait()
            p, s = processes[i // 4], loaded[i]
            won.append(p.save("s1", s.context.add(*LOOK), s.version))
        threads = [threading.Thread(target=write, args=(i,)) for i in range(len(loaded))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(won, key=str) == [loaded[0].version + 1] + [None] * 7
    assert len(stores().load("s1").context) == 1 + 3 * 2


def at_once(make, n: int = 8) -> tuple[list, list[str]]:
    """`make()` in n threads let go together: what they made, and how those that failed failed."""
    go, made, failed = threading.Barrier(n), [], []

    def one():
        go.wait()
        try:
            made.append(make())
        except Exception as e:
            failed.append(f"{type(e).__name__}: {e}")
    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return made, failed


def test_eight_processes_opening_one_new_postgresql_database_at_once_all_make_or_find_its_tables(postgres):
    # the tables are made under an advisory lock: without it, CREATE ... IF NOT EXISTS at once collides in
    # the catalog (a UniqueViolation, "tuple concurrently updated") and most of the eight fail to start
    opened, failed = at_once(lambda: Store(postgres))
    try:
        assert failed == [] and len(opened) == 8
        opened[0].create("s1", "alice", Context((ASK,)))
        assert all(store.load("s1").context == Context((ASK,)) for store in opened)
    finally:
        for store in opened:
            store.close()
    # and the refund office's ledger, which makes its own table the same way
    ledgers, failed = at_once(lambda: ledger_refund(postgres))
    assert failed == [] and [tool.name for tool in ledgers] == ["issue_refund"] * 8


def test_a_save_must_add_to_the_notebook_it_read_and_keep_the_rules(stores):
    store = stores()
    store.create("s1", "alice", Context((ASK, *LOOK)))
    with pytest.raises(ValueError, match="adds notes to the notebook it read"):
        store.save("s1", Context((ASK,)), 0)  # a note taken away
    with pytest.raises(ValueError, match="adds notes to the notebook it read"):
        store.save("s1", Context((Message("user", "another question"), *LOOK, REFUND)), 0)
    with pytest.raises(ValueError, match="a result with no decision before it"):
        store.save("s1", Context((ASK, *LOOK, PAID)), 0)
    assert store.save("s1", Context((ASK, *LOOK, REFUND)), 0) == 1  # nothing was lost meanwhile
    assert len(rows(store, "s1")) == 4


def test_the_database_refuses_to_change_delete_or_replace_a_note(stores, db):
    store = stores()
    store.create("s1", "alice", Context((ASK, *LOOK)))
    changes = ["UPDATE notes SET note = 'x'", "DELETE FROM notes",
               "INSERT INTO notes VALUES ('s1', 1, 'x') ON CONFLICT (session, n) DO UPDATE SET note = 'x'"]
    changes += ["TRUNCATE notes"] if db.startswith("postgresql") else [
        "INSERT OR REPLACE INTO notes VALUES ('s1', 1, 'x')", "REPLACE INTO notes VALUES ('s1', 2, 'x')"]
    for change in changes:
        with pytest.raises(Exception, match="a note is written in pen"):
            store.db.run(change)
    assert stores().load("s1").context == Context((ASK, *LOOK))


# ----------------------------------------------------------------------------
# read in pen: a process reads a session whole once, then only the notes appended since

def test_a_process_reads_only_the_notes_another_appended_since_it_last_read(stores, monkeypatch):
    mine, theirs = stores(), stores()
    mine.create("s1", "alice", Context((ASK, *LOOK)))
    mine.load("s1")
    s = theirs.load("s1")
    theirs.save("s1", s.context.add(REFUND), s.version)
    read = []
    run = mine.db.run
    monkeypatch.setattr(mine.db, "run", lambda sql, args=(): read.append(run(sql, args)[0]) or (read[-1], 0))
    s = mine.load("s1")
    assert s.context == Context((ASK, *LOOK, REFUND)) and s.version == 1
    assert [row[-1] for row in read[0]] == [to_json(Context((REFUND,)))]  # the one new note, no other
    assert mine.load("s1").context is s.context  # nothing new: the notebook it has


def test_a_note_that_breaks_the_rules_where_it_joins_is_refused_not_run(stores):
    mine, other = stores(), stores()
    mine.create("s1", "alice", Context((ASK, *LOOK, REFUND)))  # waits for a human
    assert mine.load("s1").context[-1] == REFUND
    # alone, a question is a sound notebook; after a decision nobody answered, it is not
    tamper(other, "s1", 4, to_json(Context((Message("user", "and B9999?"),))), 5)
    for store in (mine, stores()):  # the process that had the rest in memory, and a new one
        with pytest.raises(ValueError, match="a decision must be answered right after it"):
            store.load("s1")


@pytest.mark.parametrize("note, length, says", [
    ("not json", 5, "not a saved Context"),
    ('{"format": "microagent.context/1", "messages": [{"role": "boss", "content": "pay"}]}', 5, "role must be"),
    (to_json(Context((YES, PAID))), 5, "note 4 holds 2 notes, not one"),
    (to_json(Context((YES,))), 6, "has 6 notes, and notes [04] to 5 are not all there"),
])
def test_a_row_that_is_not_one_sound_note_is_refused(stores, note, length, says):
    mine = stores()
    mine.create("s1", "alice", Context((ASK, *LOOK, REFUND)))
    tamper(stores(), "s1", 4, note, length)
    for store in (mine, stores()):
        with pytest.raises(ValueError, match=says):
            store.load("s1")


def test_a_note_rewritten_behind_the_databases_back_is_refused_by_whoever_reads_it(stores, db):
    mine = stores()
    mine.create("s1", "alice", Context((ASK, *LOOK, REFUND)))
    if db.startswith("postgresql"):  # it takes dropping the triggers
        mine.db.run("ALTER TABLE notes DISABLE TRIGGER notes_in_pen")
    else:
        mine.db.run("DROP TRIGGER notes_no_update")
    mine.db.run("UPDATE notes SET note = ? WHERE session = 's1' AND n = 1", (to_json(Context((PAID,))),))
    with pytest.raises(ValueError, match="message 1 .a result from issue_refund.: a result with no decision before it"):
        stores().load("s1")  # read afresh: refused
    # the process that read it before goes on with the note it read (see store.py): never the changed one
    assert mine.load("s1").context[1] == LOOK[0]


def test_sessions_beyond_what_a_process_keeps_are_read_again_and_stay_right(stores):
    store, writer = stores(keep=10), stores()
    for i in range(6):
        writer.create(f"s{i}", "alice", Context((Message("user", f"question {i}"), *LOOK)))
    for _ in range(2):
        for i in range(6):
            assert store.load(f"s{i}").context[0].content == f"question {i}"
        assert store.kept_notes <= 10 and len(store.kept) <= 4
    s = store.load("s0")
    assert store.save("s0", s.context.add(REFUND), s.version) == 1
    assert writer.load("s0").context[-1] == REFUND


def test_an_unknown_session_and_an_id_no_database_can_hold_are_none(stores):
    store = stores()
    assert store.load("nobody") is None and store.load("a\x00b") is None
    assert store.save("nobody", Context((ASK,)), 0) is None


# ----------------------------------------------------------------------------
# the join: checking from the last question before it says what checking the whole would say

NOTES = {"question": Message("user", "q"), "system": Message("system", "be kind"),
         "remark": Message("assistant", "out of steps", "agent"),
         "no_move": Message("assistant", "cut off", "agent", error=True)}
for tool in "ab":
    NOTES |= {f"decision {tool}": Message("assistant", "", "agent", tool, "{}"),
              f"yes {tool}": Message("user", "approved", "alice", tool, "{}"),
              f"no {tool}": Message("user", "no", "alice", tool),
              f"odd yes {tool}": Message("user", "approved", "alice", tool, "[1]"),
              f"result {tool}": Message("tool", "done", tool),
              f"error {tool}": Message("tool", "error: no", tool, error=True)}
TURNS = [["question"], ["remark"], ["no_move"], ["decision a", "result a"], ["decision b", "error b"],
         ["decision a", "yes a", "result a"], ["decision b", "no b", "error b"]]


def sound(turns: list[list[str]]) -> list[Message]:
    return [NOTES["question"]] + [NOTES[name] for turn in turns for name in turn]


@settings(max_examples=400, deadline=None)
@given(turns=st.lists(st.sampled_from(TURNS), max_size=8), cut=st.integers(min_value=0),
       added=st.lists(st.sampled_from(sorted(NOTES)), max_size=4), system=st.booleans())
def test_checking_from_the_join_agrees_with_checking_the_whole_notebook(turns, cut, added, system):
    notes = [NOTES["system"]] * system + sound(turns)
    since = cut % (len(notes) + 1)
    before = Context(tuple(notes[:since]))
    check(before)  # a sound notebook cut anywhere is sound (a decision may wait at its end)
    ctx = Context(tuple(notes[:since] + [NOTES[name] for name in added] + notes[since:]))
    try:
        check(ctx)
        whole = None
    except ValueError as e:
        whole = str(e)
    try:
        assert checked(ctx, since) is ctx
        joined = None
    except ValueError as e:
        joined = str(e)
    assert (joined is None) == (whole is None), (joined, whole)


# ----------------------------------------------------------------------------
# the rate limit and the audit trail live in the database, for every process alike

def test_the_rate_limit_holds_across_processes(stores):
    a, b = stores(), stores()
    assert [a.take("alice", 0.5, 3), b.take("alice", 0.5, 3), a.take("alice", 0.5, 3)] == [0.0] * 3
    waits = [b.take("alice", 0.5, 3), a.take("alice", 0.5, 3)]  # the budget is spent for both
    assert all(1.5 < wait <= 2.0 for wait in waits), waits
    assert a.take("bob", 0.5, 3) == 0.0  # per user
    fast = stores()
    assert fast.take("carol", 20.0, 1) == 0.0 and fast.take("carol", 20.0, 1) > 0
    time.sleep(0.06)
    assert fast.take("carol", 20.0, 1) == 0.0  # refilled


def test_the_audit_trail_is_append_only_and_holds_any_text(stores, db):
    store = stores()
    store.audit("alice", "s1", "created")
    store.audit("bob\x00", "s1", "denied", "issue_refund: no\x00 \ud800 way")  # NUL and half a character
    assert store.trail()[1][1:] == ("bob\\x00", "s1", "denied", "issue_refund: no\\x00 \\ud800 way")
    changes = ["UPDATE audit SET who = 'mallory'", "DELETE FROM audit",
               "INSERT INTO audit VALUES (1, '', '', '', '', '') ON CONFLICT (n) DO UPDATE SET who = 'mallory'"]
    changes += ["TRUNCATE audit"] if db.startswith("postgresql") else [
        "INSERT OR REPLACE INTO audit VALUES (1, '2026', 'mallory', 's1', 'created', '')"]
    for change in changes:
        with pytest.raises(Exception, match="the audit trail is append-only"):
            store.db.run(change)
    assert [row[1] for row in stores().trail()] == ["alice", "bob\\x00"]


@pytest.mark.parametrize("columns", [
    "notebook TEXT NOT NULL, version INTEGER NOT NULL",  # a notebook a row
    "version INTEGER NOT NULL, length INTEGER NOT NULL"])  # a note a row, no time a session was made
def test_a_database_made_by_an_older_host_is_refused_with_a_message_that_says_so(db, columns):
    old = open_db(db)
    old.run(f"CREATE TABLE sessions (id TEXT PRIMARY KEY, owner TEXT NOT NULL, {columns}, "
            "lease_until REAL NOT NULL DEFAULT 0, jti TEXT)")
    old.close()
    with pytest.raises(ValueError, match="made by an older host.*start on a new database$") as e:
        Store(db)
    assert str(e.value).startswith(f"{shown(db)} was made")  # named, and without its password
    assert shown(db) == db or ":" + urllib.parse.urlsplit(db).password + "@" not in str(e.value)


# the sessions table as the host before this one made it (git show 7a3bf0a:microagent/host/sqlite.py and
# postgres.py): no `stop`; its other tables are today's
OLD_SESSIONS = {
    "sqlite": "CREATE TABLE sessions (id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
              "created REAL NOT NULL, version INTEGER NOT NULL, length INTEGER NOT NULL, "
              "lease_until REAL NOT NULL DEFAULT 0, jti TEXT)",
    "postgres": "CREATE TABLE sessions (id TEXT PRIMARY KEY, owner TEXT NOT NULL, "
                "created DOUBLE PRECISION NOT NULL, version BIGINT NOT NULL, length BIGINT NOT NULL, "
                "lease_until DOUBLE PRECISION NOT NULL DEFAULT 0, jti TEXT)"}


def old_database(db: str) -> Context:
    """Make `db` as the host before this one did, with a session in it ("old") whose refund waits for bob's
    verdict, written as that host wrote it; its notebook."""
    paused = refund_office(db).run(QUESTION)  # question, look up, check, the refund asked: it waits
    old = open_db(db)
    old.run(OLD_SESSIONS["postgres" if db.startswith("postgresql") else "sqlite"])
    old.schema()  # the rest, as the host before made it (the same)
    with old.transaction() as run:
        run("INSERT INTO sessions (id, owner, created, version, length, jti) VALUES (?, ?, ?, ?, ?, ?)",
            ("old", "alice", time.time(), 1, len(paused), "jti-of-the-old-host"))
        for n, note in enumerate(paused):
            run("INSERT INTO notes (session, n, note) VALUES (?, ?, ?)", ("old", n, to_json(Context((note,)))))
    assert len(old.run("SELECT * FROM sessions")[0][0]) == 7  # no stop
    old.close()
    return paused


def test_a_database_made_by_the_host_before_gets_its_new_column_and_its_session_reads_back_and_runs(db, tmp_path):
    paused = old_database(db)
    h = Host(tmp_path, db=db)  # today's host on it
    try:
        assert h.notebook("old") == paused
        status, _, answer = h.call("alice", "GET", "/sessions/old")
        assert answer["pending"] == {"tool": "issue_refund", "args": {"order_id": "A1234", "amount": 79}, "call": 5}
        status, _, stream = h.verdict("old", h.token("old"))  # bob finds it in his queue, and approves
        assert status == 200 and stream[-1] == ("done", {"answer": ANSWER})
        assert len(h.notebook("old")) == 10  # the verdict, the refund, the answer's decision and result
    finally:
        h.close()
    store = Store(db)
    assert store.db.run("SELECT stop FROM sessions WHERE id = 'old'")[0] == [(-1,)]  # as a new one has it
    store.close()


def test_eight_processes_starting_at_once_on_a_database_of_the_host_before_all_start(db):
    old_database(db)
    opened, failed = at_once(lambda: Store(db))
    try:
        assert failed == [] and len(opened) == 8
        assert all(store.load("old").jti == "jti-of-the-old-host" for store in opened)
        assert opened[0].cancel("old") is False  # the cancel's column is there: no run holds it
    finally:
        for store in opened:
            store.close()


def test_a_role_that_may_not_add_the_column_is_told_to_start_the_host_once_as_the_owner(postgres):
    import psycopg

    paused = old_database(postgres)
    name = postgres.rsplit("/", 1)[1]
    role, password = f"clerk_{name}", "clerk-pass-2718281828"
    with psycopg.connect(postgres, autocommit=True) as conn:  # a role that may only use the tables
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        conn.execute(f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {role}")
    clerk = postgres.replace(postgres.split("//")[1].split("@")[0], f"{role}:{password}")
    with pytest.raises(PermissionError) as e:
        Store(clerk)
    assert str(e.value) == (f"the role {role} may not add the column stop to sessions in {shown(clerk)}, made by "
                            "an older host (must be owner of table sessions): start this host once as the "
                            "database's owner, which adds it")
    Store(postgres).close()  # the owner starts it once
    store = Store(clerk)
    assert store.load("old").context == paused
    store.close()


def test_the_sqlite_host_needs_no_psycopg_and_a_url_without_it_says_what_to_install(tmp_path):
    blocked = "import sys; sys.modules['psycopg'] = None  # not installed\n"
    sqlite = blocked + "from microagent.host import Server, refund_office\n" \
                       "Server(refund_office, 'host.db', {'alice': 'a token of 16 or more'}, b's' * 32).server_close(); print('served')"
    done = subprocess.run([sys.executable, "-c", sqlite], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.stdout == "served\n", done.stderr
    url = blocked + "from microagent.host import main; main(sys.argv[1:])"
    done = subprocess.run([sys.executable, "-c", url, "--db", "postgresql://office:secret@127.0.0.1:1/office",
                           "--port", "0"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and done.stderr == (
        "python -m microagent.host: a postgresql:// database needs psycopg 3: "
        "pip install '.[postgres]' (in microagent's folder)\n")
