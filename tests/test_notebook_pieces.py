"""The pieces the notebooks rebuild agree with the library's, so the two can't drift apart.

Notebooks 01 to 05 each rebuild one piece from nothing (the note, the notebook,
the coworker, the brain, the loop), 06 builds the refund office by hand, and 08
to 10 build three chapters out of the five pieces (an agent as a coworker, memory
as a view, retrying and hiding). Their last cells check a few cases against
microagent. Here each notebook's code cells are run in order, as a reader's
kernel would run them, and the pieces left defined are checked against the
library on many more cases: generated notes, notebooks and arguments, scripted
brains that make every mistake a brain can make, and inner runs that answer, run
out of steps, wait for a human or fall over. Where a notebook copies the
library's code (the note and its kinds, the notebook and its loader, the checks
of a call, the brains that need no model, the loop), the code itself is compared
too, as the parser reads it: docstrings, comments and layout aside, it is the same code.
Each exercise's check says "done" to its worked answer, "not answered yet" to its
placeholder, and what is wrong (never the answer) to a wrong one.

The notebooks are read with the standard library's json, so this runs without
the jupyter packages; tests/test_notebooks.py checks their committed outputs.
"""

import ast
import contextlib
import copy
import dataclasses
import io
import json
import operator
import pathlib
import re
import threading
import tokenize
import types
from typing import Literal

import pytest
from hypothesis import given, settings, strategies as st

import microagent
from microagent import ASSISTANT, ROLES, SYSTEM, TOOL, USER, Action, Agent, Context, Message, Tool, demo
from microagent import memory, retry, saving, script, tool
from microagent.schema import as_tool, schema_of
from microagent.team import agent_tool
from microagent.trace import story

NOTEBOOKS = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
LIBRARY = pathlib.Path(microagent.__file__).resolve().parent
REBUILDING = ["01_message.ipynb", "02_context.ipynb", "03_tool.ipynb", "04_policy.ipynb", "05_agent.ipynb"]
CHAPTERS = ["08_agents_as_coworkers.ipynb", "09_memory.ipynb", "10_recovering_from_errors.ipynb",
            "12_hosting.ipynb", "13_train_a_brain.ipynb", "14_coworkers_over_mcp.ipynb",
            "15_is_it_any_good.ipynb", "16_where_prompts_live.ipynb", "17_at_the_same_time.ipynb"]


class Names(dict):
    """A notebook's names, shown by the notebook's name alone in a failing example."""

    def _repr_pretty_(self, printer, cycle):
        # subtle: hypothesis prints the fixtures of a failing example too, and would reach the
        # library's Context class among the names, whose _repr_pretty_ wants an instance
        printer.text(f"<the names of {self['__name__']}>")


def code_cells(name: str) -> list[str]:
    cells = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def run_cells(name: str) -> dict:
    """Run every code cell of notebooks/`name` in order, in a fresh module; hand back its names."""
    module = types.ModuleType(name.removesuffix(".ipynb"))
    with contextlib.redirect_stdout(io.StringIO()):  # what the cells print is test_notebooks.py's business
        for n, source in enumerate(code_cells(name)):
            exec(compile(source, f"{name}, code cell {n + 1}", "exec"), module.__dict__)
    return Names(module.__dict__)


def ran(name: str):
    """A fixture holding notebooks/`name`'s names, its cells run once for the whole module."""
    return pytest.fixture(scope="module")(lambda: run_cells(name))


nb01, nb02, nb03, nb04, nb05 = map(ran, REBUILDING)
nb06 = ran("06_refund_demo.ipynb")
nb08, nb09, nb10 = map(ran, CHAPTERS[:3])


def outcome(make, *args, **kwargs):
    """What a call comes to: ("ok", its value), or the exception's type and message."""
    try:
        return "ok", make(*args, **kwargs)
    except Exception as e:
        return type(e).__name__, str(e)


# --- the code itself, as the parser reads it --------------------------------------------

def functions(tree: ast.AST, prefix: str = "") -> dict:
    """Every def in a module, by name, a method as Class.method."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[prefix + node.name] = node
        elif isinstance(node, ast.ClassDef):
            found.update(functions(node, f"{node.name}."))
    return found


def notebook_functions(name: str) -> dict:
    """The defs of a notebook's code cells; a name defined again keeps its last def."""
    found = {}
    for source in code_cells(name):
        found.update(functions(ast.parse(source)))
    return found


def library_functions(module: str) -> dict:
    return functions(ast.parse((LIBRARY / module).read_text(encoding="utf-8")))


class Rename(ast.NodeTransformer):
    def __init__(self, names: dict):
        self.names = names

    def visit_Name(self, node):
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_Attribute(self, node):
        self.generic_visit(node)
        node.attr = self.names.get(node.attr, node.attr)
        return node


def shape(node: ast.FunctionDef, names: dict) -> str:
    """A def as the parser reads it, without its docstring, annotations and name."""
    node = copy.deepcopy(node)
    first = node.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        node.body = node.body[1:]
    node.name, node.returns, node.decorator_list = "", None, []
    for arg in node.args.args + node.args.kwonlyargs:
        arg.annotation = None
    return ast.dump(Rename(names).visit(node))


def same_code(name: str, module: str, pairs: dict, names: dict | None = None) -> list[str]:
    """The notebook's defs (pairs: notebook name -> library name) that are not the library's code."""
    ours, theirs = notebook_functions(name), library_functions(module)
    return [mine for mine, library in pairs.items() if shape(ours[mine], names or {}) != shape(theirs[library], {})]


# --- every rebuilding notebook ----------------------------------------------------------

@pytest.mark.parametrize("name", REBUILDING + CHAPTERS)
def test_a_rebuilding_notebook_reads_in_short_cells_with_its_solutions_at_the_end(name):
    cells = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))["cells"]
    text = ["".join(c["source"]) for c in cells]
    longest = max(len(t.splitlines()) for c, t in zip(cells, text, strict=True) if c["cell_type"] == "code")
    assert longest <= 30, f"{name} has a code cell of {longest} lines: split it"
    sections = [t.splitlines()[0] for c, t in zip(cells, text, strict=True)
                if c["cell_type"] == "markdown" and t.startswith("## ")]
    while sections[-1].startswith("## Aside"):  # an aside after the Solutions may be skipped
        sections.pop()
    assert sections[-2:] == ["## Exercises", "## Solutions"], sections
    solutions = next(i for i, t in enumerate(text) if t.startswith("## Solutions"))
    asked = 0
    for i, cell in enumerate(cells[:solutions]):  # no worked answer sits under its question
        printed = "".join("".join(out.get("text", "")) for out in cell.get("outputs", []))
        assert not re.search(r"exercise \d+ done", printed), f"{name}, cell {i} shows a worked answer"
        for line in re.findall(r"exercise \d+:.*", printed):
            assert "not answered yet" in line, f"{name}, cell {i}: a check says more than 'not answered yet': {line}"
            asked += 1
    done = sum(len(re.findall(r"exercise \d+ done", "".join("".join(out.get("text", ""))
                                                              for out in c.get("outputs", []))))
               for c in cells[solutions:])
    assert asked >= 2 and done >= asked, f"{name}: {asked} checks under the questions, {done} done in Solutions"


@pytest.mark.parametrize("name", REBUILDING + CHAPTERS)
def test_a_rebuilding_notebook_never_names_a_thing_underscore(name):
    for n, source in enumerate(code_cells(name), start=1):
        names = [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.NAME]
        assert "_" not in names, f"{name}, code cell {n} uses _"


@pytest.mark.parametrize("name", REBUILDING + CHAPTERS)
def test_a_rebuilding_notebook_imports_chapters_from_their_modules(name):
    # microagent's top level re-exports the core; a chapter's names come from the chapter (its module, or
    # the module itself: `from microagent import memory`)
    core = {"ASSISTANT", "ROLES", "SYSTEM", "TOOL", "USER", "Message", "Context", "Tool", "Action", "Agent",
            "Step", "DONE", "PAUSED", "CANCELLED", "OUT_OF_STEPS", "final_answer", "error_note", "read_json"}
    modules = {p.stem for p in LIBRARY.glob("*.py")} - {"__init__", "__main__"}
    for source in code_cells(name):
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module == "microagent":
                assert {a.name for a in node.names} <= core | modules, ast.unparse(node)


