"""The hosted loop across real server processes: killed with SIGKILL mid-run, and two sharing one database.

Each server here is `python -m microagent.host` in a subprocess, serving the
refund office from host_offices.gated_office, whose tools the test can hold
at a gate (files in a folder) to kill or race a process at an exact moment.
Each test runs twice: on a sqlite file, and on a real PostgreSQL server (the
`postgres` fixture in conftest.py; without its binaries that run skips and says why).
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import new_cluster
from host_offices import Listener, request
from microagent.transport.stand_in import reply, serve
from microagent import Context, from_json
from microagent.host.store import open_db, shown
from microagent.invariants import check

TESTS = pathlib.Path(__file__).resolve().parents[1]  # tests/, where host_offices.py is
sys.path.insert(0, str(TESTS.parent / "benchmarks"))
import host_load  # noqa: E402  (benchmarks/host_load.py, whose figures the README quotes)
TOKEN = "alice-token-0123456789"
QUESTION = {"text": "Can I get a refund for order A1234? It arrived broken."}

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")


class Servers:
    """Start server processes on one database (a sqlite file, or a postgresql:// URL); each is
    killed at the end of the test."""

    def __init__(self, tmp_path, db: str = "host.db"):
        self.dir, self.db, self.gates, self.procs = tmp_path, db, tmp_path / "gates", []
        self.gates.mkdir()
        (tmp_path / "users.json").write_text('{"alice": "%s"}' % TOKEN)

    def start(self, lease: float = 30.0, *more: str) -> tuple[subprocess.Popen, int]:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])),
               "HOST_GATES": str(self.gates),
               "MICROAGENT_HOST_SECRET": "a test secret, the same for every process"}
        log = open(self.dir / f"server{len(self.procs)}.log", "w")
        proc = subprocess.Popen([sys.executable, "-m", "microagent.host", "--db", self.db, "--users", "users.json",
                                 "--port", "0", "--office", "host_offices:gated_office", "--lease", str(lease),
                                 "--approve-own", *more],  # alice asks and approves: the races are the point
                                cwd=self.dir, env=env, stdout=subprocess.PIPE, stderr=log, text=True)
        log.close()
        self.procs.append(proc)
        line = proc.stdout.readline()  # "serving on http://127.0.0.1:PORT (...)"
        assert line.startswith("serving on http://127.0.0.1:"), line
        return proc, int(line.split(":")[2].split(" ")[0])

    def gate(self, name: str, on: bool = True) -> None:
        (self.gates / name).touch() if on else (self.gates / name).unlink()

    def wait_for(self, name: str) -> None:
        deadline = time.monotonic() + 60
        while not (self.gates / name).exists():
            assert time.monotonic() < deadline, f"{name} never came"
            time.sleep(0.02)

    def refunds(self) -> list[tuple]:
        db = open_db(self.db if "://" in self.db else str(self.dir / self.db))
        try:
            return db.run("SELECT call, order_id, amount FROM refunds ORDER BY n")[0]
        finally:
            db.close()

    def close(self):
        for proc in self.procs:
            proc.kill()
            proc.wait(60)
            proc.stdout.close()


@pytest.fixture(params=["sqlite", "postgres"])
def servers(request, tmp_path):
    made = Servers(tmp_path, "host.db" if request.param == "sqlite" else request.getfixturevalue("postgres"))
    yield made
    made.close()


def call(port, method, path, body=None):
    return request(port, method, path, TOKEN, body)


def in_background(fn, *args) -> tuple[threading.Thread, list]:
    out = []
    thread = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    thread.start()
    return thread, out


def resume_when_free(port, sid):
    """Resume the session as soon as the dead server's lease has run out."""
    deadline = time.monotonic() + 60
    while True:
        status, _, got = call(port, "POST", f"/sessions/{sid}/resume", {})
        if status != 409 or time.monotonic() > deadline:
            return status, got
        time.sleep(0.5)  # each try takes a run from alice's budget (20 at once), kept in the database


def notebook(port, sid) -> Context:
    return check(from_json(json.dumps(call(port, "GET", f"/sessions/{sid}")[2]["notebook"])))


def test_sigkill_mid_run_then_restart_keeps_every_streamed_step_and_pays_the_refund_once(servers):
    proc, port = servers.start(lease=2)
    sid = call(port, "POST", "/sessions")[2]["id"]
    # 1. killed while check_policy runs: look_up_order was streamed, so it must be in the notebook
    servers.gate("block-before-check_policy")
    thread, out = in_background(call, port, "POST", f"/sessions/{sid}/messages", QUESTION)
    servers.wait_for("entered-check_policy")
    proc.send_signal(signal.SIGKILL)
    thread.join(60)
    streamed = out[0][2]
    assert [e for e, _ in streamed] == ["result"] and streamed[0][1]["tool"] == "look_up_order"
    servers.gate("block-before-check_policy", on=False)
    proc, port = servers.start(lease=2)
    ctx = notebook(port, sid)
    for _, data in streamed:
        assert ctx[data["at"]].content == data["content"]  # every step that was streamed was committed
    status, stream = resume_when_free(port, sid)  # the dead server's lease runs out, and the session goes on
    assert status == 200 and [e for e, _ in stream] == ["result", "approval_required"]
    token = stream[-1][1]["approval_token"]
    # 2. killed after the approved refund was paid but before its result was committed
    servers.gate("block-after-issue_refund")
    thread, out = in_background(call, port, "POST", f"/sessions/{sid}/approvals",
                                {"approval_token": token, "approve": True})
    servers.wait_for("done-issue_refund")
    proc.send_signal(signal.SIGKILL)
    thread.join(60)
    assert servers.refunds() == [(f"{sid}/5", "A1234", 79)]
    servers.gate("block-after-issue_refund", on=False)
    proc, port = servers.start(lease=2)
    ctx = notebook(port, sid)
    assert ctx.last().kind == "verdict" and ctx.last().name == "alice"  # committed before the tool ran
    status, stream = resume_when_free(port, sid)
    # resume carried out the verdict: the refund ran again (at least once), and handed back the first receipt
    assert [e for e, _ in stream] == ["result", "result", "done"]
    assert stream[0][1]["content"] == "$79 refunded to the original card (receipt R1)"
    assert servers.refunds() == [(f"{sid}/5", "A1234", 79)]
    assert sum(m.name == "issue_refund" and m.kind == "result" for m in notebook(port, sid)) == 1


def test_a_client_that_reconnects_to_a_second_process_while_the_first_is_killed_misses_nothing(servers):
    (a_proc, a), (_, b) = servers.start(lease=2), servers.start(lease=2)
    sid = call(a, "POST", "/sessions")[2]["id"]
    first = Listener(a, "POST", f"/sessions/{sid}/messages", TOKEN, QUESTION).rest()
    token = first[-1][2]["approval_token"]  # alice approves her own here (--approve-own)
    # the approved run goes on without its client: the refund is paid and committed, then the
    # process is killed in the final answer
    servers.gate("block-before-final_answer")
    verdict = Listener(a, "POST", f"/sessions/{sid}/approvals", TOKEN,
                       {"approval_token": token, "approve": True, "on_disconnect": "continue"})
    servers.wait_for("entered-final_answer")
    verdict.leave()  # before it read a single event
    a_proc.send_signal(signal.SIGKILL)
    a_proc.wait(60)
    # to the other process, from the last event the client saw: what it missed, read from the store;
    # then the run, until the dead process's lease runs out, which the last event says in words
    back = Listener(b, "GET", f"/sessions/{sid}/events", TOKEN, headers={"Last-Event-ID": first[-1][0]}).rest()
    assert [(i, n) for i, n, _ in back] == [(7, "result"), (None, "error")]
    assert back[0][2]["content"] == "$79 refunded to the original card (receipt R1)"
    assert back[-1][2]["error"].startswith("the host that ran this session stopped in the middle of the run")
    servers.gate("block-before-final_answer", on=False)
    rest = Listener(b, "POST", f"/sessions/{sid}/resume", TOKEN, {}).rest()
    seen = [e for e in first + back + rest if e[0] is not None]
    assert [(i, n) for i, n, _ in seen] == [(2, "result"), (4, "result"), (6, "approval_required"),
                                          (7, "result"), (9, "result"), (10, "done")]  # each once
    ctx = notebook(b, sid)
    for i, name, data in seen:
        assert name != "result" or ctx[i].content == data["content"]
    assert servers.refunds() == [(f"{sid}/5", "A1234", 79)]


def test_the_asker_cancels_from_one_process_a_run_that_goes_on_in_another(servers):
    (_, a), (_, b) = servers.start(), servers.start()
    sid = call(a, "POST", "/sessions")[2]["id"]
    servers.gate("block-before-check_policy")
    client = Listener(a, "POST", f"/sessions/{sid}/messages", TOKEN, {**QUESTION, "on_disconnect": "continue"})
    servers.wait_for("entered-check_policy")
    client.leave()
    follower = Listener(b, "GET", f"/sessions/{sid}/events", TOKEN, headers={"Last-Event-ID": "2"})
    assert call(b, "POST", f"/sessions/{sid}/cancel", {})[:3:2] == (202, {"cancelling": sid})
    servers.gate("release")  # check_policy ends; its commit hears the cancel, and nothing new starts
    events = follower.rest()
    assert [(i, n) for i, n, _ in events] == [(4, "result"), (None, "cancelled")]
    assert [m.kind for m in notebook(b, sid)] == ["question", "decision", "result", "decision", "result"]


def test_two_server_processes_on_one_database_never_run_an_approval_twice(servers):
    (_, a), (_, b) = servers.start(), servers.start()
    for _ in range(3):
        sid = call(a, "POST", "/sessions")[2]["id"]
        token = call(a, "POST", f"/sessions/{sid}/messages", QUESTION)[2][-1][1]["approval_token"]
        body = {"approval_token": token, "approve": True}
        racers = [in_background(call, port, "POST", f"/sessions/{sid}/approvals", body) for port in (a, b, a, b)]
        for thread, _ in racers:
            thread.join(60)
        assert sorted(out[0][0] for _, out in racers) == [200, 409, 409, 409]
        assert sum(call_id.startswith(sid) for call_id, _, _ in servers.refunds()) == 1
        assert sum(m.name == "issue_refund" and m.kind == "result" for m in notebook(b, sid)) == 1


def test_two_server_processes_never_interleave_two_runs_on_one_session(servers):
    (_, a), (_, b) = servers.start(), servers.start()
    sid = call(a, "POST", "/sessions")[2]["id"]
    servers.gate("block-before-look_up_order")  # the winner's run holds the session for a while
    racers = [in_background(call, port, "POST", f"/sessions/{sid}/messages", QUESTION) for port in (a, b)]
    servers.wait_for("entered-look_up_order")
    deadline = time.monotonic() + 60
    while not any(out for _, out in racers) and time.monotonic() < deadline:  # the loser, while the winner runs
        time.sleep(0.02)
    [(status, _, refused)] = [out[0] for _, out in racers if out]
    assert status == 409 and refused["error"] in ("a run is streaming on this session: wait for it to end",
                                                  "another request changed this session first: load it again")
    servers.gate("release")
    for thread, _ in racers:
        thread.join(60)
    assert sorted(out[0][0] for _, out in racers) == [200, 409]
    assert [m.kind for m in notebook(a, sid)].count("question") == 1


def test_a_run_keeps_its_session_between_its_steps_so_a_message_in_its_second_tool_is_refused(servers):
    # each step's commit renews the lease: a run in its second tool holds the session as in its first
    _, port = servers.start()
    sid = call(port, "POST", "/sessions")[2]["id"]
    servers.gate("block-before-check_policy")  # look_up_order ran and was committed; check_policy waits
    thread, out = in_background(call, port, "POST", f"/sessions/{sid}/messages", QUESTION)
    servers.wait_for("entered-check_policy")
    status, _, refused = call(port, "POST", f"/sessions/{sid}/messages", {"text": "Hello? Anyone?"})
    assert (status, refused) == (409, {"error": "a run is streaming on this session: wait for it to end"})
    servers.gate("release")
    thread.join(60)
    status, _, stream = out[0]
    assert status == 200 and [e for e, _ in stream] == ["result", "result", "approval_required"]
    assert [m.content for m in notebook(port, sid) if m.kind == "question"] == [QUESTION["text"]]


@pytest.mark.parametrize("db, processes", [("sqlite", 1), ("postgres", 2)])
def test_the_load_benchmark_in_small_loses_nothing(tmp_path, request, db, processes):
    users = {f"user{i}": f"token-{i:04d}-of-the-test" for i in range(10)}
    url = "host.db" if db == "sqlite" else request.getfixturevalue("postgres")
    servers = [host_load.serve(str(tmp_path), users, url) for _ in range(processes)]
    try:  # with two processes, each request goes to the next: a session's three are served by both
        sids, times, seconds = host_load.load([port for _, port in servers], list(users.values()), sessions=2,
                                              deadline=240)
        assert len(sids) == 20 and len(times) == 60 and len({sid for _, sid in sids}) == 20
        for ctx in host_load.notebooks(servers[-1][1], sids):  # each checked by microagent.invariants on the way
            assert len(ctx) == 10 and ctx.last().content.startswith("Good news, A1234 qualifies")
    finally:
        for proc, _ in servers:
            proc.kill()
            proc.wait(60)
            proc.stdout.close()


def test_python_dash_m_microagent_host_and_the_example_client_run_a_whole_refund(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "MICROAGENT_HOST_SECRET"}
    proc = subprocess.Popen([sys.executable, "-m", "microagent.host", "--port", "0"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("serving on http://127.0.0.1:") and "microagent-users.json" in line
        url = line.split(" ")[2]
        users = tmp_path / "microagent-users.json"
        # made on first start, readable by their owner only: the users' tokens and the signing secret
        assert set(json.loads(users.read_text())) == {"alice", "bob"}
        assert oct(users.stat().st_mode & 0o777) == oct((tmp_path / "microagent-host.db.secret").stat().st_mode
                                                        & 0o777) == "0o600"
        client = [sys.executable, str(TESTS.parent / "examples" / "host_client.py"), "--url", url, "--users", str(users)]
        out = subprocess.run(client + ["--amount", "70"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.splitlines() == [
            "alice asks: Can I get a refund for order A1234? It arrived broken.",
            "  look_up_order -> A1234, Wireless Headphones, $79, delivered, reported defective",
            "  check_policy -> eligible, within the 30 day window and reported defective",
            '  waiting for an approver: issue_refund {"order_id": "A1234", "amount": 79}',
            'bob\'s queue: issue_refund {"order_id": "A1234", "amount": 79}, asked by alice',
            "bob approves:",
            "  issue_refund -> $70 refunded to the original card (receipt R1)",
            "  final_answer -> Good news, A1234 qualifies. I refunded $70 to your card, here in 3 to 5 days.",
            '  done: {"answer": "Good news, A1234 qualifies. I refunded $70 to your card, here in 3 to 5 days."}',
        ]
        out = subprocess.run(client + ["--deny", "send it back first"], capture_output=True, text=True, timeout=120)
        assert "  issue_refund -> denied by bob: send it back first" in out.stdout.splitlines()
        # alice may not approve her own refund: her queue is refused, and the client says so
        out = subprocess.run(client + ["--approver", "alice"], capture_output=True, text=True, timeout=120)
        assert out.returncode == 1 and 'alice has no queue: alice may not approve' in out.stderr
    finally:
        proc.kill()
        proc.wait(60)
        proc.stdout.close()
    trail = subprocess.run([sys.executable, "-m", "microagent.host", "--audit"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60).stdout.splitlines()
    assert [" | ".join(row.split(" | ")[1:2] + row.split(" | ")[3:]) for row in trail[3:6]] == [
        'alice | approval requested | issue_refund {"order_id": "A1234", "amount": 79}',
        'bob | approved | asked by alice: issue_refund {"order_id": "A1234", "amount": 70.0}',
        "bob | tool call | issue_refund (call 5)",
    ]
    assert trail[0].split(" | ")[1] == "alice" and "denied | asked by alice: issue_refund: send it back first" in \
        "\n".join(trail)


def test_with_model_the_hosted_office_thinks_with_an_llm_and_its_text_streams_as_thinking(tmp_path):
    model = serve([reply("Let me look.", calls=[("look_up_order", '{"order_id": "A1234"}')]),
                   reply(calls=[("issue_refund", '{"order_id": "A1234", "amount": 79}')]),
                   reply("Refunded $79 to your card.")])
    (tmp_path / "users.json").write_text('{"alice": "%s"}' % TOKEN)
    key = "sk-test-key-of-the-stand-in"
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "microagent.host", "--port", "0", "--users", "users.json",
                             "--model", "stand-in", "--base-url", model.url, "--api-key-env", "STAND_IN_KEY",
                             "--approve-own"],
                            cwd=tmp_path, env={**os.environ, "STAND_IN_KEY": key}, stdout=subprocess.PIPE,
                            stderr=log, text=True)
    log.close()
    try:
        port = int(proc.stdout.readline().split("127.0.0.1:")[1].split(" ")[0])
        sid = call(port, "POST", "/sessions")[2]["id"]
        status, _, stream = call(port, "POST", f"/sessions/{sid}/messages", QUESTION)
        thought = "".join(data["text"] for event, data in stream if event == "thinking")
        assert thought == "Let me look." and len([e for e, _ in stream if e == "thinking"]) > 1  # in pieces
        assert [e for e, _ in stream if e != "thinking"] == ["result", "approval_required"]
        token = stream[-1][1]["approval_token"]
        status, _, stream = call(port, "POST", f"/sessions/{sid}/approvals", {"approval_token": token, "approve": True})
        assert [e for e, _ in stream if e != "thinking"] == ["result", "result", "done"]
        assert stream[-1][1] == {"answer": "Refunded $79 to your card."}
        assert stream[0][1]["content"] == "$79 refunded to the original card (receipt R1)"
        assert {h["Authorization"] for h in model.headers} == {f"Bearer {key}"}  # the key reached the model
    finally:
        proc.kill()
        proc.wait(60)
        proc.stdout.close()
        model.close()
    assert key not in (tmp_path / "server.log").read_text()  # and was never printed


# ----------------------------------------------------------------------------
# several processes on one database, as behind a proxy: what one does, the others see

@pytest.fixture
def on_postgres(tmp_path, postgres):
    made = Servers(tmp_path, postgres)
    yield made
    made.close()


def test_a_process_killed_mid_run_leaves_the_other_serving_and_the_session_goes_on_there(servers):
    (killed, a), (_, b) = servers.start(lease=2), servers.start(lease=2)
    sid = call(a, "POST", "/sessions")[2]["id"]
    servers.gate("block-before-check_policy")
    thread, out = in_background(call, a, "POST", f"/sessions/{sid}/messages", QUESTION)
    servers.wait_for("entered-check_policy")
    killed.send_signal(signal.SIGKILL)  # mid-run, holding the session's lease
    thread.join(60)
    servers.gate("block-before-check_policy", on=False)
    # the other process serves on, a whole refund of another session
    other = call(b, "POST", "/sessions")[2]["id"]
    token = call(b, "POST", f"/sessions/{other}/messages", QUESTION)[2][-1][1]["approval_token"]
    stream = call(b, "POST", f"/sessions/{other}/approvals", {"approval_token": token, "approve": True})[2]
    assert stream[-1][0] == "done"
    # and once the dead process's lease has run out, the session it was running goes on there
    status, stream = resume_when_free(b, sid)
    assert status == 200 and [e for e, _ in stream] == ["result", "approval_required"]
    stream = call(b, "POST", f"/sessions/{sid}/approvals",
                  {"approval_token": stream[-1][1]["approval_token"], "approve": True})[2]
    assert [e for e, _ in stream] == ["result", "result", "done"]
    assert servers.refunds() == [(f"{other}/5", "A1234", 79), (f"{sid}/5", "A1234", 79)]
    ctx = notebook(b, sid)
    assert [m.name for m in ctx if m.kind == "result"].count("look_up_order") == 1  # streamed, so kept once


def test_the_rate_limit_holds_across_processes(servers):
    (_, a), (_, b) = servers.start(30.0, "--rate", "0.01", "4"), servers.start(30.0, "--rate", "0.01", "4")
    first = call(a, "POST", "/sessions")[2]["id"]  # alice's budget of four: a session on each
    second = call(b, "POST", "/sessions")[2]["id"]  # process, then a run on each
    assert call(a, "POST", f"/sessions/{first}/messages", QUESTION)[0] == 200
    assert call(b, "POST", f"/sessions/{second}/messages", QUESTION)[0] == 200
    for port, sid in [(a, first), (b, second), (b, first)]:  # then each process says wait
        status, response, answer = call(port, "POST", f"/sessions/{sid}/resume", {})
        assert status == 429 and answer["error"] == "too many runs: wait and try again"
        assert 90 <= int(response.getheader("Retry-After")) <= 100


def test_on_postgresql_the_audit_trail_is_append_only_and_the_password_is_never_shown(on_postgres, postgres):
    import psycopg

    proc, port = on_postgres.start()
    sid = call(port, "POST", "/sessions")[2]["id"]
    call(port, "POST", f"/sessions/{sid}/messages", QUESTION)
    with psycopg.connect(postgres, autocommit=True) as db:  # as anyone with the database's password
        for change in ["UPDATE audit SET who = 'mallory'", "DELETE FROM audit", "TRUNCATE audit",
                       "INSERT INTO audit (n, at, what, detail) VALUES (1, '', '', '') "
                       "ON CONFLICT (n) DO UPDATE SET who = 'mallory'",
                       "UPDATE notes SET note = ''", "TRUNCATE notes"]:
            with pytest.raises(psycopg.Error, match="append-only|written in pen"):
                db.execute(change)
    trail = subprocess.run([sys.executable, "-m", "microagent.host", "--audit", "--db", postgres],
                           capture_output=True, text=True, timeout=60)
    assert [row.split(" | ")[1:4] for row in trail.stdout.splitlines()][:2] == [
        ["alice", sid, "created"], ["alice", sid, "tool call"]]
    proc.kill()
    proc.wait(60)
    password = postgres.split(":")[2].split("@")[0]
    said = [(on_postgres.dir / "server0.log").read_text(), trail.stdout, trail.stderr, proc.stdout.read()]
    assert TOKEN not in "".join(said) and password not in "".join(said)



def test_a_role_that_may_only_use_the_tables_their_owner_made_serves_and_one_that_finds_none_says_what_to_do(
        on_postgres, postgres, postgres_cluster):
    # the defect: CREATE TABLE IF NOT EXISTS and CREATE OR REPLACE need rights a role that only uses the tables
    # lacks, and the host stopped with a traceback ("must be owner of function written_in_pen")
    import psycopg

    name = postgres.rsplit("/", 1)[1]
    role, password = f"clerk_{name}", "clerk-pass-3141592653"
    clerk = postgres.replace(postgres.split("//")[1].split("@")[0], f"{role}:{password}")
    proc, _ = on_postgres.start()  # the owner starts a host once: it makes the tables
    proc.kill()
    proc.wait(60)
    with psycopg.connect(postgres, autocommit=True) as db:
        db.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        db.execute(f"GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {role}")
        db.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}")
    on_postgres.db = clerk
    _, port = on_postgres.start()
    sid = call(port, "POST", "/sessions")[2]["id"]
    token = call(port, "POST", f"/sessions/{sid}/messages", QUESTION)[2][-1][1]["approval_token"]
    stream = call(port, "POST", f"/sessions/{sid}/approvals", {"approval_token": token, "approve": True})[2]
    assert [e for e, _ in stream] == ["result", "result", "done"]
    assert on_postgres.refunds() == [(f"{sid}/5", "A1234", 79)]
    with psycopg.connect(clerk, autocommit=True) as db:  # and the host's own role can't undo the pen
        with pytest.raises(psycopg.Error, match="must be owner of table audit"):
            db.execute("ALTER TABLE audit DISABLE TRIGGER audit_in_pen")
    # on a database where nobody made the tables, the role may not make them: one line says what to do
    empty = postgres_cluster.database(f"{name}_empty").replace(postgres.split("//")[1].split("@")[0],
                                                                 f"{role}:{password}")
    done = subprocess.run([sys.executable, "-m", "microagent.host", "--db", empty, "--port", "0"],
                          cwd=on_postgres.dir, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"python -m microagent.host: the role {role} may not make sessions, notes, audit, rates, written_in_pen, "
        f"notes_in_pen, notes_no_truncate, audit_in_pen, audit_no_truncate in {shown(empty)} (permission denied for "
        "schema public): start the host once as the database's owner, which makes them, then GRANT SELECT, "
        f"INSERT, UPDATE ON ALL TABLES IN SCHEMA public TO {role}; GRANT USAGE ON ALL SEQUENCES IN SCHEMA "
        f"public TO {role}\n")
    logs = "".join(log.read_text() for log in on_postgres.dir.glob("server*.log"))
    assert "Traceback" not in logs and password not in logs + done.stderr

# the ledger's connection dies the first time a receipt is read: a real backend of the real server,
# terminated by itself (the sequence is not transactional, so it happens once, whatever rolls back)
DROP_ONCE = """
CREATE TABLE refunds (n BIGSERIAL PRIMARY KEY, call TEXT NOT NULL UNIQUE, order_id TEXT,
                      amount DOUBLE PRECISION);
CREATE SEQUENCE drops;
CREATE FUNCTION drop_once() RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF nextval('drops') = 1 THEN PERFORM pg_terminate_backend(pg_backend_pid()); END IF;
  RETURN true;
END $$;
ALTER TABLE refunds ENABLE ROW LEVEL SECURITY;
ALTER TABLE refunds FORCE ROW LEVEL SECURITY;
CREATE POLICY booking ON refunds FOR INSERT WITH CHECK (true);
CREATE POLICY reading ON refunds FOR SELECT USING (drop_once());
"""


def test_a_refund_booked_as_the_database_connection_drops_is_never_told_failed_and_is_paid_once(on_postgres,
                                                                                               postgres):
    # the defect: the booking and its receipt ran on two connections; the booking was written, the
    # receipt's read died with the connection, the customer was told "Sorry", asked again, and the
    # second approval paid $79 again
    import psycopg

    name = postgres.rsplit("/", 1)[1]
    clerk = postgres.replace(postgres.split("//")[1].split("@")[0], f"clerk_{name}:clerk-pass")
    with psycopg.connect(postgres, autocommit=True) as db:  # a superuser passes row security by; a clerk can't
        db.execute(f"CREATE ROLE clerk_{name} LOGIN PASSWORD 'clerk-pass'")
        db.execute(f"ALTER DATABASE {name} OWNER TO clerk_{name}")
    with psycopg.connect(clerk, autocommit=True) as db:
        db.execute(DROP_ONCE)
    on_postgres.db = clerk
    proc, port = on_postgres.start(lease=1)
    sid = call(port, "POST", "/sessions")[2]["id"]
    token = call(port, "POST", f"/sessions/{sid}/messages", QUESTION)[2][-1][1]["approval_token"]
    status, _, stream = call(port, "POST", f"/sessions/{sid}/approvals", {"approval_token": token, "approve": True})
    assert status == 200 and [e for e, _ in stream] == ["error"]
    assert "whether it was booked is not known yet" in stream[0][1]["error"]
    assert "resume this session" in stream[0][1]["error"]
    assert on_postgres.refunds() == []  # the booking and its receipt were one transaction: neither stands
    assert notebook(port, sid).last().kind == "verdict"  # nothing was written as a failure
    status, stream = resume_when_free(port, sid)
    assert status == 200 and [e for e, _ in stream] == ["result", "result", "done"]
    assert stream[0][1]["content"] == "$79 refunded to the original card (receipt R2)"  # R1 was rolled back
    assert [r[1:] for r in on_postgres.refunds()] == [("A1234", 79)]


@pytest.fixture
def own_cluster():
    """A PostgreSQL server of this test's own, which it may halt and start again."""
    cluster = new_cluster()
    yield cluster
    cluster.stop()


def test_a_run_cut_by_a_database_outage_ends_with_an_event_that_says_so_and_goes_on_after_it(tmp_path,
                                                                                             own_cluster):
    # the defect (19): the stream just ended, with no last event; and (18) a request in the outage waited
    # for the pool, and after the server came back each new request waited out its reconnect back-off
    servers = Servers(tmp_path, own_cluster.database("office"))
    try:
        proc, port = servers.start(lease=1)
        sid = call(port, "POST", "/sessions")[2]["id"]
        servers.gate("block-before-check_policy")
        thread, out = in_background(call, port, "POST", f"/sessions/{sid}/messages", QUESTION)
        servers.wait_for("entered-check_policy")
        own_cluster.halt()  # the database goes down while a tool runs
        servers.gate("release")
        thread.join(60)
        status, _, stream = out[0]
        assert status == 200 and [e for e, _ in stream] == ["result", "error"]
        assert stream[-1][1]["error"].startswith("the run stopped: the server failed (")
        assert "resume the session later" in stream[-1][1]["error"]
        servers.gate("release", on=False)
        servers.gate("block-before-check_policy", on=False)
        for _ in range(5):  # an outage of about 10 s; a request in it is answered at once, and says so
            status, _, answer = request(port, "GET", f"/sessions/{sid}", TOKEN, timeout=5)
            assert status == 500 and answer == {"error": "the server failed; the details went to its log"}
            time.sleep(2)
        own_cluster.start()
        # the first request after the database is back is served at once: no dead connection lent, no
        # back-off waited out (5 s is dozens of times what it takes on a busy machine)
        status, _, answer = request(port, "GET", f"/sessions/{sid}", TOKEN, timeout=5)
        assert status == 200 and answer["notebook"]["messages"][-1].get("name") == "look_up_order"
        status, stream = resume_when_free(port, sid)  # the step that met the outage runs again
        assert status == 200 and [e for e, _ in stream] == ["result", "approval_required"]
    finally:
        servers.close()


def test_the_password_may_come_from_pgpassword_and_a_wrong_one_stops_the_host_at_start(tmp_path, postgres):
    password = postgres.split(":")[2].split("@")[0]
    bare = postgres.replace(f":{password}@", "@")  # postgresql://postgres@127.0.0.1:PORT/test_N
    proc = subprocess.Popen([sys.executable, "-m", "microagent.host", "--db", bare, "--port", "0"], cwd=tmp_path,
                            env={**os.environ, "PGPASSWORD": password}, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:  # libpq reads $PGPASSWORD: the password stays off the command line
        line = proc.stdout.readline()
        assert line.startswith("serving on http://127.0.0.1:") and f"(database {bare})" in line
    finally:
        proc.kill()
        proc.wait(60)
        proc.stdout.close()
    wrong = postgres.replace(password, "not-the-password-123")
    done = subprocess.run([sys.executable, "-m", "microagent.host", "--db", wrong, "--port", "0"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode != 0 and "password authentication failed" in done.stderr
    assert "not-the-password-123" not in done.stdout + done.stderr
