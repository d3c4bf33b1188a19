"""Count the lines of code in each core module: blank lines, comments and docstrings not counted.

    python benchmarks/size.py
"""

import ast
import io
import pathlib
import tokenize

CORE = ("message", "context", "tool", "policy", "agent")
PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "microagent"


def code_lines(path: pathlib.Path) -> int:
    """Lines that hold code, not counting blanks, comments or docstrings."""
    source = path.read_text()
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                            tokenize.DEDENT, tokenize.ENDMARKER):
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return len(lines - docstrings)


def sizes() -> dict[str, int]:
    return {name: code_lines(PACKAGE / f"{name}.py") for name in CORE}


if __name__ == "__main__":
    counts = sizes()
    for name, n in counts.items():
        print(f"microagent/{name + '.py':<11} {n:4d} lines of code")
    print(f"{'the core':<22} {sum(counts.values()):4d} lines of code")
    others = sorted(p for p in PACKAGE.glob("*.py") if p.stem not in CORE and p.stem != "__init__")
    for p in others:
        print(f"  on top: microagent/{p.name:<14} {code_lines(p):4d}")
