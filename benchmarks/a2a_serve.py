"""What does a task cost when the host serves it over A2A, against the host's own routes?

    python benchmarks/a2a_serve.py            # 100 runs of each kind, the best of three rounds
    python benchmarks/a2a_serve.py --runs 500

One host (microagent.host, sqlite, in this process on 127.0.0.1) serves an office whose
scripted brain answers at once with final_answer. Each run is a new session asked one
question: over A2A, `microagent.a2a.coworker`'s call (a SendStreamingMessage: the task
made, its run committed step by step, told as server-sent events); over the host's own
routes, POST /sessions then POST /sessions/{id}/messages. The absolute times are only a
guide on a shared machine; the two are measured in one run, in turns.
"""

import argparse
import http.client
import json
import pathlib
import tempfile
import threading
import time

from microagent import Action, Agent, final_answer
from microagent.a2a import coworker
from microagent.a2a.server import ROUTES
from microagent.host import Server

TOKEN = "alice-token-0123456789"


def quick(db: str) -> Agent:
    """An office whose brain answers at once."""
    def brain(ctx, tools):
        return Action("final_answer", {"answer": f"done: {ctx[0].content}"}, "at once")
    return Agent(brain, [final_answer], name="quick")


def post(port: int, path: str, body: dict) -> str:
    """One POST to the host as alice: the answer's text."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("POST", path, json.dumps(body), {"Authorization": f"Bearer {TOKEN}"})
    text = conn.getresponse().read().decode()
    conn.close()
    return text


def own_routes(port: int) -> None:
    """One run through the host's own routes: a session, then its question."""
    sid = json.loads(post(port, "/sessions", {}))["id"]
    stream = post(port, f"/sessions/{sid}/messages", {"text": "refund A1234"})
    assert "event: done" in stream, stream


def per_run(run, runs: int) -> float:
    """Milliseconds per run, the best of three rounds."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(runs):
            run()
        best = min(best, (time.perf_counter() - started) / runs)
    return best * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    runs = parser.parse_args().runs
    db = str(pathlib.Path(tempfile.mkdtemp(prefix="a2a-serve-")) / "host.db")
    users = {"alice": {"token": TOKEN, "roles": ["asks"]}}
    server = Server(quick, db, users, b"s" * 32, quiet=True, rate=(1e6, 10**6), routes=ROUTES)
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    tool = coworker(f"http://127.0.0.1:{port}", token=TOKEN, timeout=30)

    def over_a2a():
        note = tool.run('{"request": "refund A1234"}')
        assert note.content == "done: refund A1234", note.content
    a2a, own = per_run(over_a2a, runs), per_run(lambda: own_routes(port), runs)
    print(f"over A2A (coworker, streamed): {a2a:.2f} ms a run")
    print(f"the host's own routes:         {own:.2f} ms a run ({a2a / own:.2f}x)")
    server.shutdown()


if __name__ == "__main__":
    main()
