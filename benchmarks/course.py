"""How long the course takes to read: each notebook's minutes by the course clock.

    python benchmarks/course.py

The course clock is a careful reader's (issue 26): markdown words / 200, plus
non-blank code lines / 12, plus output lines / 30, plus 0.15 a cell, counted from
the top of a notebook up to its first markdown cell that starts "## Exercise"
(in any case). The exercises, their solutions and the asides after them are not
counted: a reader may skip them. On the notebooks before the book's rewrite it came
within 2 minutes a notebook of a human learner's time.

The core path is notebooks 01 to 06, the pieces and the refund office; the
course is every notebook in notebooks/.
"""

import json
import pathlib

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
CORE_PATH = ("01", "02", "03", "04", "05", "06")  # by the number a notebook's name starts with


def minutes(path: pathlib.Path) -> float:
    """Minutes to read a notebook up to its exercises, by the course clock."""
    words = code = printed = cells = 0
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        text = "".join(cell["source"])  # a list of lines, or one string
        if cell["cell_type"] == "markdown" and text.lstrip().lower().startswith("## exercise"):
            break
        cells += 1
        if cell["cell_type"] == "markdown":
            words += len(text.split())
            continue
        code += sum(1 for line in text.splitlines() if line.strip())
        for out in cell.get("outputs", []):  # what is printed, and the value shown
            shown = out.get("text") or out.get("data", {}).get("text/plain", "")
            printed += len("".join(shown).splitlines())
    return words / 200 + code / 12 + printed / 30 + cells * 0.15


def reading_times() -> dict[str, float]:
    """{a notebook's file name: its minutes}, for every notebook, in order."""
    return {path.name: minutes(path) for path in sorted(NOTEBOOKS.glob("*.ipynb"))}


def core_path(times: dict[str, float]) -> float:
    """The minutes of the core path, notebooks 01 to 06, out of reading_times()."""
    return sum(m for name, m in times.items() if name[:2] in CORE_PATH)


if __name__ == "__main__":
    times = reading_times()
    for name, m in times.items():
        print(f"notebooks/{name:<36} {m:5.1f} min")
    print(f"{'the core path, notebooks 01 to 06':<46} {core_path(times):5.1f} min")
    print(f"{'the whole course':<46} {sum(times.values()):5.1f} min")
