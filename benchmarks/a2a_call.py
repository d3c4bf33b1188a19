"""What does one delegated call cost over A2A? An agent as a tool, in-process and over A2A.

    python benchmarks/a2a_call.py            # 100 calls of each kind
    python benchmarks/a2a_call.py --calls 500

The coworker is the same small agent both times: a microagent Agent whose scripted
brain answers at once with final_answer. In-process it is `microagent.team.agent_tool`
(the manager's tool runs the inner agent's loop in this thread). Over A2A it runs
behind the a2a-sdk server (on uvicorn, in another process: tests/a2a/client_peer.py,
whose "agent ..." requests run that agent), and the manager's tool is
`microagent.a2a.coworker`: a JSON-RPC SendMessage (or SendStreamingMessage, read as
server-sent events) over HTTP on 127.0.0.1, a task made, run, stored and sent back.
Needs the dev extra (a2a-sdk, uvicorn). The ratio is measured in one run on one
machine; the absolute times are only a guide.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from microagent import Action, Agent, agent_tool, final_answer, scripted
from microagent.a2a import A2AError, coworker

ROOT = Path(__file__).resolve().parents[1]
PEER = ROOT / "tests" / "a2a" / "client_peer.py"
ARGS = json.dumps({"request": "agent: refund A1234"})


def per_call(tool, calls: int) -> float:
    """Seconds per call, the best of three rounds."""
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(calls):
            note = tool.run(ARGS)
        best = min(best, (time.perf_counter() - started) / calls)
        assert not note.error and note.content.endswith("refund A1234"), note.content
    return best


def served(*flags):
    """The a2a-sdk agent in a subprocess: the process, and a coworker Tool for it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen([sys.executable, str(PEER), *flags], stdout=subprocess.PIPE,
                               env=env, text=True)
    url = f"http://127.0.0.1:{process.stdout.readline().strip()}"
    for _ in range(200):
        try:
            return process, coworker(url, timeout=30)
        except A2AError:  # up, but not answering yet
            time.sleep(0.05)
    process.kill()
    raise SystemExit("the a2a-sdk agent did not answer: is the dev extra installed?")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100)
    calls = parser.parse_args().calls
    brain = scripted(Action("final_answer", {"answer": "an agent says: agent: refund A1234"}))
    inner = Agent(brain, [final_answer], name="refunds")
    here = per_call(agent_tool(inner), calls)
    rows = [("agent_tool, in this process", here)]
    for label, flags in (("coworker over A2A, SendMessage", ["--no-streaming"]),
                         ("coworker over A2A, SendStreamingMessage", [])):
        process, tool = served(*flags)
        try:
            rows.append((label, per_call(tool, calls)))
        finally:
            process.kill()
            process.wait()
    print(f"one delegated call, best of 3 rounds of {calls}:")
    for label, seconds in rows:
        print(f"  {label:<42} {seconds * 1e3:8.3f} ms   {seconds / here:8.0f}x")


if __name__ == "__main__":
    main()