# --- 01: the note ---------------------------------------------------------------------

def test_01_the_rebuilt_message_has_the_library_fields_and_defaults(nb01):
    fields = [(f.name, f.default) for f in dataclasses.fields(nb01["Message"])]
    assert fields == [(f.name, f.default) for f in dataclasses.fields(Message)]
    assert (nb01["SYSTEM"], nb01["USER"], nb01["ASSISTANT"], nb01["TOOL"], nb01["ROLES"]) == (
        SYSTEM, USER, ASSISTANT, TOOL, ROLES)
    assert nb01["Message"].__dataclass_params__.frozen


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=4)


@given(role=st.sampled_from(ROLES + ("boss", "costumer")), content=st.one_of(texts, st.integers(), st.none()),
       name=st.none() | texts | st.integers(), tool=st.none() | st.just("") | texts,
       args=st.none() | texts | st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
       notes=st.sampled_from(["none", "one of its own", "a list", "a tuple of text"]),
       error=st.one_of(st.booleans(), st.sampled_from([0, 1, "false", None, []])))
def test_01_the_rebuilt_message_accepts_and_refuses_like_the_library(nb01, role, content, name, tool, args, notes,
                                                                     error):
    # valid notes, and each mistake the notebook teaches: a misspelled role, a number for the content, a dict
    # for the arguments, a list for the notes, a flag that is not True or False
    def make(cls):
        inner = {"none": (), "one of its own": (cls(USER, "hi"),), "a list": [cls(USER, "hi")],
                 "a tuple of text": ("hi",)}[notes]
        kind, value = outcome(cls, role, content, name, tool, args, inner, error)
        return (kind, dataclasses.astuple(value), value.kind) if kind == "ok" else (kind, value)
    assert make(nb01["Message"]) == make(Message)


@given(role=st.sampled_from(ROLES), tool=st.none() | st.just("") | st.text(max_size=3), error=st.booleans())
def test_01_the_rebuilt_kinds_of_note_match_the_library(nb01, role, tool, error):
    assert nb01["Message"](role, "x", tool=tool, error=error).kind == Message(role, "x", tool=tool, error=error).kind


def test_01_the_rebuilt_note_is_the_library_code():
    pairs = {"Message.__post_init__": "Message.__post_init__", "kind": "Message.kind"}
    assert same_code("01_message.ipynb", "message.py", pairs) == []


def test_01_every_kind_of_note_is_in_the_notebook(nb01):
    seen = {m.kind for m in nb01["run"]} | {m.kind for m in nb01["notes"]}
    assert seen == {"system", "question", "decision", "verdict", "result", "remark", "no_move"}


def test_01_the_exercises_check_and_teach(nb01):
    check_1, check_2, Ours = nb01["check_1"], nb01["check_2"], nb01["Message"]
    assert check_1(nb01["predicted_kinds"]).startswith("exercise 1 done")
    assert check_1(["Verdict.", "remark", "RESULT", "verdict!", "no-move", "Decision"]).startswith("exercise 1 done")
    assert check_1(None).startswith("exercise 1: not answered yet")
    wrong = check_1(["verdict", "remark", "result", "question", "remark", "decision"])
    assert wrong.startswith("exercise 1: note(s) [4, 5]") and "no_move" not in wrong
    assert check_1("verdict").startswith("exercise 1: write a list of 6 kinds")
    assert check_1(["verdict"] * 5 + ["tool call"]).startswith("exercise 1: 'tool call' is not a kind")
    assert check_2(nb01["missed"]) == "exercise 2 done: a no_move note, which the hand spelling does not count"
    assert check_2(Message(ASSISTANT, "?", "support", "", "{}")).startswith("exercise 2 done: a decision")
    assert check_2(None).startswith("exercise 2: not answered yet")
    assert "both spellings say it is a move" in check_2(Ours(ASSISTANT, "hm", "support", "look_up_order", "{}"))
    assert "both spellings say it is not a move" in check_2(Ours(ASSISTANT, "out of steps", "support"))
    assert check_2("no_move").startswith("exercise 2: write a note")


# --- 02: the notebook -----------------------------------------------------------------

leaf = st.builds(Message, st.sampled_from(ROLES), texts, st.none() | texts, st.none() | texts, st.none() | texts,
                 error=st.booleans())
notes = st.lists(st.one_of(leaf, st.builds(lambda m, inner: dataclasses.replace(m, notes=tuple(inner)),
                                           leaf, st.lists(leaf, max_size=2))), max_size=5)


@given(notes)
def test_02_the_rebuilt_notebook_saves_the_same_text_and_loads_it_back(nb02, msgs):
    ours, theirs = nb02["Context"](tuple(msgs)), Context(tuple(msgs))
    saved = nb02["to_json"](ours)
    assert saved == saving.to_json(theirs)
    assert nb02["from_json"](saved) == ours == nb02["from_json"](saved.encode())
    assert saving.from_json(saved) == theirs
    assert (len(ours), ours.last(), list(ours), ours[:2]) == (len(theirs), theirs.last(), list(theirs), theirs[:2])


def test_02_the_rebuilt_notebook_adds_and_refuses_like_the_library(nb02):
    ours, theirs = nb02["Context"](), Context()
    note = Message(USER, "hi")
    assert ours.add(note, note).messages == theirs.add(note, note).messages and ours.messages == ()
    for bad in ("hi", [note], None):
        assert outcome(ours.add, bad) == outcome(theirs.add, bad)
        assert outcome(nb02["Context"], bad) == outcome(Context, bad)
    assert outcome(nb02["to_json"], "saved text") == outcome(saving.to_json, "saved text")


FORMAT = '{"format": "microagent.context/1", "messages": '


@pytest.mark.parametrize("bad", [
    "", "[]", "not json", '{"messages": []}', '{"format": "microagent.context/1"}', FORMAT + "{}}",
    FORMAT + '[{"role": "boss", "content": "hi"}]}', FORMAT + '[{"role": "user"}]}',
    FORMAT + '[{"role": "user", "content": "hi", "mood": "glad"}]}', FORMAT + '[{"role": "user", "content": 3}]}',
    FORMAT + '[{"role": "user", "content": "hi", "content": "bye"}]}', FORMAT + '[{"role": "user", "content": NaN}]}',
    FORMAT + '[{"role": "tool", "content": "x", "error": "false"}]}', FORMAT + '[{"role": "tool", "content": "x", '
                                                                            '"error": []}]}',
    FORMAT + '[{"role": "tool", "content": "x", "notes": "abc"}]}', FORMAT + '[{"role": "tool", "content": "x", '
                                                                          '"notes": 5}]}',
    FORMAT + '[{"role": "tool", "content": "x", "notes": [{"role": "user"}]}]}', FORMAT + "[3]}",
    FORMAT + "[" * 100000, b'\xff\xfe', None, 3,
])
def test_02_the_rebuilt_loader_refuses_what_the_library_refuses_in_the_same_words(nb02, bad):
    assert outcome(nb02["from_json"], bad) == outcome(saving.from_json, bad)
    assert outcome(saving.from_json, bad)[0] == "ValueError"


def test_02_the_rebuilt_notebook_and_loader_are_the_library_code():
    # to_json is not compared: the library's also writes a lone surrogate as an escape, which 02 says
    methods = ("__post_init__", "add", "last", "__iter__", "__len__", "__getitem__")
    assert same_code("02_context.ipynb", "context.py", {f"Context.{m}": f"Context.{m}" for m in methods}) == []
    pairs = {"dump_note": "_dump", "load_note": "_load", "from_json": "from_json"}
    assert same_code("02_context.ipynb", "saving.py", pairs, {"dump_note": "_dump", "load_note": "_load"}) == []


