"""Count the core: lines of code and tokens of code, module by module.

    python benchmarks/size.py

A line of code is a line that holds code: blank lines, comments and docstrings
are not counted. A token is a Python token of code: comments, docstrings and
the tokens of layout (line ends, indents) are not counted, and a string is one
token however long it is. Lines can be packed, tokens can't: five clauses
squeezed onto one long line are still five clauses' worth of tokens.
"""

import ast
import io
import pathlib
import tokenize

CORE = ("message", "context", "tool", "policy", "agent")
PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "microagent"
LAYOUT = (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
          tokenize.ENDMARKER)


def docstring_lines(source: str) -> set[int]:
    """The line numbers that hold a docstring (of the module, a class or a function)."""
    lines = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def code_tokens(source: str) -> list[tokenize.TokenInfo]:
    """The tokens of code: no comments, no docstrings, no layout; an f-string is one token."""
    docstrings, tokens, depth = docstring_lines(source), [], 0
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        # Python 3.12 splits an f-string into its pieces; earlier Pythons give one STRING token
        name = tokenize.tok_name[tok.type]
        depth += (name == "FSTRING_START") - (name == "FSTRING_END")
        if tok.type in LAYOUT or tok.start[0] in docstrings or (depth and name != "FSTRING_START"):
            continue
        tokens.append(tok)
    return tokens


def measure(path: pathlib.Path) -> tuple[int, int]:
    """(lines of code, tokens of code) in one file."""
    tokens = code_tokens(path.read_text())
    lines = {n for tok in tokens for n in range(tok.start[0], tok.end[0] + 1)}
    return len(lines), len(tokens)


def longest_line(path: pathlib.Path) -> int:
    return max(len(line) for line in path.read_text().splitlines())


def sizes() -> dict[str, tuple[int, int]]:
    """{module: (lines of code, tokens of code)} for the five core modules."""
    return {name: measure(PACKAGE / f"{name}.py") for name in CORE}


if __name__ == "__main__":
    counts = sizes()
    for name, (lines, tokens) in counts.items():
        print(f"microagent/{name + '.py':<11} {lines:4d} lines {tokens:5d} tokens")
    print(f"{'the core':<22} {sum(n for n, _ in counts.values()):4d} lines "
          f"{sum(t for _, t in counts.values()):5d} tokens")
    others = sorted(p for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE or p.stem not in CORE)
    for p in others:
        lines, tokens = measure(p)
        print(f"  {str(p.relative_to(PACKAGE.parent)):<32} {lines:4d} lines {tokens:5d} tokens")
