"""How much does the loop cost? Time it against a bare Python loop making the same calls.

    python benchmarks/loop_speed.py

Both loops ask a brain for an action and call an instant tool, N times. The bare
loop only appends the results to a list; the Agent also checks the arguments,
writes two frozen notes per turn into a new notebook, and yields a Step. The
ratio is measured in one run on one machine, so it compares like with like even
on a busy machine; the absolute times are only a guide.

Also: the import time of microagent, against a bare interpreter.
"""

import json
import subprocess
import sys
import time

from microagent import Action, Agent, as_tool

NOOP = Action("noop", {}, "again")


def brain(ctx, tools) -> Action:
    return NOOP


@as_tool
def noop() -> str:
    """Do nothing, instantly."""
    return "ok"


def bare_loop(n: int) -> list:
    """The same calls with no notebook: decide, parse the arguments, act, keep the result."""
    results = []
    for _ in range(n):
        action = brain(results, None)
        results.append(noop.fn(**json.loads(action.args)))
    return results


def agent_loop(n: int):
    return Agent(brain, [noop], max_steps=n).run("go")


def best_of(fn, n: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(n)
        times.append(time.perf_counter() - start)
    return min(times)


def import_time(module: str | None) -> float:
    code = f"import {module}" if module else "pass"
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        runs.append(time.perf_counter() - start)
    return min(runs)


if __name__ == "__main__":
    print(f"{'steps':>6} {'bare loop':>12} {'agent loop':>12} {'per step':>10} {'ratio':>7}")
    for n in (10, 100, 1_000, 10_000):
        repeats = 3 if n == 10_000 else 20
        bare, agent = best_of(bare_loop, n, repeats), best_of(agent_loop, n, repeats)
        print(f"{n:>6} {bare * 1e3:>10.2f}ms {agent * 1e3:>10.2f}ms {agent / n * 1e6:>8.1f}us {agent / bare:>6.1f}x")
    bare, with_lib = import_time(None), import_time("microagent")
    print(f"import microagent: {(with_lib - bare) * 1e3:.1f}ms on top of a bare interpreter "
          f"({with_lib * 1e3:.1f}ms against {bare * 1e3:.1f}ms, {with_lib / bare:.2f}x)")