def test_02_the_exercises_check_and_teach(nb02):
    check_1, check_2 = nb02["check_1"], nb02["check_2"]
    assert check_1(nb02["predicted"]) == "exercise 1 done: (1, 2, 4)" == check_1([1, 2, 4])
    assert check_1(None).startswith("exercise 1: not answered yet")
    assert check_1((2, 2, 4)).startswith("exercise 1: count a again")
    assert check_1((1, 1, 4)).startswith("exercise 1: count b again")
    assert check_1((1, 2, 3)).startswith("exercise 1: count c again")
    assert check_1("1, 2, 4").startswith("exercise 1: write three whole numbers")
    assert check_2(nb02["paused_text"]).startswith("exercise 2 done: paused on issue_refund")
    assert check_2(None).startswith("exercise 2: not answered yet")
    assert check_2('{"messages": []}').startswith("exercise 2: that text doesn't load yet. The loader says: not a")
    question = {"role": "user", "content": "hi"}
    refund = {"role": "assistant", "content": "refund it", "name": "support", "tool": "issue_refund"}
    text = lambda *msgs: json.dumps({"format": "microagent.context/1", "messages": list(msgs)})  # noqa: E731
    assert check_2(text(question)).startswith("exercise 2: it loads, but its last note is a question")
    assert check_2(text(refund)).startswith("exercise 2: it loads, but where is the customer's question")
    assert check_2(text(question, {**refund, "args": '{"order_id": "A1234", "amount": "79"}'})).startswith(
        "exercise 2: the decision's args read as")
    assert check_2(text(question, {**refund, "args": '{"amount": 79'})).startswith(
        "exercise 2: the decision's args don't read as JSON")
    assert check_2(text(question, {**refund, "tool": "refund"})).startswith("exercise 2: the last decision calls")


# --- 03: the coworker -----------------------------------------------------------------

def refund(order_id: str, amount: float, count: int = 1, urgent: bool = False, memo=None) -> str:
    """Refund an order."""
    return f"{order_id} {amount:g} x{count}"


def nothing() -> str:
    """Takes nothing."""
    return "ok"


def refund_items(order_id: str, items: list[str], sizes: list[list[int]], extra: dict, note: list = ()) -> str:
    """Refund some items."""
    return f"{order_id}: {items}"


def made(t) -> tuple:
    return t.name, t.description, t.terminal, t.needs_approval, t.schema


async def slow(order_id: str) -> str:
    """Look up an order, slowly."""
    return order_id


def test_03_the_rebuilt_tool_reads_the_schema_off_the_parameters_like_the_library(nb03):
    def odd(when: set, *more, a, b: int = 3, **rest):
        return "odd"

    def first(x, /, y=1):
        return x

    def keywords(when: set, *, a, b: int = 3, **rest):
        return "fine"
    for fn in (refund, nothing, refund_items, nb03["look_up_order"], nb03["issue_refund"], lambda x, y=2: x,
               keywords, odd, first, lambda *numbers: sum(numbers), len, slow, nb03["slow_look_up"]):
        assert built(nb03["Tool"], "t", "d", fn) == built(microagent.Tool, "t", "d", fn), fn
    assert built(microagent.Tool, "t", "d", odd) == ("TypeError", "t: a tool takes named parameters, not *more")
    assert built(microagent.Tool, "t", "d", slow)[0] == "TypeError"
    assert made(nb03["Tool"]("t", "d", keywords)) == made(microagent.Tool("t", "d", keywords))
    for name in ("two words", "", None, 3, "look-up-order", "look_up_order", "1st", "-", "-x", "x-", "1-x", "a--b"):
        assert built(nb03["Tool"], name, "d", refund) == built(microagent.Tool, name, "d", refund), name
    for make in (nb03["Tool"], microagent.Tool):  # a coworker is equal only to itself
        one = make("t", "d", refund)
        assert one == one and one != make("t", "d", refund)


def built(make, *args) -> tuple:
    """What making a Tool comes to: its fields, or the exception's type and message."""
    kind, value = outcome(make, *args)
    return (kind, made(value)) if kind == "ok" else (kind, value)


def test_03_the_rebuilt_as_tool_makes_the_library_tool(nb03):
    for fn in (refund, nothing, refund_items, nb03["look_up_order"], nb03["issue_refund"]):
        assert nb03["schema_of"](fn) == schema_of(fn), fn.__name__
        assert made(nb03["as_tool"](fn)) == made(as_tool(fn))
        assert made(nb03["as_tool"](fn, name="x", terminal=True, needs_approval=True)) == made(
            as_tool(fn, name="x", terminal=True, needs_approval=True))
        assert made(nb03["as_tool"](needs_approval=True)(fn)) == made(as_tool(needs_approval=True)(fn))
    assert made(nb03["final_answer"]) == made(microagent.final_answer)


def test_03_the_rebuilt_as_tool_refuses_what_the_library_refuses(nb03):
    def undocumented(x: str):
        return x

    def positional(x: str, /):
        """Positional only."""

    def starred(*x: str):
        """Any number."""

    def odd_hint(when: set):
        """A hint no tool supports."""
    for fn in (undocumented, positional, starred, "look_up_order", len, slow):
        assert outcome(nb03["as_tool"], fn) == outcome(as_tool, fn)
    assert "microagent.parallel.async_tool" in outcome(as_tool, slow)[1]
    assert outcome(nb03["as_tool"], odd_hint)[0] == outcome(as_tool, odd_hint)[0] == "TypeError"


json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=3)),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=2), inner, max_size=2),
    max_leaves=4)
optional = {name: json_values for name in ("count", "urgent", "memo", "extra")}
calls = st.one_of(
    st.dictionaries(st.sampled_from(["order_id", "amount", "count", "urgent", "memo", "extra"]), json_values),
    st.fixed_dictionaries({"order_id": json_values, "amount": json_values}, optional=optional),  # reaches the types
    st.fixed_dictionaries({"order_id": st.text(max_size=3), "amount": json_values}, optional=optional),
    json_values,  # not even an object
)


@settings(deadline=None)  # each example is fast; a loaded machine is not
@given(calls)
def test_03_the_rebuilt_tool_checks_and_runs_a_call_like_the_library(nb03, args):
    text = json.dumps(args)  # NaN and Infinity too, which json writes and the strict reader refuses
    ours, theirs = nb03["as_tool"](refund), as_tool(refund)
    assert ours.read(text) == theirs.read(text)  # the same arguments, or the same note
    assert ours.run(text) == theirs.run(text)


def choose(order_id: str, kind: Literal["card", 1, True], items: list[Literal["a", "b"]],
           memo: str | None = None, tags: list[int] | None = None) -> str:
    """A schema with enums, arrays and null: the rebuilt Tool is handed it."""
    return "ok"


choices = st.fixed_dictionaries(
    {"order_id": json_values, "kind": st.sampled_from(["card", 1, True, 1.0, "1", None]),
     "items": st.one_of(json_values, st.lists(st.sampled_from(["a", "b", "c", 1, None]), max_size=3))},
    optional={"memo": json_values, "tags": st.one_of(json_values, st.lists(json_values, max_size=2)),
              "extra": json_values})


@settings(deadline=None)  # each example is fast; a loaded machine is not
@given(choices)
def test_03_the_rebuilt_check_of_a_given_schema_says_what_the_library_says(nb03, args):
    ours, theirs = nb03["Tool"]("choose", "d", choose, schema=schema_of(choose)), as_tool(choose)
    assert ours.read(json.dumps(args)) == theirs.read(json.dumps(args))


@pytest.mark.parametrize("kind", [1, True, 1.0, "card", False, 0])
def test_03_an_enum_compares_the_type_too_in_both(nb03, kind):  # True == 1 == 1.0 in Python
    schema = {"type": "object", "properties": {"kind": {"enum": [1, "card"]}}}
    ours, theirs = nb03["Tool"]("t", "d", choose, schema=schema), microagent.Tool("t", "d", choose, schema=schema)
    text = json.dumps({"kind": kind})
    assert ours.read(text) == theirs.read(text)
    assert isinstance(theirs.read(text), dict) == (kind in (1, "card") and type(kind) in (int, str))


class Mute(Exception):
    def __str__(self):
        raise RuntimeError("no words")


