"""Does a message cost more the longer the session? A thousand messages, one after another, in one.

    python benchmarks/long_session.py                    # sqlite, and PostgreSQL if it is installed
    python benchmarks/long_session.py --against 455f730  # ... and the host as it was at that commit

The server is `python -m microagent.host` in its own process, on a fresh
database, hosting a small office (`ping_office` below): each message is a run
of two turns, a ping and then the answer, so the notebook grows by five notes a
message (the question, two decisions, their results): 5,000 at the end of 1,000
messages. One client sends them one after another over HTTP and times each
request until its stream ends: the long session's first 950 messages, then its
last 50 in turns with the first 50 of a new session, so that the two meet the
same machine (a busy one shifts both). It prints the median of each and the one
over the other: a store that rewrote or reread the whole notebook each step
would show it growing with the session.

PostgreSQL runs as a throwaway cluster (tests/postgres_cluster.py), when its
binaries and psycopg are here. With --against, the same is timed with the host
of that commit (taken with `git archive`), on sqlite, in the same run.
"""

import argparse
import http.client
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

from microagent import Action, Agent, as_tool, final_answer

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import postgres_cluster  # noqa: E402  (tests/postgres_cluster.py: a throwaway PostgreSQL)

TOKEN = "the-benchmark-token-0123456789"
WINDOW = 50  # messages timed at each end


def ping_office(db: str) -> Agent:
    """Two turns a message: ping, then answer. The brain reads only the last note."""
    @as_tool
    def ping() -> str:
        """Ping."""
        return "pong"

    def brain(ctx, tools):
        if ctx.last().kind == "question":
            return Action("ping", {}, "ping first")
        return Action("final_answer", {"answer": "pong"}, "then answer")
    return Agent(brain, [ping, final_answer], max_steps=4, name="pinger")


def post(port: int, path: str, body: dict) -> tuple[float, str]:
    """One request on a connection of its own (the host has no keep-alive): seconds, and the answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    conn.request("POST", path, json.dumps(body), {"Authorization": f"Bearer {TOKEN}"})
    response = conn.getresponse()
    text = response.read().decode()
    seconds = time.perf_counter() - started
    conn.close()
    assert response.status in (200, 201), text[-300:]
    return seconds, text


def ping(port: int, sid: str, i: int) -> float:
    seconds, text = post(port, f"/sessions/{sid}/messages", {"text": f"ping {i}"})
    assert text.rstrip().endswith('data: {"answer": "pong"}'), text[-300:]
    return seconds


def sessions(db: str, folder: str, messages: int, source: str | None = None) -> tuple[list, list]:
    """Seconds per message of the first WINDOW messages of a session and of the last WINDOW of
    one of `messages` messages, sent in turns, one to each, so both meet the same machine."""
    pathlib.Path(folder, "users.json").write_text(json.dumps({"bench": TOKEN}))
    paths = [source, str(ROOT / "benchmarks")] if source else [str(ROOT / "benchmarks")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths),
           "MICROAGENT_HOST_SECRET": "benchmark secret, 32 bytes or more"}
    proc = subprocess.Popen([sys.executable, "-m", "microagent.host", "--port", "0", "--db", db,
                             "--users", "users.json", "--office", "long_session:ping_office",
                             "--rate", "10000", "10000"], cwd=folder, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        port = int(proc.stdout.readline().split("127.0.0.1:")[1].split(" ")[0])
        new, long = (json.loads(post(port, "/sessions", {})[1])["id"] for _ in range(2))
        for i in range(messages - WINDOW):  # the long session, up to its last WINDOW messages
            ping(port, long, i)
        first, last = [], []
        for i in range(WINDOW):  # then in turns: the new session's first, the long one's last
            first.append(ping(port, new, i))
            last.append(ping(port, long, messages - WINDOW + i))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        conn.request("GET", f"/sessions/{long}", headers={"Authorization": f"Bearer {TOKEN}"})
        notes = json.loads(conn.getresponse().read())["notebook"]["messages"]
        assert len(notes) == 5 * messages, len(notes)
        return first, last
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=1000)
    p.add_argument("--against", metavar="REV", help="also time the host as it was at this git commit")
    o = p.parse_args(argv)
    runs = []  # (what, (first, last))
    with tempfile.TemporaryDirectory() as folder:
        os.mkdir(f"{folder}/sqlite")
        runs.append(("sqlite", sessions("host.db", f"{folder}/sqlite", o.messages)))
        reason = postgres_cluster.why_not()
        if reason is None:
            cluster = postgres_cluster.Cluster()
            try:
                os.mkdir(f"{folder}/postgresql")
                runs.append(("postgresql", sessions(cluster.database("long_session"),
                                                    f"{folder}/postgresql", o.messages)))
            finally:
                cluster.stop()
        if o.against:
            os.mkdir(f"{folder}/old")
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", o.against, "microagent"],
                                     capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", f"{folder}/old"], input=archive, check=True)
            runs.append((f"sqlite, the host at {o.against}",
                         sessions("host.db", f"{folder}/old", o.messages, f"{folder}/old")))
    print(f"a message at the start of a session and at the end of one of {o.messages:,} "
          f"({5 * o.messages:,} notes), over HTTP; the median of {WINDOW} each:")
    for what, (first, last) in runs:
        first, last = statistics.median(first), statistics.median(last)
        print(f"  {what:30} start {1e3 * first:6.1f} ms   end {1e3 * last:6.1f} ms   "
              f"{last / first:5.2f}x")
    if reason is not None:
        print(f"  (no PostgreSQL: {reason})")


if __name__ == "__main__":
    main()
