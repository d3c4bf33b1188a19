"""Every notebook runs top to bottom in a fresh kernel, and prints what it has committed.

A notebook's committed outputs are what a reader sees without running anything,
so they must never go stale: each code cell's text output from a fresh run is
compared with the committed one.

To (re)write a notebook's outputs after editing it, run it through this file:

    python tests/test_notebooks.py notebooks/01_message.ipynb
"""

import pathlib
import sys

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS = sorted((pathlib.Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


def execute(path: pathlib.Path):
    """Run a notebook in a fresh kernel, in its own folder; return the executed copy."""
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", record_timing=False,  # no clock in the file
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    for cell in nb.cells:  # one print cut into several chunks is saved as one, so rewrites are stable
        merged = []
        for out in cell.get("outputs", []):
            if merged and out["output_type"] == "stream" == merged[-1]["output_type"] \
                    and out["name"] == merged[-1]["name"]:
                merged[-1]["text"] += out["text"]
            else:
                merged.append(out)
        if cell.cell_type == "code":
            cell.outputs = merged
    return nb


def text_of(cell) -> list[str]:
    """The text a reader sees under a code cell: printed text, and the plain value shown.

    subtle: the kernel may deliver one print in several stream chunks (a subprocess's
    output often arrives in two), so consecutive chunks of one stream are joined:
    what is compared is the text a reader sees, not how it was cut on the way.
    """
    seen = []  # [(kind, text)], kind: "stdout", "stderr", "value" or "error"
    for out in cell.get("outputs", []):
        if out["output_type"] == "stream":
            kind, text = out["name"], out["text"]
        elif out["output_type"] in ("execute_result", "display_data"):
            kind, text = "value", out["data"].get("text/plain", "")
        else:
            kind, text = "error", f"{out['ename']}: {out['evalue']}"
        if seen and kind in ("stdout", "stderr") and seen[-1][0] == kind:
            seen[-1] = (kind, seen[-1][1] + text)
        else:
            seen.append((kind, text))
    return [f"{kind}: {text}" for kind, text in seen]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_and_matches_its_committed_outputs(path):
    committed = nbformat.read(path, as_version=4)
    fresh = execute(path)
    old = [c for c in committed.cells if c.cell_type == "code"]
    new = [c for c in fresh.cells if c.cell_type == "code"]
    assert len(old) == len(new)
    for n, (was, now) in enumerate(zip(old, new, strict=True), start=1):
        assert text_of(now) == text_of(was), f"{path.name}, code cell {n} prints something else now:\n{now.source}"
    counts = [c.execution_count for c in old]
    assert counts == list(range(1, len(old) + 1)), f"{path.name} was not saved from one clean run"


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        target = pathlib.Path(arg)
        nbformat.write(execute(target), target)
        print(f"wrote the outputs of {target}")