def test_03_the_rebuilt_run_turns_every_failure_into_the_library_note(nb03):
    def raises(order_id: str) -> str:
        raise KeyError(order_id)

    def mute() -> str:
        raise Mute()

    def number(order_id: str) -> int:
        return 79

    def whole_note(order_id: str):
        return Message(TOOL, "inner done", "helper", notes=(Message(USER, "hi"),), error=True)

    def assistant_note(order_id: str):
        return Message(ASSISTANT, "a note of another kind", "someone", "t", "{}")

    def huge(order_id: str) -> int:
        return 10**5000  # Python refuses to make it text

    def unprintable(order_id: str):
        return Mute()  # its text raises

    def nothing_back(order_id: str):
        pass
    for fn in (raises, mute, number, whole_note, assistant_note, huge, unprintable, nothing_back):
        ours, theirs = nb03["Tool"](fn.__name__, "d", fn), microagent.Tool(fn.__name__, "d", fn)
        for text in ('{"order_id": "A1"}', "{}", '{"order_id": "A1", "order_id": "B2"}', ""):
            assert ours.run(text) == theirs.run(text), (fn.__name__, text)
    assert microagent.Tool("huge", "d", huge).run('{"order_id": "A1"}').content.startswith(
        "error: huge failed: ValueError: Exceeds the limit")
    assert microagent.Tool("none", "d", nothing_back).run('{"order_id": "A1"}').content == "None"
    for fn in (number, whole_note, assistant_note, nothing_back):  # called directly: a string, or the note
        ours, theirs = nb03["Tool"](fn.__name__, "d", fn), microagent.Tool(fn.__name__, "d", fn)
        assert ours(order_id="A1") == theirs(order_id="A1")


@pytest.mark.parametrize("text", [
    '{"order_id": "A1234"}', '{"amount": 1, "amount": 9999}', '{"a": {"b": 1, "b": 2}}', '[{"a": 1, "a": 1}]',
    '{"order_id": "A12', "[1, 2]", '"text"', "null", "", "[" * 100000 + "]" * 100000, '{"a": ' * 50000,
    '{"a": [1, {"b": null}], "c": "\u00e9"}', "NaN", "[Infinity]", '{"a": -Infinity}', "1e999", "[1.5e308, 2e308]",
    "1" * 5000, None, 3,
])
def test_03_the_rebuilt_read_json_reads_and_refuses_like_the_library(nb03, text):
    assert outcome(nb03["read_json"], text) == outcome(tool.read_json, text)


@settings(deadline=None)  # each example is fast; a loaded machine is not
@given(json_values)
def test_03_the_rebuilt_read_json_reads_what_json_writes(nb03, value):
    text = json.dumps(value)  # compared as text again: nan, which json writes, is not equal to itself
    assert outcome(nb03["read_json"], text) == outcome(tool.read_json, text)


def test_03_the_rebuilt_checks_are_the_library_code(nb03):
    names = {"mismatch": "_mismatch", "once_each": "_once_each", "finite": "_finite", "STRICT": "_STRICT"}
    pairs = {"Tool.__post_init__": "Tool.__post_init__", "read": "Tool.read", "run": "Tool.run",
             "problem": "Tool.problem",
             "error_note": "error_note", "read_json": "read_json", "once_each": "_once_each", "finite": "_finite",
             "said_by": "said_by", "mismatch": "_mismatch", "Tool.__call__": "Tool.__call__"}
    assert same_code("03_tool.ipynb", "tool.py", pairs, names) == []
    assert same_code("03_tool.ipynb", "schema.py", {"as_tool": "as_tool"}) == []


def test_03_the_exercises_check_and_teach(nb03):
    check_1, check_2 = nb03["check_1"], nb03["check_2"]
    assert check_1(nb03["predicted_fits"]) == "exercise 1 done: fits fits refused refused fits refused"
    assert check_1(None).startswith("exercise 1: not answered yet")
    wrong = check_1([True] * 6)
    assert wrong.startswith("exercise 1: 3 of your 6 answers are off") and "fits" not in wrong
    assert check_1(["fits"] * 6).startswith("exercise 1: write a list of 6 answers, each True or False")
    assert check_2(nb03["exchange"]).startswith("exercise 2 done")
    assert check_2(refund).startswith("exercise 2: your schema's properties are")
    assert check_2(lambda *order_id: order_id).startswith(
        "exercise 2: schema_of refuses your function: <lambda>: a tool takes named parameters only")

    def almost(order_id: str, count: int, gift: bool = False, memo=None, more=None) -> str:
        """Exchange items."""
    assert check_2(almost).startswith("exercise 2: your schema's properties are")

    def optional_count(order_id: str, count: int = 1, gift: bool = False, memo=None) -> str:
        """Exchange items."""
    assert check_2(optional_count).startswith("exercise 2: your schema's required are")


# --- 04: the brain --------------------------------------------------------------------

@given(st.one_of(st.dictionaries(st.text(max_size=3), json_values, max_size=3), st.text(max_size=8)), texts,
       st.none() | st.sampled_from(["look_up_order", "", "final_answer"]))
def test_04_the_rebuilt_action_keeps_the_same_json_text(nb04, args, why, name):
    ours, theirs = nb04["Action"](name, args, why), Action(name, args, why)
    assert dataclasses.astuple(ours) == dataclasses.astuple(theirs)
    assert [f.name for f in dataclasses.fields(ours)] == [f.name for f in dataclasses.fields(theirs)]


@pytest.mark.parametrize("bad", [dict(tool=3), dict(tool=["look_up_order"]), dict(tool="t", reasoning=None),
                                 dict(tool="t", args={"a": 1}, reasoning=4)])
def test_04_the_rebuilt_action_refuses_like_the_library(nb04, bad):
    assert outcome(nb04["Action"], **bad) == outcome(Action, **bad)
    assert outcome(Action, **bad)[0] == "TypeError"


moves = st.builds(Action, st.none() | st.sampled_from(["look_up_order", "final_answer", ""]),
                  st.sampled_from(["{}", '{"order_id": "A1"}', "", '{"a']), texts)
notebook_notes = st.lists(st.one_of(
    leaf, st.builds(Message, st.just(ASSISTANT), texts, st.just("support"), st.none() | st.sampled_from(["t", ""]),
                    st.none() | st.just(""), error=st.booleans())), max_size=8)


def fields_of(actions) -> list[tuple]:
    return [(a.tool, a.args, a.reasoning) for a in actions]


def next_move(brain, ctx, tools):
    """The fields of the move a brain makes next, or the exception it raises."""
    kind, move = outcome(brain, ctx, tools)
    return (kind, fields_of([move])) if kind == "ok" else (kind, move)


@given(notebook_notes, st.lists(moves, max_size=5))
def test_04_the_rebuilt_script_brains_read_a_notebook_like_the_library(nb04, msgs, script_moves):
    ctx = Context(tuple(msgs))
    assert fields_of(nb04["actions"](ctx)) == fields_of(script.actions(ctx))
    ours = nb04["scripted"](*[nb04["Action"](*dataclasses.astuple(a)) for a in script_moves])
    for mine, library in ((ours, script.scripted(*script_moves)), (nb04["replay"](ctx), script.replay(ctx))):
        assert next_move(mine, ctx, nb04["tools"]) == next_move(library, ctx, nb04["tools"])


def test_04_the_rebuilt_script_brains_refuse_like_the_library(nb04):
    assert outcome(nb04["actions"], "saved text") == outcome(script.actions, "saved text")
    assert outcome(nb04["scripted"], "look_up_order") == outcome(script.scripted, "look_up_order")


def test_04_the_rebuilt_script_brains_are_the_library_code(nb04):
    pairs = {"actions": "actions", "scripted": "scripted", "replay": "replay"}
    assert same_code("04_policy.ipynb", "script.py", pairs) == []
    assert same_code("04_policy.ipynb", "policy.py", {"Action.__post_init__": "Action.__post_init__"}) == []


def test_04_the_brain_is_handed_the_tools_by_name_and_a_tuple_misleads_it(nb04):
    looked_up, tools = nb04["looked_up"], nb04["tools"]
    assert isinstance(tools, types.MappingProxyType)
    assert nb04["support_policy"](looked_up, tools).tool == "check_policy"
    misled = nb04["support_policy"](looked_up, tuple(tools.values()))  # "check_policy" in a tuple of Tools: False
    assert (misled.tool, misled.reasoning) == (None, "I have no rule for a result from look_up_order")


