"""How much does hosting cost? Many clients at once, each running whole refund sessions over HTTP.

    python benchmarks/host_load.py                          # 50 clients, 4 sessions each
    python benchmarks/host_load.py --processes 2 --clients 10 --sessions 2

Each server is `python -m microagent.host --approve-own` in its own process, on a
fresh database; each client is a thread here with a user of its own (who asks
and approves their own refunds, so one request carries each step), and runs the
refund office end to end: create a session, ask (the stream ends waiting for
approval), approve (the stream ends with the answer). Every request is timed.
Then every session's notebook is fetched and checked: complete, and sound by
microagent.invariants. Bounded: clients x sessions sessions, and a deadline.

It runs three times, in one run: one process on sqlite, one on PostgreSQL, and
--processes of them on one PostgreSQL database, each request sent to the next
process in turn (as a proxy in front of them would), so a session's three
requests are served by different processes. PostgreSQL is a throwaway cluster
(tests/postgres_cluster.py); without its binaries or psycopg, sqlite alone.

For scale, the same refund run is timed in this process, with no HTTP and no
database (its refund ledger in memory), and the sqlite server's time per step,
one client alone, is put beside it: both measured in this one run, on this machine.
"""

import argparse
import http.client
import itertools
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import threading
import time

from microagent import Context, from_json
from microagent.approval import approve
from microagent.host import CALL, refund_office
from microagent.invariants import check

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "tests"))
import postgres_cluster  # noqa: E402  (tests/postgres_cluster.py: a throwaway PostgreSQL)

QUESTION = "Can I get a refund for order A1234? It arrived broken."
STEPS = 6  # events in one refund session: 2 results and the pause; then 2 results and done


def post(port: int, token: str, path: str, body: dict) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", path, json.dumps(body), {"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        return response.status, response.read().decode()
    finally:
        conn.close()


def one_session(ports, token: str, times: list) -> str:
    """Create, ask, approve, each sent to the next port in turn (an iterator of ports), and
    timed into `times`. The session's id."""
    started = time.perf_counter()
    status, text = post(next(ports), token, "/sessions", {})
    sid = json.loads(text)["id"]
    times.append(time.perf_counter() - started)
    started = time.perf_counter()
    status, text = post(next(ports), token, f"/sessions/{sid}/messages", {"text": QUESTION})
    times.append(time.perf_counter() - started)
    last = json.loads(text.strip().split("\n\n")[-1].split("data: ", 1)[1])
    started = time.perf_counter()
    status, text = post(next(ports), token, f"/sessions/{sid}/approvals",
                        {"approval_token": last["approval_token"], "approve": True})
    times.append(time.perf_counter() - started)
    assert status == 200 and "event: done" in text, text[-300:]
    return sid


def load(ports: list[int], tokens: list[str], sessions: int, deadline: float = 600) -> tuple[list, list[float], float]:
    """Every client (one token each) runs `sessions` sessions at once, each request to the
    next of the servers' ports: ([(token, id)], request times, seconds)."""
    sids, times, failures = [], [], []

    def client(i, token):
        turn = itertools.islice(itertools.cycle(ports), i, None)  # the clients start on different servers
        try:
            for _ in range(sessions):
                sids.append((token, one_session(turn, token, times)))
        except Exception as e:  # counted, and the run goes on: a benchmark reports, it does not stop
            failures.append(e)
    threads = [threading.Thread(target=client, args=(i, t), daemon=True) for i, t in enumerate(tokens)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, deadline - (time.perf_counter() - started)))
    if failures or any(t.is_alive() for t in threads):
        raise RuntimeError(f"{len(failures)} clients failed (the first: {failures[:1]}), or the deadline passed")
    return sids, times, time.perf_counter() - started


def notebooks(port: int, sids: list[tuple[str, str]]) -> list[Context]:
    """Each session's notebook, fetched by its owner and checked by microagent.invariants."""
    found = []
    for token, sid in sids:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("GET", f"/sessions/{sid}", headers={"Authorization": f"Bearer {token}"})
        found.append(check(from_json(json.dumps(json.loads(conn.getresponse().read())["notebook"]))))
        conn.close()
    return found


