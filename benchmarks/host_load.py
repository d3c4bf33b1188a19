"""How much does hosting cost? Many clients at once, each running whole refund sessions over HTTP.

    python benchmarks/host_load.py                          # 50 clients, 4 sessions each
    python benchmarks/host_load.py --clients 10 --sessions 2

The server is `python -m microagent.host --approve-own` in its own process, on a
fresh database; each client is a thread here with a user of its own (who asks
and approves their own refunds, so one request carries each step), and runs the
refund office end to end: create a session, ask (the stream ends waiting for
approval), approve (the stream ends with the answer). Every request is timed.
Then every session's notebook is fetched and checked: complete, and sound by
microagent.invariants. Bounded: clients x sessions sessions, and a deadline.

For scale, the same refund run is timed in this process, with no HTTP and no
database (its refund ledger in memory), and the server's time per step, one
client alone, is put beside it: both measured in this one run, on this machine.
"""

import argparse
import http.client
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


def one_session(port: int, token: str, times: list) -> str:
    """Create, ask, approve; each request timed into `times`. The session's id."""
    started = time.perf_counter()
    status, text = post(port, token, "/sessions", {})
    sid = json.loads(text)["id"]
    times.append(time.perf_counter() - started)
    started = time.perf_counter()
    status, text = post(port, token, f"/sessions/{sid}/messages", {"text": QUESTION})
    times.append(time.perf_counter() - started)
    last = json.loads(text.strip().split("\n\n")[-1].split("data: ", 1)[1])
    started = time.perf_counter()
    status, text = post(port, token, f"/sessions/{sid}/approvals", {"approval_token": last["approval_token"],
                                                                    "approve": True})
    times.append(time.perf_counter() - started)
    assert status == 200 and "event: done" in text, text[-300:]
    return sid


def load(port: int, tokens: list[str], sessions: int, deadline: float = 600) -> tuple[list, list[float], float]:
    """Every client (one token each) runs `sessions` sessions at once: ([(token, id)], request times, seconds)."""
    sids, times, failures = [], [], []

    def client(token):
        try:
            for _ in range(sessions):
                sids.append((token, one_session(port, token, times)))
        except Exception as e:  # counted, and the run goes on: a benchmark reports, it does not stop
            failures.append(e)
    threads = [threading.Thread(target=client, args=(t,), daemon=True) for t in tokens]
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


def serve(folder: str, users: dict) -> tuple[subprocess.Popen, int]:
    pathlib.Path(folder, "users.json").write_text(json.dumps(users))
    proc = subprocess.Popen([sys.executable, "-m", "microagent.host", "--port", "0", "--db", "host.db",
                             "--users", "users.json", "--rate", "100", "100", "--approve-own"], cwd=folder,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            env={**os.environ, "MICROAGENT_HOST_SECRET": "benchmark secret, 32 bytes or more"})
    return proc, int(proc.stdout.readline().split("127.0.0.1:")[1].split(" ")[0])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--sessions", type=int, default=4, help="per client, one after another (10 at most)")
    o = p.parse_args(argv)
    users = {f"user{i}": f"token-{i:04d}-of-the-benchmark" for i in range(o.clients)}
    with tempfile.TemporaryDirectory() as folder:
        proc, port = serve(folder, users)
        try:
            sids, times, seconds = load(port, list(users.values()), min(o.sessions, 10))
            lone = []  # one client alone: the server's time per step without waiting in line
            for _ in range(10):
                one_session(port, users["user0"], lone)
            complete = sum(nb.last().content.startswith("Good news") and len(nb) == 10
                           for nb in notebooks(port, sids))
        finally:
            proc.kill()
            proc.wait()
    per_step = in_process(200)
    times.sort()
    print(f"{len(sids)} sessions by {o.clients} clients at once in {seconds:.2f} s: "
          f"{len(sids) / seconds:.1f} sessions/s; {complete} of {len(sids)} notebooks complete and sound")
    print(f"per request ({len(times)}): p50 {1000 * times[len(times) // 2]:.1f} ms, "
          f"p99 {1000 * times[int(len(times) * 0.99)]:.1f} ms")
    served = (sum(lone[1::3]) + sum(lone[2::3])) / (10 * STEPS)  # ask and approve, one client alone
    print(f"per step: in process {1e6 * per_step:.0f} µs, over HTTP with sqlite {1e3 * served:.2f} ms "
          f"({served / per_step:.1f}x)")


if __name__ == "__main__":
    main()