def test_04_the_exercises_check_and_teach(nb04):
    check_1, check_2 = nb04["check_1"], nb04["check_2"]
    assert check_1(nb04["followup_brain"]) == "exercise 1 done: Sorry, B5678 doesn't qualify for a refund."
    assert check_1(nb04["support_policy"]).startswith("exercise 1: not answered yet")
    assert check_1(nb04["cut_too_late"]).startswith(
        "exercise 1: on turn 1, your brain raised StopIteration (next() found nothing")

    def raises(ctx, tools):
        raise KeyError("B5678")
    assert check_1(raises) == "exercise 1: on turn 1, your brain raised KeyError: 'B5678'"
    assert check_1(lambda ctx, tools: {"tool": "look_up_order"}).startswith(
        "exercise 1: on turn 1, your brain handed back {'tool': 'look_up_order'}, not an Action")
    assert check_1(lambda ctx, tools: nb04["Action"](None, reasoning="lost")).startswith(
        "exercise 1: on turn 1, every move should be about B5678")
    answer = "Good news: A1234 qualifies for a refund."
    assert check_2(nb04["predicted_answer"]).startswith("exercise 2 done") and check_2(answer.upper() + "!!")
    assert check_2(None).startswith("exercise 2: not answered yet")
    wrong = check_2("Sorry, A1234 doesn't qualify for a refund.")
    assert wrong.startswith("exercise 2: you predicted") and "Good news" not in wrong


# --- 05: the loop ---------------------------------------------------------------------

# every kind of move a brain can make: good ones, and each mistake the loop turns into a note
MOVES = [
    Action("look_up_order", {"order_id": "A1234"}, "look it up"),
    Action("check_policy", {"order_id": "A1234"}, "check it"),
    Action("final_answer", {"answer": "done"}, "answer"),
    Action("issue_refund", {"order_id": "A1234", "amount": 79}, "a coworker who waits for a human"),
    Action("issue_refund", {"order_id": "A1234", "amount": "79"}, "a waiting coworker's arguments that don't fit"),
    Action("issue_refund", '{"order_id": "A1234", "amount": 79, "amount": 1}', "a waiting call given twice"),
    Action(None, reasoning="the reply was cut off at 200 tokens"),
    Action(None, '{"order_id": "A1234"}', "no move, with arguments it never meant"),
    Action("lookup_order", {"order_id": "A1234"}, "a misspelled coworker"),
    Action("", {"order_id": "A1234"}, "a coworker with no name"),
    Action("look_up_order", '{"order_id": "A12', "broken JSON"),
    Action("look_up_order", "[1, 2]", "JSON that is not an object"),
    Action("look_up_order", '{"order_id": "A1234", "order_id": "B0000"}', "a name given twice"),
    Action("look_up_order", '{"order_id": NaN}', "a number JSON can't hold"),
    Action("look_up_order", "[" * 100000, "nesting no reader can follow"),
    Action("look_up_order", {"order": "A1234"}, "a wrong argument"),
    Action("check_policy", {"order_id": 1234}, "a wrong type"),
    Action("look_up_order", {"order_id": "B0000"}, "a coworker that raises"),
    Action("final_answer", {}, "a final answer with nothing in it"),
    Action("final_answer", {"answer": "error: 404 means the page was not found"}, "an answer that reads like an error"),
]


def both(nb05, brain, budget, task, cancel=None):
    """Every Step of our loop and of the library's, or the exception each raised."""
    tools = nb05["tools"]
    ours = outcome(lambda: list(nb05["Agent"](brain, tools, budget, name="support").steps(task, cancel)))
    theirs = outcome(lambda: list(Agent(brain, tools, budget, name="support").steps(task, cancel)))
    return ours, theirs


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(MOVES), max_size=8), st.integers(0, 6), st.none() | st.integers(1, 12),
       st.booleans())
def test_05_the_rebuilt_loop_writes_the_steps_the_library_writes(nb05, script_moves, budget, cut, cancelled):
    brain, cancel = script.scripted(*script_moves), threading.Event()
    if cancelled:
        cancel.set()
    task = "refund A1234?"
    if cut is not None:  # a notebook to go on with: the library's own run of the script, cut short
        ran = Context((Message(USER, task),))
        with contextlib.suppress(IndexError):  # the script may end before the run does
            for step in Agent(brain, nb05["tools"], 8, name="support").steps(task):
                ran = step.context
        task = Context(ran.messages[:cut])
    ours, theirs = both(nb05, brain, budget, task, cancel)
    assert ours == theirs  # a Step is a tuple: equal when every field is (or both raised alike)
    if ours[0] == "ok":
        last = ours[1][-1]
        assert nb05["Agent"](brain, nb05["tools"], budget, name="support").run(task, cancel) == last.context
        for agent in (nb05["Agent"](brain, nb05["tools"], budget), Agent(brain, nb05["tools"], budget)):
            assert agent.why_stop(last.context, cancel) == last.stop


kinds_of_note = st.builds(Message, st.sampled_from(ROLES), texts,
                          st.none() | st.sampled_from(["final_answer", "look_up_order", "support", "nobody"]),
                          st.none() | st.sampled_from(["issue_refund", ""]), st.none() | st.just("{}"),
                          error=st.booleans())


@given(st.lists(kinds_of_note, min_size=1, max_size=4), st.booleans())
def test_05_the_rebuilt_why_stop_reads_a_notebook_as_the_library_does(nb05, msgs, cancelled):
    cancel = threading.Event()
    if cancelled:
        cancel.set()
    ctx = Context((Message(USER, "refund A1234?"), *msgs))
    ours, theirs = nb05["Agent"](print, nb05["tools"]), Agent(print, nb05["tools"])
    assert ours.why_stop(ctx, cancel) == theirs.why_stop(ctx, cancel)
    assert ours.why_stop(ctx) == theirs.why_stop(ctx)
    assert nb05["_turns"](ctx) == microagent.agent._turns(ctx)


def test_05_the_rebuilt_agent_refuses_what_the_library_refuses(nb05):
    tools, look_up = nb05["tools"], nb05["look_up_order"]
    for args in (("a brain", tools), (print, [look_up.fn]), (print, tools, -1), (print, tools, True),
                 (print, [look_up, look_up]), (print, "look_up_order")):
        assert outcome(nb05["Agent"], *args) == outcome(Agent, *args)
    ours, theirs = nb05["Agent"](print, tools), Agent(print, tools)
    assert outcome(ours.start, Context()) == outcome(theirs.start, Context())
    assert outcome(ours.start, Context())[0] == "TypeError"
    assert ours.start("hi") == theirs.start("hi")
    for brain in (lambda ctx, tools: {"tool": "final_answer"}, lambda ctx, tools: None):  # not an Action
        ours, theirs = both(nb05, brain, 3, "hi")
        assert ours == theirs and ours[0] == "TypeError"


def test_05_the_brain_gets_the_tools_by_name_and_cannot_change_them(nb05):
    seen = []

    def brain(ctx, tools):
        seen.append((type(tools), list(tools), outcome(operator.setitem, tools, "x", None)[0]))
        return Action("final_answer", {"answer": "ok"})
    nb05["Agent"](brain, nb05["tools"]).run("hi")
    Agent(brain, nb05["tools"]).run("hi")
    assert seen[0] == seen[1] == (types.MappingProxyType, [t.name for t in nb05["tools"]], "TypeError")


def test_05_the_rebuilt_loop_is_the_library_code(nb05):
    pairs = {"Agent.__init__": "Agent.__init__", "act": "Agent.act", "decision": "Agent.decision",
             "why_stop": "Agent.why_stop", "Agent.start": "Agent.start", "steps": "Agent.steps", "run": "Agent.run",
             "_turns": "_turns"}
    assert same_code("05_agent.ipynb", "agent.py", pairs) == []
    assert (nb05["DONE"], nb05["PAUSED"], nb05["CANCELLED"], nb05["OUT_OF_STEPS"]) == (
        microagent.DONE, microagent.PAUSED, microagent.CANCELLED, microagent.OUT_OF_STEPS)
    assert nb05["Step"]._fields == microagent.Step._fields
    assert nb05["Step"]._field_defaults == microagent.Step._field_defaults


