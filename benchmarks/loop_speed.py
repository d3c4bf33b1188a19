"""How much does the loop cost? Time it against a bare Python loop making the same calls.

    python benchmarks/loop_speed.py                  # this tree against a bare loop
    python benchmarks/loop_speed.py --against HEAD~5 # ... and against an earlier commit

Both loops ask a brain for an action and call an instant tool, N times. The bare
loop only parses the arguments and keeps the results in a list; the Agent also
checks the arguments, writes two frozen notes per turn into a new notebook, and
yields a Step. Ratios are measured in one run on one machine, so they compare
like with like even on a busy machine; the absolute times are only a guide.

With --against, the same agent loop is timed on microagent as it was at that
commit (taken with `git archive` into a temporary folder), in the same run, the
rounds interleaved (now, then, now, then, ...) so a machine that gets busier half
way through slows both alike; each figure is the best of its rounds.

Also: the import time of microagent, against a bare interpreter.
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
SIZES = (10, 100, 1_000, 10_000)

# the timed code, run in a fresh interpreter for each version of microagent
TIMER = """
import json, sys, time
from microagent import Action, Agent, as_tool

NOOP = Action("noop", {}, "again")

def brain(ctx, tools):
    return NOOP

@as_tool
def noop() -> str:
    '''Do nothing, instantly.'''
    return "ok"

def bare_loop(n):
    results = []
    for i in range(n):
        action = brain(results, None)
        results.append(noop.fn(**json.loads(action.args)))
    return results

def agent_loop(n):
    return Agent(brain, [noop], max_steps=n).run("go")

def best_of(fn, n):
    times = []
    for i in range(1 if n >= 10_000 else 4):
        start = time.perf_counter()
        fn(n)
        times.append(time.perf_counter() - start)
    return min(times)

sizes = json.loads(sys.argv[1])
print(json.dumps({n: [best_of(bare_loop, n), best_of(agent_loop, n)] for n in sizes}))
"""


ROUNDS = 5  # each a fresh interpreter; with --against, now and then take turns


def timings(package_root: pathlib.Path) -> dict[int, list[float]]:
    """{steps: [bare seconds, agent seconds]}, one round, for the microagent under package_root."""
    out = subprocess.run([sys.executable, "-c", TIMER, json.dumps(SIZES)], capture_output=True, text=True,
                         check=True, cwd=package_root, env={"PYTHONPATH": str(package_root)})
    return {int(n): t for n, t in json.loads(out.stdout).items()}


def best(rounds: list[dict[int, list[float]]]) -> dict[int, list[float]]:
    """The quickest of several rounds, for each size and each loop."""
    return {n: [min(r[n][i] for r in rounds) for i in (0, 1)] for n in SIZES}


def import_time(code: str) -> float:
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)})
        runs.append(time.perf_counter() - start)
    return min(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", metavar="REV", help="also time microagent as it was at this git commit")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as old:
        if options.against:
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", options.against, "microagent"],
                                     capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
        now_rounds, then_rounds = [], []
        for _ in range(ROUNDS):  # interleaved, so both see the same machine
            now_rounds.append(timings(ROOT))
            if options.against:
                then_rounds.append(timings(pathlib.Path(old)))
    now = best(now_rounds)
    print(f"{'steps':>6} {'bare loop':>12} {'agent loop':>12} {'per step':>10} {'ratio':>7}")
    for n, (bare, agent) in now.items():
        print(f"{n:>6} {bare * 1e3:>10.2f}ms {agent * 1e3:>10.2f}ms {agent / n * 1e6:>8.1f}us {agent / bare:>6.1f}x")
    if options.against:
        then = best(then_rounds)
        print(f"\nthe agent loop now against {options.against} (below 1.0x: faster now)")
        for n in now:
            then_s, now_s = then[n][1], now[n][1]
            print(f"{n:>6} {then_s * 1e3:>10.2f}ms then {now_s * 1e3:>10.2f}ms now {now_s / then_s:>6.2f}x")
    bare, with_lib = import_time("pass"), import_time("import microagent")
    print(f"\nimport microagent: {(with_lib - bare) * 1e3:.1f}ms on top of a bare interpreter "
          f"({with_lib * 1e3:.1f}ms against {bare * 1e3:.1f}ms, {with_lib / bare:.2f}x)")


if __name__ == "__main__":
    main()
