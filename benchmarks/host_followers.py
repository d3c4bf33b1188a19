"""Do idle followers slow a run? One run of 50 quick steps, alone, and with 100 clients following it.

    python benchmarks/host_followers.py                    # 100 followers, 5 runs of each kind
    python benchmarks/host_followers.py --followers 20 --runs 3

A server process (`python -m microagent.host`, on sqlite, then on PostgreSQL if
its binaries are here) hosts an office whose first tool waits at a gate (a
file), then 50 quick turns, then the answer. A client asks; while the first
tool waits, the followers connect to `GET /sessions/{id}/events`; then the gate
opens, and the run is timed from then to its last event, as its own client
reads it. Each follower reads every event to the end, and every one must equal
the client's. Runs with and without followers take turns, so both meet the same
busy machine; the medians are printed side by side.
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from microagent import Action, Agent, as_tool, final_answer, scripted

TESTS = pathlib.Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))
import postgres_cluster  # noqa: E402  (tests/postgres_cluster.py: a throwaway PostgreSQL)
from host_offices import Listener  # noqa: E402  (reads a stream's events as they come)

TOKEN = "token-of-the-followers-benchmark"
TURNS = 50


def ticking_office(db: str) -> Agent:
    """The benchmark's office: a tool that waits at the gate, TURNS quick turns, the answer."""
    gate = pathlib.Path(os.environ["FOLLOWERS_GATE"])

    @as_tool
    def wait() -> str:
        """Wait for the gate to open."""
        (gate.parent / "entered").write_text("")
        deadline = time.monotonic() + 60
        while not gate.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        return "the gate opened"

    @as_tool
    def tick() -> str:
        """A quick turn."""
        return "tick"
    policy = scripted(Action("wait", {}), *[Action("tick", {})] * TURNS,
                      Action("final_answer", {"answer": "done"}))
    return Agent(policy, [wait, tick, final_answer], max_steps=TURNS + 5)


def serve(folder: pathlib.Path, db: str, followers: int) -> tuple[subprocess.Popen, int]:
    (folder / "users.json").write_text('{"alice": "%s"}' % TOKEN)
    env = {**os.environ, "FOLLOWERS_GATE": str(folder / "gate"),
           "PYTHONPATH": os.pathsep.join([str(pathlib.Path(__file__).parent), str(TESTS),
                                          os.environ.get("PYTHONPATH", "")]),
           "MICROAGENT_HOST_SECRET": "benchmark secret, 32 bytes or more"}
    proc = subprocess.Popen([sys.executable, "-m", "microagent.host", "--port", "0", "--db", db,
                             "--users", "users.json", "--rate", "100", "100",
                             "--follows", str(max(followers, 1)),  # one user's followers
                             "--office", "host_followers:ticking_office"], cwd=folder, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return proc, int(proc.stdout.readline().split("127.0.0.1:")[1].split(" ")[0])


def one_run(folder: pathlib.Path, port: int, followers: int) -> float:
    """Seconds from the gate's opening to the run's last event, with `followers` following it."""
    for name in ("gate", "entered"):
        (folder / name).unlink(missing_ok=True)
    sid = Listener(port, "POST", "/sessions", TOKEN, {}).answer()["id"]
    client = Listener(port, "POST", f"/sessions/{sid}/messages", TOKEN, {"text": "go"})
    while not (folder / "entered").exists():
        time.sleep(0.005)
    watching = [Listener(port, "GET", f"/sessions/{sid}/events", TOKEN) for _ in range(followers)]
    got = [[] for _ in watching]
    threads = [threading.Thread(target=lambda i=i: got[i].extend(watching[i].rest()))
               for i in range(followers)]
    for thread in threads:
        thread.start()
    started = time.perf_counter()
    (folder / "gate").write_text("")
    live = client.rest()
    seconds = time.perf_counter() - started
    for thread in threads:
        thread.join(120)
    assert live[-1][1] == "done" and len(live) == TURNS + 3, live[-3:]
    assert all(each == live for each in got), "a follower missed an event, or saw one twice"
    return seconds


def measure(folder: pathlib.Path, db: str, followers: int, runs: int) -> tuple[float, float]:
    folder.mkdir()
    proc, port = serve(folder, db, followers)
    try:
        alone, followed = [], []
        for _ in range(runs):
            alone.append(one_run(folder, port, 0))
            followed.append(one_run(folder, port, followers))
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    return statistics.median(alone), statistics.median(followed)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--followers", type=int, default=100)
    p.add_argument("--runs", type=int, default=5)
    o = p.parse_args(argv)
    figures = []
    with tempfile.TemporaryDirectory() as folder:
        figures.append(("sqlite", measure(pathlib.Path(folder, "sqlite"), "host.db", o.followers,
                                          o.runs)))
        reason = postgres_cluster.why_not()
        if reason is None:
            cluster = postgres_cluster.Cluster()
            try:
                figures.append(("postgresql", measure(pathlib.Path(folder, "pg"),
                                                      cluster.database("followers"), o.followers,
                                                      o.runs)))
            finally:
                cluster.stop()
    print(f"a run of {TURNS + 2} steps, timed from its first tool's end to its last event "
          f"(medians of {o.runs}); every follower got every event:")
    print(f"  database     alone ms   with {o.followers} followers ms   ratio")
    for db, (alone, followed) in figures:
        print(f"  {db:12} {1e3 * alone:8.1f}   {1e3 * followed:22.1f}   {followed / alone:5.2f}x")
    if reason is not None:
        print(f"  (no PostgreSQL: {reason})")


if __name__ == "__main__":
    main()
