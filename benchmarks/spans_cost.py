"""What does tracing a run cost? The refund office, plain and traced, timed in one run.

    python benchmarks/spans_cost.py

The office runs with its rule-based brain and instant tools (9 spans a run), so what
is timed is the loop and the spans, nothing else: the worst case for the spans'
share. Four ways, each the best of several repeats of 200 runs:

    plain           the office as it is
    traced, idle    traced(office), run outside any tracing block: it writes nothing
    traced, kept    inside a tracing block, each span kept in a list
    traced, a file  inside a tracing block, each run a line of OTLP JSON in a file
    ... with words  the same, traced with content=True (the question, messages, results)

Ratios are against plain, measured in the same run (compare them, not the times).
Then one run's spans as each form of OTLP a POST carries: the time to encode them
(otlp.py's dict, then JSON text or Protobuf's bytes), and their size, plain and gzipped.
"""

import gzip
import json
import pathlib
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from microagent.demo import QUESTION, support_agent  # noqa: E402
from microagent.otel import Exporter, encode, traces_data  # noqa: E402
from microagent.spans import traced, tracing  # noqa: E402

RUNS, REPEATS = 200, 7


def timed(run) -> float:
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(RUNS):
            run()
        best = min(best, time.perf_counter() - start)
    return best / RUNS


def main() -> None:
    office = support_agent(approver=lambda tool, args: True)
    kept = []
    folder = pathlib.Path(tempfile.mkdtemp())
    exporter = Exporter(str(folder / "spans.jsonl"))
    idle, keeping, writing = traced(office, kept.append), traced(office, kept.append), \
        traced(office, exporter)
    wordy = traced(office, Exporter(str(folder / "words.jsonl")), content=True)

    def in_block(agent):
        def run():
            with tracing():
                agent.run(QUESTION)
        return run

    ways = [("plain", lambda: office.run(QUESTION)), ("traced, idle", lambda: idle.run(QUESTION)),
            ("traced, kept", in_block(keeping)), ("traced, a file", in_block(writing)),
            ("... with words", in_block(wordy))]
    times = {name: timed(run) for name, run in ways}
    line = (folder / "spans.jsonl").read_text().splitlines()[0]
    print(f"{RUNS} runs of the refund office (9 spans each), best of {REPEATS}:")
    print("| way | per run | ratio |")
    print("|-----|--------:|------:|")
    for name, seconds in times.items():
        print(f"| {name} | {seconds * 1e6:.0f} µs | {seconds / times['plain']:.2f}x |")
    words = (folder / "words.jsonl").read_text().splitlines()[0]
    print(f"one run's line of OTLP JSON: {len(line):,} bytes ({len(words):,} with words)")

    spans = kept[-9:]  # one run's spans
    forms = [("OTLP JSON (http/json)",
              lambda: json.dumps(traces_data(spans), separators=(",", ":")).encode()),
             ("OTLP Protobuf (http/protobuf)", lambda: encode("TracesData", traces_data(spans)))]
    print()
    print("one run's 9 spans, encoded for a POST:")
    print("| form | to encode | bytes | gzipped |")
    print("|------|----------:|------:|--------:|")
    for name, made in forms:
        body = made()
        print(f"| {name} | {timed(made) * 1e6:.0f} µs | {len(body):,} | "
              f"{len(gzip.compress(body, mtime=0)):,} |")


if __name__ == "__main__":
    main()
