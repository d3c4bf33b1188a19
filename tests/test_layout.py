"""The claims the README and the design make about the code, checked so they cannot drift."""

import ast
import contextlib
import io
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORE = ["message", "context", "tool", "policy", "agent"]
README = (ROOT / "README.md").read_text()

sys.path.insert(0, str(ROOT / "benchmarks"))
import size  # noqa: E402  (benchmarks/size.py, the counter the README quotes)


def module_imports(name: str) -> set[str]:
    """The microagent modules a module imports, anywhere in it (inside functions too)."""
    tree = ast.parse((ROOT / "microagent" / f"{name}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("microagent"):
            found.add(node.module.removeprefix("microagent."))
        elif isinstance(node, ast.Import):
            found.update(a.name.removeprefix("microagent.") for a in node.names if a.name.startswith("microagent"))
    return found


# the one exception, and why: Jupyter shows a Context as its story, and the story
# printer lives on top of the core, so Context._repr_pretty_ imports it when asked
REACHES_UP = {"context": {"trace"}}


def test_the_core_imports_only_downward():
    for i, name in enumerate(CORE):
        allowed = set(CORE[:i]) | REACHES_UP.get(name, set())
        assert module_imports(name) <= allowed, f"{name}.py imports from above itself"


def test_modules_on_top_are_imported_by_nothing_in_the_core():
    on_top = {p.stem for p in (ROOT / "microagent").glob("*.py")} - set(CORE) - {"__init__", "__main__"}
    for name in CORE:
        reaching_up = module_imports(name) & on_top
        assert reaching_up <= REACHES_UP.get(name, set()), f"{name}.py imports a module built on top of the core"


def test_init_only_re_exports():
    tree = ast.parse((ROOT / "microagent" / "__init__.py").read_text())
    for node in tree.body:
        is_docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        is_all = isinstance(node, ast.Assign) and [t.id for t in node.targets] == ["__all__"]
        assert is_docstring or is_all or isinstance(node, ast.ImportFrom), ast.dump(node)[:80]


def test_the_readme_quotes_the_true_size_of_each_core_module():
    counts = size.sizes()
    for name, n in counts.items():
        assert f"| {name}.py | {n} |" in README, f"the README's size for {name}.py is stale: it is {n} now"
    assert f"| **the core** | **{sum(counts.values())}** |" in README
    assert sum(counts.values()) <= 330, "the core has outgrown one sitting"


def test_the_readme_taste_runs_and_prints_what_its_comments_say():
    block = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    code = "\n".join(line for line in block.splitlines() if not line.startswith("# "))
    promised = [line[2:] for line in block.splitlines() if line.startswith("# ")]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    assert printed.getvalue().splitlines() == promised


def test_ci_runs_the_readme_test_command():
    assert "pip install -e '.[dev]' && python -m pytest" in README
    assert "python -m pytest" in (ROOT / ".ci" / "run").read_text()


def test_no_runtime_dependencies():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert "\ndependencies = []\n" in pyproject
    assert '\nrequires-python = ">=3.10"\n' in pyproject


def test_the_code_passes_the_linter():
    pytest.importorskip("ruff")
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(ROOT)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout


def test_every_public_class_says_what_it_is_in_help():
    import microagent
    for name in microagent.__all__:
        thing = getattr(microagent, name)
        if isinstance(thing, type):  # a dataclass with no docstring gets its own signature as one
            assert thing.__doc__ and not thing.__doc__.startswith(f"{name}("), f"help({name}) says nothing"
    assert "schema" in microagent.Tool.__doc__ and "stop" in microagent.Step.__doc__