def test_05_a_stuck_brain_runs_out_of_steps_in_both(nb05):
    ours = nb05["Agent"](nb05["stuck_brain"], nb05["tools"], 4, name="support").run("refund A1234?")
    assert ours == Agent(nb05["stuck_brain"], nb05["tools"], 4, name="support").run("refund A1234?")
    assert ours.last() == Message(ASSISTANT, "out of steps: stopped after 4 turns without an answer", "support")
    # user, then four turns of assistant and tool, then the remark
    assert [m.kind for m in ours] == ["question"] + ["decision", "result"] * 4 + ["remark"]


def test_05_the_exercises_check_and_teach(nb05):
    check_1, check_2 = nb05["check_1"], nb05["check_2"]
    assert check_1(nb05["predicted_ends"]).startswith("exercise 1 done")
    words = [("Done", 5), ("out-of-steps", 4), ("PAUSED.", 4)]
    assert check_1(words).startswith("exercise 1 done")
    assert check_1(None).startswith("exercise 1: not answered yet")
    assert check_1(words[:2] + [("out of steps", 4)]) == (
        "exercise 1: run 3 stops for another reason; ask why_stop's questions in order")
    assert check_1(words[:1] + [("out of steps", 3)] + words[2:]) == (
        "exercise 1: run 2 stops as you say, but its notebook holds another number of notes")
    assert check_1(words[:2]).startswith("exercise 1: write a list of 3 pairs")
    # exercise 2: the budget is counted off the notebook, so the smallest that finishes is 3
    assert check_2(nb05["smallest_budget"]) == "exercise 2 done: max_steps=3"
    assert check_2(None).startswith("exercise 2: not answered yet")
    assert check_2(2) == "exercise 2: with max_steps=2 the run stops out_of_steps: which moves count already?"
    assert check_2(0) == "exercise 2: with max_steps=0 the run stops out_of_steps: which moves count already?"
    assert check_2(4) == "exercise 2: max_steps=4 finishes, and so does a smaller budget"
    for wrong in ("3", 3.0, True, -1):
        assert check_2(wrong).startswith("exercise 2: a budget is a whole number, 0 or more, not")


# --- 06: the refund office ------------------------------------------------------------

SIX = "06_refund_demo.ipynb"


def says_yes(tool_name: str, args: dict) -> bool:
    return True


def says_no(tool_name: str, args: dict) -> bool:
    return False


def test_06_reads_like_the_rebuilding_notebooks():
    # short cells, solutions at the end with no worked answer above them, no `_`, chapters from their modules
    test_a_rebuilding_notebook_reads_in_short_cells_with_its_solutions_at_the_end(SIX)
    test_a_rebuilding_notebook_never_names_a_thing_underscore(SIX)
    test_a_rebuilding_notebook_imports_chapters_from_their_modules(SIX)


def test_06_the_brain_is_the_demos_brain_line_for_line(nb06):
    assert same_code(SIX, "demo.py", {"support_policy": "support_policy"}) == []
    assert nb06["price"] is demo.price  # the price reader, with its guard, is the library's own


@pytest.mark.parametrize("approver", [says_yes, says_no])
@pytest.mark.parametrize("question", [demo.QUESTION, "Where is my refund for Z9999?", "Refund me!"])
def test_06_the_office_built_by_hand_writes_the_demos_notebooks(nb06, approver, question):
    tools = [nb06["look_up_order"], nb06["check_policy"], microagent.gate(nb06["issue_refund"], approver),
             microagent.final_answer]
    ours = Agent(nb06["support_policy"], tools, name="support").run(question)
    theirs = demo.support_agent(approver=approver).run(question)
    assert ours == theirs
    assert story(ours) == story(theirs)
    assert ours.last().kind == "result" and ours.last().name == "final_answer"


def test_06_the_paused_office_built_by_hand_writes_the_demos_notebooks(nb06):
    ours, theirs = nb06["office"], demo.support_agent()
    mine, library = ours.tools["issue_refund"], theirs.tools["issue_refund"]
    paused = ours.run(demo.QUESTION)
    assert paused == theirs.run(demo.QUESTION) == nb06["paused"]
    assert ours.why_stop(paused) == theirs.why_stop(paused) == microagent.PAUSED
    # user, assistant, tool, assistant, tool, assistant (the refund, waiting)
    assert [m.kind for m in paused] == ["question", "decision", "result", "decision", "result", "decision"]
    verdicts = [lambda ctx, tool: microagent.approve(ctx, tool, by="alice"),
                lambda ctx, tool: microagent.approve(ctx, tool, by="alice", args={"order_id": "A1234", "amount": 70}),
                lambda ctx, tool: microagent.deny(ctx, tool, "the customer must return the item first", by="alice")]
    for ruling in verdicts:
        assert ours.run(ruling(paused, mine)) == theirs.run(ruling(paused, library))
    assert ours.run(verdicts[0](paused, mine)) == nb06["done"]
    assert ours.run(verdicts[2](paused, mine)) == nb06["refused"]


def test_06_the_exercises_pass_with_their_worked_answers(nb06):
    assert nb06["check_1"](nb06["small_refunds_only"], nb06["careful_run"]).startswith("exercise 1 done: Sorry")
    assert nb06["check_2"](nb06["customer_hears"], nb06["brain_asked_for"]).startswith("exercise 2 done")


def test_06_the_exercises_wait_for_an_answer(nb06):
    assert nb06["check_1"](nb06["small_refunds_only"], None).startswith("exercise 1: not answered yet")
    assert nb06["check_2"](None, 79).startswith("exercise 2: not answered yet")


def test_06_the_first_check_says_what_is_wrong_with_the_approver_or_the_run(nb06):
    check_1, careful_run = nb06["check_1"], nb06["careful_run"]
    assert check_1(says_yes, careful_run) == "exercise 1: $79 is over the limit"
    assert check_1(says_no, careful_run) == "exercise 1: a $20 refund is fine"
    assert check_1(lambda name, args: args["amount"] < 50, careful_run) == "exercise 1: $50 is the limit, and allowed"
    assert check_1(lambda name, args: args["price"] <= 50, careful_run) == (
        "exercise 1: asked about $20, the approver raised KeyError: 'price'")
    assert check_1(lambda name, args: "yes", careful_run) == "exercise 1: an approver answers True or False, not 'yes'"
    small = nb06["small_refunds_only"]
    assert check_1(small, "Sorry") == (
        "exercise 1: keep the notebook the run hands back (agent.run(QUESTION)) in careful_run")
    assert check_1(small, nb06["yes_run"]) == (
        "exercise 1: the refund in careful_run went through: is your approver at the gate?")


def test_06_the_second_check_reads_words_as_words_and_never_tells_the_answer(nb06):
    check_2, hears = nb06["check_2"], nb06["customer_hears"]
    in_other_punctuation = "good news A1234 qualifies I refunded 70 to your card here in 3 to 5 days"
    assert check_2(in_other_punctuation, 79).startswith("exercise 2 done")
    wrong = check_2(hears, 70)  # the brain's own request stays 79
    assert wrong.startswith("exercise 2: you predicted 70") and "79" not in wrong
    what_was_asked = "Good news, A1234 qualifies. I refunded $79 to your card, here in 3 to 5 days."
    wrong = check_2(what_was_asked, 79)
    assert wrong.startswith("exercise 2: the amount is right, but the customer hears") and "$70" not in wrong
    assert check_2(hears, "79").startswith("exercise 2: brain_asked_for is an amount of dollars, a number")


# --- 08: an agent as a coworker -------------------------------------------------------

def test_08_the_rebuilt_coworker_is_made_as_agent_tool_makes_it(nb08):
    for agent in (nb08["orders"], nb08["billing"], nb08["hurried_billing"]):
        for description in (None, "Knows every order."):
            ours, theirs = nb08["as_coworker"](agent, description), agent_tool(agent, description=description)
            assert made(ours) == made(theirs), (agent.name, description)


