"""A markdown file's python blocks, run: each must print what its `# ` comment lines say."""

import contextlib
import io
import re


def python_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, re.S)


def check_blocks(markdown: str, where: str) -> None:
    """Run every python block of `markdown`; an AssertionError names the first that prints otherwise."""
    for i, block in enumerate(python_blocks(markdown)):
        code = "\n".join(line for line in block.splitlines() if not line.startswith("# "))
        promised = [line[2:] for line in block.splitlines() if line.startswith("# ")]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, f"{where}, python block {i}", "exec"), {})
        assert printed.getvalue().splitlines() == promised, f"{where}: python block {i} prints something else"