def in_process(runs: int) -> float:
    """Seconds per event of the same refund run, driven in this process (its refund ledger in memory)."""
    agent = refund_office(":memory:")
    started = time.perf_counter()
    for i in range(runs):
        paused = agent.run(QUESTION)
        here = CALL.set(f"in-process-{i}/5")  # the tool call's identity, as the host sets it
        agent.run(approve(paused, agent.tools["issue_refund"], by="alice"))
        CALL.reset(here)
    return (time.perf_counter() - started) / (runs * STEPS)


def serve(folder: str, users: dict, db: str = "host.db") -> tuple[subprocess.Popen, int]:
    """A server process on `db` (a sqlite file in `folder`, or a postgresql:// URL): it, and its port."""
    pathlib.Path(folder, "users.json").write_text(json.dumps(users))
    proc = subprocess.Popen([sys.executable, "-m", "microagent.host", "--port", "0", "--db", db,
                             "--users", "users.json", "--rate", "100", "100", "--approve-own"], cwd=folder,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "MICROAGENT_HOST_SECRET": "benchmark secret, 32 bytes or more"})
    return proc, int(proc.stdout.readline().split("127.0.0.1:")[1].split(" ")[0])


def measure(folder: str, db: str, processes: int, users: dict, sessions: int) -> dict:
    """`processes` servers on one database under the load: its figures, and the lone client's times."""
    os.makedirs(folder)
    servers = [serve(folder, users, db) for _ in range(processes)]
    ports = [port for _, port in servers]
    try:
        sids, times, seconds = load(ports, list(users.values()), sessions)
        lone = []  # one client alone: the server's time per step without waiting in line
        for _ in range(10):
            one_session(itertools.cycle(ports), users["user0"], lone)
        complete = sum(nb.last().content.startswith("Good news") and len(nb) == 10
                       for nb in notebooks(ports[0], sids))
    finally:
        for proc, _ in servers:
            proc.kill()
            proc.wait()
            proc.stdout.close()
    times.sort()
    return {"sessions": len(sids), "per second": len(sids) / seconds, "complete": complete,
            "p50": times[len(times) // 2], "p99": times[int(len(times) * 0.99)], "lone": lone}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--sessions", type=int, default=4, help="per client, one after another (10 at most)")
    p.add_argument("--processes", type=int, default=2, help="server processes on one PostgreSQL database")
    o = p.parse_args(argv)
    users = {f"user{i}": f"token-{i:04d}-of-the-benchmark" for i in range(o.clients)}
    sessions, runs = min(o.sessions, 10), []
    with tempfile.TemporaryDirectory() as folder:
        runs.append(("sqlite", 1, measure(f"{folder}/sqlite", "host.db", 1, users, sessions)))
        reason = postgres_cluster.why_not()
        if reason is None:
            cluster = postgres_cluster.Cluster()
            try:
                for n in (1, o.processes):
                    url = cluster.database(f"load_{n}")
                    runs.append(("postgresql", n, measure(f"{folder}/pg{n}", url, n, users, sessions)))
            finally:
                cluster.stop()
    per_step = in_process(200)
    print(f"{o.clients} clients at once, {sessions} refund sessions each (create, ask, approve: "
          f"3 requests a session):")
    print("  database     processes  sessions/s   p50 ms   p99 ms   notebooks complete and sound")
    for db, n, m in runs:
        print(f"  {db:12} {n:9} {m['per second']:11.1f} {1e3 * m['p50']:8.1f} {1e3 * m['p99']:8.1f}"
              f"   {m['complete']} of {m['sessions']}")
    if reason is not None:
        print(f"  (no PostgreSQL: {reason})")
    lone = runs[0][2]["lone"]
    served = (sum(lone[1::3]) + sum(lone[2::3])) / (10 * STEPS)  # ask and approve, one client alone
    print(f"per step: in process {1e6 * per_step:.0f} µs, over HTTP with sqlite {1e3 * served:.2f} ms "
          f"({served / per_step:.1f}x)")


if __name__ == "__main__":
    main()