class Falls(Exception):
    pass


# the moves of an inner run: answers, each mistake that becomes a note, a call that waits for a human
INNER = [Action("look_up_order", {"order_id": "A1234"}, "look it up"),
         Action("refund_rules", {"order_id": "A1234"}, "the rules"),
         Action("refund_rules", {"order_id": "B5678"}, "rules that raise"),
         Action("final_answer", {"answer": "A1234: up to $79 back"}, "report back"),
         Action("final_answer", {}, "an answer with nothing in it"),
         Action("refund", {"order_id": "A1234", "amount": 79}, "a call that waits for a human"),
         Action("nobody", {}, "a coworker who isn't there"),
         Action(None, reasoning="the reply was cut off")]
FALLS = [None, Falls("the billing system is down"), KeyError("B5678"), Falls(""), Mute()]


def falling(moves, fall_at: int, error):
    """A scripted brain that raises `error` when `fall_at` moves are made (and when its script is over)."""
    play = script.scripted(*moves)

    def brain(ctx, tools):
        if error is not None and sum(m.kind in script.MOVES for m in ctx) == fall_at:
            raise error
        return play(ctx, tools)
    return brain


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(INNER), max_size=5), st.integers(0, 5), st.sampled_from(FALLS),
       st.integers(0, 4), st.sampled_from(['{"request": "What can we refund for A1234?"}', '{"request": ""}',
                                           '{"request": 3}', "{}", '{"request": "x", "more": 1}', '{"request']))
def test_08_the_rebuilt_coworker_writes_the_note_agent_tool_writes(nb08, moves, fall_at, error, budget, request):
    # an inner run that answers, runs out of steps, pauses for a human, or whose brain raises (an exception
    # that can't even say what it is, too); and requests that don't fit
    tools = [nb08["look_up_order"], nb08["refund_rules"], as_tool(refund, needs_approval=True),
             microagent.final_answer]
    inner = Agent(falling(moves, fall_at, error), tools, budget, name="billing")
    ours = nb08["as_coworker"](inner, "Knows the refund rules.").run(request)
    assert ours == agent_tool(inner, description="Knows the refund rules.").run(request)
    if ours.kind == "result" and not ours.error:  # an answer: the whole inner run comes with it
        assert ours.notes[-1].name == "final_answer" and ours.notes[0].content == json.loads(request)["request"]


def falls_at_depth(depth: int, pass_it_on):
    """pass_it_on, falling over (without a word) in the run `depth` agents deep."""
    def brain(ctx, tools):
        question = next(m for m in ctx if m.kind == "question")
        if question.content.count("again") == depth:
            raise Mute()
        if ctx.last().kind == "question":
            return Action("helper", {"request": ctx.last().content + " again"}, "ask the helper")
        return pass_it_on(ctx, tools)
    return brain


@pytest.mark.parametrize("max_depth", [1, 2, 3, 4])
@pytest.mark.parametrize("falls", [None, 1, 2, 3])
def test_08_an_agent_that_asks_itself_stops_at_the_same_depth_in_both(nb08, max_depth, falls):
    brain = nb08["pass_it_on"] if falls is None else falls_at_depth(falls, nb08["pass_it_on"])
    coworkers = (lambda agent: nb08["as_coworker"](agent, max_depth=max_depth),
                 lambda agent: agent_tool(agent, max_depth=max_depth))
    ours, theirs = (nb08["its_own_coworker"](brain, coworker).run("What is 2 + 2?") for coworker in coworkers)
    assert ours == theirs
    # the run we start, and one more for each ask allowed, until one falls over or is refused
    runs = 1 + (max_depth if falls is None else min(falls, max_depth))
    assert nb08["runs_in"](ours) == runs


def test_08_the_exercises_check_and_teach(nb08):
    check_1, check_2 = nb08["check_1"], nb08["check_2"]
    assert check_1(nb08["desks"]).startswith("exercise 1 done: [('orders', ['look_up_order', 'final_answer'])")
    assert check_1(lambda ctx: []).startswith("exercise 1: not answered yet")
    by_who_wrote = lambda ctx: [(m.name, [n.name for n in m.notes if n.kind == "decision"])  # noqa: E731
                                for m in ctx if m.kind == "result" and m.notes]
    assert check_1(by_who_wrote).startswith("exercise 1: a decision's name is who wrote it")
    answers_only = lambda ctx: [(m.name, [n.tool for n in m.notes if n.kind == "decision"])  # noqa: E731
                                for m in ctx if m.kind == "result" and m.notes and not m.error]
    wrong = check_1(answers_only)
    assert wrong.startswith("exercise 1: right on run, but on shaky_run") and "'refund_rules']" not in wrong
    every_result = lambda ctx: [(m.name, []) for m in ctx if m.kind == "result"]  # noqa: E731
    assert check_1(every_result).startswith("exercise 1: the manager asked a specialist 3 times, and desks finds 4")
    assert check_1(lambda ctx: 1 / 0) == (
        "exercise 1: desks(run) should give a list of (name, tools) pairs: ZeroDivisionError: division by zero")
    assert check_2(nb08["runs_at_1"], nb08["says_at_1"]).startswith("exercise 2 done: the helper says:")
    assert check_2(None, 2).startswith("exercise 2: not answered yet")
    assert check_2(1, 2).startswith("exercise 2: more runs than 1")
    assert check_2(3, 2).startswith("exercise 2: fewer runs than 3")
    assert check_2(2, 1).startswith("exercise 2: the runs are right, but 'the helper says:' comes another number")
    assert check_2("2", 2) == "exercise 2: write each prediction as a whole number, like 5"


# --- 09: memory as a view -------------------------------------------------------------

def pieces_of_a_run(n: int) -> dict:
    """The notes a run writes, a few at a time: each piece is a turn, a mistake, or a new question."""
    call = Message(ASSISTANT, "one more", "clerk", "step", json.dumps({"n": n}))
    return {"turn": (call, Message(TOOL, str(n + 1), "step")),
            "failed turn": (call, Message(TOOL, "error: step failed: Busy", "step", error=True)),
            "approved turn": (call, Message(USER, "approved", "Dana", "step", call.args), Message(TOOL, "2", "step")),
            "denied turn": (call, Message(USER, "no", "Dana", "step"), Message(TOOL, "error: denied", "step",
                                                                             error=True)),
            "no move": (Message(ASSISTANT, "cut off", "clerk", error=True),),
            "remark": (Message(ASSISTANT, "a note to self", "clerk"),),
            "question": (Message(USER, f"now count to {n}"),),
            "waiting": (call,)}


@st.composite
def runs(draw) -> Context:
    notes = (Message(SYSTEM, "You count."),) if draw(st.booleans()) else ()
    notes += (Message(USER, "Count, please."),)
    for n, piece in enumerate(draw(st.lists(st.sampled_from(list(pieces_of_a_run(0))), max_size=25))):
        notes += pieces_of_a_run(n)[piece]
    return Context(notes)


@settings(max_examples=300, deadline=None)
@given(st.one_of(runs(), st.lists(leaf, max_size=12).map(lambda msgs: Context((Message(USER, "hi"), *msgs)))),
       st.integers(1, 12))
def test_09_the_rebuilt_compact_makes_the_library_view(nb09, ctx, keep):
    # runs as an agent writes them, and any notes at all after a question
    ours = nb09["compact"](ctx, keep)
    assert ours == memory.compact(ctx, keep, summarise=nb09["tally"])
    assert nb09["compact"](ours, keep) == ours  # a view of a view is the same view
    summaries = [m for m in ours if m.name == "memory"]
    assert all(m.kind == "remark" and m.notes == () for m in summaries)


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 12), st.integers(1, 6), st.booleans())
def test_09_a_remembering_clerk_writes_the_library_notebook(nb09, goal, keep, asked_again):
    tools = [nb09["step"], microagent.final_answer]
    clerks = (Agent(nb09["remembering"](nb09["asked_counter"], keep), tools, 30, name="clerk"),
              Agent(memory.remembering(nb09["asked_counter"], keep, summarise=nb09["tally"]), tools, 30,
                    name="clerk"))
    written = []
    for clerk in clerks:
        ctx = clerk.run(nb09["job"](f"Count to {goal}, please."))
        if asked_again:  # a conversation: the latest question must stay in view
            ctx = clerk.run(ctx.add(Message(USER, f"Now count to {goal + 3}.")))
        written.append(ctx)
    assert written[0] == written[1]
    assert written[0].last().content == f"I counted to {goal + 3 if asked_again else goal}."


