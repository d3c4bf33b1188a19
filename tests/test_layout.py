"""The claims the README and the design make about the code, checked so they cannot drift."""

import ast
import json
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "microagent"
CORE = ["message", "context", "tool", "policy", "agent"]
README = (ROOT / "README.md").read_text()
BOOK = sorted(p.stem for p in PACKAGE.glob("*.py"))            # every .py file in microagent/ is the book
WORKSHOP = sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists())

sys.path.insert(0, str(ROOT / "benchmarks"))
import size  # noqa: E402  (benchmarks/size.py, the counter the README quotes)
import course  # noqa: E402  (benchmarks/course.py, the course clock)
from printed import check_blocks, python_blocks  # noqa: E402  (tests/printed.py)


def imports(path: pathlib.Path) -> list[tuple[str, list[str]]]:
    """(module, names) for each microagent import in a file, anywhere in it (inside functions too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("microagent"):
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.startswith("microagent")]
    return found


def book_imports(name: str) -> set[str]:
    return {module.removeprefix("microagent.") for module, _ in imports(PACKAGE / f"{name}.py")}


# the one exception, and why: Jupyter shows a Context as its story, and the story
# printer lives on top of the core, so Context._repr_pretty_ imports it when asked
REACHES_UP = {"context": {"trace"}}


def test_the_core_imports_only_downward():
    for i, name in enumerate(CORE):
        allowed = set(CORE[:i]) | REACHES_UP.get(name, set())
        assert book_imports(name) <= allowed, f"{name}.py imports from above itself"


def test_the_book_imports_nothing_from_the_workshop():
    for name in BOOK:
        reaching = {m.split(".")[0] for m in book_imports(name)} & set(WORKSHOP)
        assert not reaching, f"microagent/{name}.py imports the workshop: {reaching}"


def test_the_workshop_uses_only_the_books_public_names():
    assert WORKSHOP, "the workshop has folders of its own"
    for folder in WORKSHOP:
        assert (PACKAGE / folder / "README.md").exists(), f"microagent/{folder}/ says what it is in a README"
        for path in (PACKAGE / folder).rglob("*.py"):
            for module, names in imports(path):
                inside = module.removeprefix("microagent.").split(".")[0]
                if inside == folder:
                    continue  # its own modules
                # the book, or another folder of the workshop (the host sends through the transport)
                assert inside in BOOK or inside in WORKSHOP or module == "microagent", \
                    f"{path.name} imports {module}: not the book"
                private = [n for n in names if n.startswith("_")]
                assert not private, f"{path.relative_to(ROOT)} reaches into the book for {private}"


def test_the_host_imports_nothing_of_a2a_which_is_built_on_it():
    # a2a's server imports the host; a host importing a2a back would close a circle
    # (python -m microagent.host's __main__.py, which nothing imports, hands it A2A's routes)
    for path in (PACKAGE / "host").glob("*.py"):
        reaching = [module for module, _ in imports(path) if module.startswith("microagent.a2a")]
        assert path.name == "__main__.py" or not reaching, f"host/{path.name} imports {reaching}"


def test_init_only_re_exports():
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    for node in tree.body:
        is_docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        is_all = isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["__all__"]
        assert is_docstring or is_all or isinstance(node, ast.ImportFrom), ast.dump(node)[:80]


def test_the_core_is_within_its_budget_of_tokens_and_lines_and_reads_without_long_lines():
    counts = size.sizes()
    assert sum(tokens for _, tokens in counts.values()) <= 2200, "the core has outgrown one sitting"
    assert counts["agent"][0] <= 100, "agent.py has outgrown its 100 lines of code"
    for name in CORE:
        long = [n for n, line in enumerate((PACKAGE / f"{name}.py").read_text().splitlines(), 1) if len(line) > 90]
        assert not long, f"{name}.py has lines over 90 columns: {long}"


def test_the_readme_quotes_the_true_size_of_each_core_module():
    counts = size.sizes()
    for name, (lines, tokens) in counts.items():
        assert f"| {name}.py | {lines} | {tokens:,} |" in README, \
            f"the README's size for {name}.py is stale: it is {lines} lines, {tokens:,} tokens now"
    lines, tokens = sum(n for n, _ in counts.values()), sum(t for _, t in counts.values())
    assert f"| **the core** | **{lines}** | **{tokens:,}** |" in README


def test_the_readme_is_a_front_door_a_learner_finishes():
    assert len(README.splitlines()) <= 200
    order = [README.index(heading) for heading in ("## The five pieces", "## The rules of the loop",
                                                    "## Set up", "## What the core refuses")]
    assert order == sorted(order)


def test_every_python_block_in_the_readme_runs_and_prints_what_its_comments_say():
    assert len(python_blocks(README)) >= 2, "the taste, and a brain written by hand"
    check_blocks(README, "README.md")


def test_ci_runs_the_readme_test_command():
    assert "pip install -e '.[dev]' && python -m pytest" in README
    assert "python -m pytest" in (ROOT / ".ci" / "run").read_text()


def test_no_runtime_dependencies():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert "\ndependencies = []\n" in pyproject
    assert '\nrequires-python = ">=3.10"\n' in pyproject


def test_the_code_passes_the_linter():
    pytest.importorskip("ruff")
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout


def test_every_public_class_says_what_it_is_in_help():
    import microagent
    for name in microagent.__all__:
        thing = getattr(microagent, name)
        if isinstance(thing, type):  # a dataclass with no docstring gets its own signature as one
            assert thing.__doc__ and not thing.__doc__.startswith(f"{name}("), f"help({name}) says nothing"
    assert "schema" in microagent.Tool.__doc__ and "stop" in microagent.Step.__doc__


def test_the_one_word_for_each_concept_is_the_one_the_code_uses():
    # words that meant two things, or a second word for one thing, before the book was rewritten
    gone = [r"\bis_(question|decision|verdict|result)\b", r"\bunfolded\b", r"\binner_run\b", r"\bIN_WORDS\b",
            r"\bdecisions\(", r"\brecorded\(", r"\breplayed\(", r"\.pending\b", r"(?<![\w.])digest\("]
    for path in PACKAGE.rglob("*.py"):  # (the host's JSON still has a "pending" field: the wire's word)
        text = path.read_text()
        found = [word for word in gone if re.search(word, text)]
        assert not found, f"{path.relative_to(ROOT)} still says {found}"


def test_the_folders_map_names_every_file_of_the_book_and_every_folder_of_the_workshop():
    map_ = (PACKAGE / "README.md").read_text()
    for name in BOOK:
        if name != "__init__":
            assert f"{name}.py" in map_, f"microagent/README.md does not say what {name}.py is"
    for folder in WORKSHOP:
        assert f"({folder}/README.md)" in map_, f"microagent/README.md does not point at {folder}/"


def test_the_course_reads_in_one_sitting_the_core_path_in_90_minutes_by_the_course_clock():
    times = course.reading_times()
    assert course.core_path(times) <= 90, f"notebooks 01-06 read in {course.core_path(times):.1f} minutes"
    long = {name: round(m, 1) for name, m in times.items() if name[:2] not in course.CORE_PATH and m > 22}
    assert not long, f"over 22 minutes to read: {long}"
    assert sum(times.values()) <= 360, f"the course reads in {sum(times.values()):.1f} minutes"


def test_the_course_clock_counts_words_code_and_output_up_to_the_exercises(tmp_path):
    def cell(kind: str, source, *outputs) -> dict:
        return {"cell_type": kind, "source": source, **({"outputs": list(outputs)} if kind == "code" else {})}
    printed = {"output_type": "stream", "name": "stdout", "text": ["a\n"] * 20}
    shown = {"output_type": "execute_result", "data": {"text/plain": "b\n" * 9 + "b"}}
    code = ["x = 1\n", "\n", "   \n"] + ["x += 1\n"] * 11  # 12 lines of code, two blank
    path = tmp_path / "99_clock.ipynb"
    path.write_text(json.dumps({"cells": [
        cell("markdown", " ".join(["word"] * 150)), cell("markdown", ["# a\n", "fifty " * 48]),
        cell("code", code, printed, shown),
        cell("markdown", "  ## EXERCISES\n\n" + "more words " * 50), cell("code", code, printed)]}))
    # 200 words, 12 lines of code, 30 lines of output, 3 cells; nothing from the Exercises on
    assert course.minutes(path) == pytest.approx(200 / 200 + 12 / 12 + 30 / 30 + 3 * 0.15)


def test_no_line_of_the_book_is_over_90_columns():
    for name in BOOK:
        lines = (PACKAGE / f"{name}.py").read_text().splitlines()
        long = [n for n, line in enumerate(lines, 1) if len(line) > 90]
        assert not long, f"microagent/{name}.py has lines over 90 columns: {long}"


def test_no_line_of_the_workshop_is_over_100_columns():
    # 100, not the book's 90: the workshop is read a package at a time, not beside a notebook,
    # and its lines run to 99 columns, about 75 of them over 90 (in mcp, otel and transport;
    # the host is within 90). 100 is the limit they all meet, and it keeps any from growing.
    for package in WORKSHOP:
        for path in sorted((PACKAGE / package).rglob("*.py")):
            lines = path.read_text().splitlines()
            long = [n for n, line in enumerate(lines, 1) if len(line) > 100]
            assert not long, f"{path.relative_to(ROOT)} has lines over 100 columns: {long}"