def test_09_a_brain_writes_the_same_summary_and_says_so_when_it_gives_none(nb09):
    notes = nb09["full"].messages[2:40]
    assert nb09["summary_by"](nb09["scribe"])(notes) == memory.summary_by(nb09["scribe"])(notes)

    def dawdles(ctx, tools):
        return Action(None, reasoning="thinking it over")
    ours, theirs = nb09["summary_by"](dawdles)(notes), memory.summary_by(dawdles)(notes)
    # the stand-in words differ, as 09 says: ours are tally's, the library's plain_summary's
    assert ours == "(the summariser gave no answer) " + nb09["tally"](notes)
    assert theirs == "(the summariser gave no answer) " + memory.plain_summary(notes)


def test_09_the_exercises_check_and_teach(nb09):
    check_1, check_2 = nb09["check_1"], nb09["check_2"]
    assert check_1(nb09["last_three"]) == "exercise 1 done: the last results: 47, 48, 49"
    assert check_1(lambda notes: "Last results -- 47; 48; 49!").startswith("exercise 1 done")
    assert check_1(lambda notes: "").startswith("exercise 1: not answered yet")
    def sent(notes):  # what the clerk asked for, not what it heard
        return ", ".join([str(json.loads(m.args)["n"]) for m in notes if m.kind == "decision"][-3:])
    assert check_1(sent).startswith("exercise 1: those are the numbers the clerk sent")
    newest_first = lambda notes: ", ".join([m.content for m in notes if m.kind == "result"][-3:][::-1])  # noqa: E731
    wrong = check_1(newest_first)
    assert wrong.startswith("exercise 1: the summary says '49, 48, 47'; it should quote three results, oldest")
    assert check_1(lambda notes: "50, 51, 52").startswith("exercise 1: the summary says '50, 51, 52'; quote the last")
    assert check_1(lambda notes: notes[99].content).startswith("exercise 1: last_three raised IndexError")
    assert check_1(lambda notes: 49) == "exercise 1: a summariser hands back text, not int"
    assert check_2(nb09["last_view"], nb09["kept"]) == (
        "exercise 2 done: the brain was last shown 7 notes; the notebook holds 104")
    assert check_2(None, 104).startswith("exercise 2: not answered yet")
    assert check_2(6, 104).startswith("exercise 2: more than 6 notes in the last view")
    assert check_2(8, 104).startswith("exercise 2: fewer than 8 notes in the last view")
    wrong = check_2(7, 9)
    assert wrong.startswith("exercise 2: the view is right, but the notebook does not hold 9") and "104" not in wrong
    assert check_2(7.0, 104) == "exercise 2: write each prediction as a whole number, like 5"


# --- 10: recovering from errors -------------------------------------------------------

def flaky(failures: int, error: Exception, answer: str = "3 headphones in stock") -> Tool:
    """A coworker that raises `error` on its first `failures` calls, then answers."""
    calls = []

    def check_stock(item: str) -> str:
        """How many of an item are in the warehouse."""
        calls.append(item)
        if len(calls) <= failures:
            raise error
        return answer
    return as_tool(check_stock)


SPEAKING = [ConnectionError("the stock service closed the connection"), KeyError("headphones"), ValueError(""),
            TimeoutError("the stock service is busy, try again")]


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 5), st.integers(1, 4), st.sampled_from(SPEAKING),
       st.sampled_from(['{"item": "headphones"}', '{"item": 3}', "{}"]))
def test_10_the_rebuilt_retrying_writes_the_library_notes(nb10, failures, attempts, error, call):
    ours = nb10["retrying"](flaky(failures, error), attempts)
    theirs = retry.retrying(flaky(failures, error), attempts)
    assert made(ours) == made(theirs)
    assert ours.run(call) == theirs.run(call)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2), st.sampled_from(SPEAKING + [RuntimeError("gateway said 401 for key sk-1")]))
def test_10_the_rebuilt_hiding_writes_the_library_notes_and_reports(nb10, failures, error):
    told = ([], [])
    ours = nb10["hiding"](flaky(failures, error), told[0].append)
    theirs = retry.hiding(flaky(failures, error), told[1].append)
    assert made(ours) == made(theirs)
    for call in ('{"item": "headphones"}', '{"item": 3}'):
        assert ours.run(call) == theirs.run(call)
    assert told[0] == told[1] == ([error] if failures else [])


@pytest.mark.parametrize("failures", [0, 1, 2, 99])
def test_10_both_stacks_of_ours_write_what_the_library_stacks_write(nb10, failures):
    secret = RuntimeError("gateway said 401 for key sk-1")
    for stack in (lambda hide, retried, tool, report: hide(retried(tool), report),
                  lambda hide, retried, tool, report: retried(hide(tool, report))):
        told = ([], [])
        ours = stack(nb10["hiding"], nb10["retrying"], flaky(failures, secret), told[0].append)
        theirs = stack(retry.hiding, retry.retrying, flaky(failures, secret), told[1].append)
        note = ours.run('{"item": "headphones"}')
        assert note == theirs.run('{"item": "headphones"}')
        assert [str(e) for e in told[0]] == [str(e) for e in told[1]]


def test_10_the_exercises_check_and_teach(nb10):
    check_1, check_2, stock_brain = nb10["check_1"], nb10["check_2"], nb10["stock_brain"]
    sorry = nb10["SORRY"]
    assert check_1(nb10["honest_brain"]) == "exercise 1 done: " + sorry
    assert check_1(stock_brain).startswith("exercise 1: not answered yet")

    def honest_in_other_words(ctx, tools):
        if ctx.last().error:
            return Action("final_answer", {"answer": "SORRY! I can\u2019t check the warehouse right now... "
                                                     "We'll email you"})
        return stock_brain(ctx, tools)
    assert check_1(honest_in_other_words).startswith("exercise 1 done")

    def vague(ctx, tools):
        if ctx.last().error:
            return Action("final_answer", {"answer": "Something went wrong."})
        return stock_brain(ctx, tools)
    wrong = check_1(vague)
    assert wrong.startswith("exercise 1: when the check failed, say the sentence asked for") and sorry not in wrong

    def always_sorry(ctx, tools):
        if ctx.last().kind == "question":
            return stock_brain(ctx, tools)
        return Action("final_answer", {"answer": sorry})
    assert check_1(always_sorry).startswith("exercise 1: when the check worked (on its second try), pass on")
    assert check_1(lambda ctx, tools: Action("final_answer", {"answer": sorry})).startswith(
        "exercise 1: the brain never heard the stock service fail")
    assert check_1(lambda ctx, tools: Action("check_stock", {"item": "headphones"})).startswith(
        "exercise 1: the run should end with an answer to the customer; it stopped: out_of_steps")
    assert check_1(lambda ctx, tools: 1 / 0).startswith(
        "exercise 1: the run raised ZeroDivisionError: division by zero, on a notebook that ends in a question")
    leaks, reports = nb10["leaks"], nb10["reports"]
    assert check_2(leaks, reports).startswith("exercise 2 done:\nhiding(retrying(tool)): the brain reads")
    assert check_2({k: None for k in leaks}, reports).startswith("exercise 2: not answered yet")
    assert check_2({k: True for k in leaks}, reports).startswith("exercise 2: not that for hiding(retrying(tool))")
    wrong = check_2(leaks, {k: 3 for k in reports})
    assert wrong == "exercise 2: not that many reports for hiding(retrying(tool)): which wrapper sees each try?"
    assert check_2(leaks, {k: "1" for k in reports}).startswith("exercise 2: write True or False in leaks")
    assert check_2({"hiding": False}, reports).startswith("exercise 2: keep both dicts as they were")
