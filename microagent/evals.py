"""Evals: is the agent any good? Run it over a set of cases and grade each notebook.

A Case is a question and what a good run shows, in its answer and its working.
`evaluate(agent, cases, repeat)` runs each case `repeat` times, playing the case's
human at each pause, and grades the notebook, which is the whole trajectory: no
tracing needed. `table` shows the results at a glance.

The one rule: a grade is read off the notebook alone. A brain that raises fails its
case, the error written down, and the evaluation goes on. It leaves out a model as
the grader, scores between pass and fail, running cases at the same time, and
saving results.
"""

import itertools
from dataclasses import dataclass

from microagent.agent import DONE, PAUSED, Agent
from microagent.approval import approve, deny, waiting
from microagent.context import Context
from microagent.tool import said_by


@dataclass(frozen=True)
class Case:
    """A question, and what a good run shows: in its answer and in its working."""

    question: str
    says: tuple[str, ...] = ()        # words the answer must hold (any case: "$79")
    calls: tuple[str, ...] = ()       # tools the run must call ...
    ordered: bool = False             # ... in this order (others may come between)
    never: tuple[str, ...] = ()       # tools the run must never call
    asks_first: tuple[str, ...] = ()  # tools that may run only after a verdict's yes
                                      # (approval.gate asks, but writes no verdict)
    yes: bool = True                  # what the human says when the run waits for one
    name: str = ""                    # a short name for the table ("": the question)

    def __post_init__(self):
        if not (isinstance(self.question, str) and self.question.strip()):
            raise ValueError(f"a case needs a question, some words to ask the agent, "
                             f"not {self.question!r}")
        for field in ("says", "calls", "never", "asks_first"):
            value = getattr(self, field)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise TypeError(f"a case's {field} is a tuple of strings, like "
                                f"({value!r},), not {value!r}")
            object.__setattr__(self, field, tuple(value))  # a list becomes a tuple
        if type(self.ordered) is not bool or type(self.yes) is not bool:  # "no" is truthy
            raise TypeError("a case's ordered and yes are True or False")
        if both := set(self.calls) & set(self.never):
            raise ValueError(f"no run can both call and never call {', '.join(both)}")
        if not self.name:
            object.__setattr__(self, "name", self.question[:30])


@dataclass(frozen=True)
class Trial:
    """One run of one case: which attempt it was, its notebook, and what was wrong."""

    case: Case
    attempt: int                 # 1, 2, ... up to the repeat count
    ctx: Context
    failures: tuple[str, ...]    # what the grade found wrong; () is a pass

    @property
    def passed(self) -> bool:
        return not self.failures


def grade(case: Case, agent: Agent, ctx: Context) -> tuple[str, ...]:
    """What is wrong with a run of `case`, read off its notebook; () if nothing.

    >>> from microagent import Agent, Message
    >>> from microagent.tool import final_answer
    >>> agent = Agent(lambda ctx, tools: None, [final_answer])  # only why_stop is asked
    >>> answer = Message("assistant", "", "me", "final_answer", '{"answer": "$79"}')
    >>> ctx = Context((Message("user", "Refund A1234?"), answer,
    ...                Message("tool", "$79", "final_answer")))
    >>> grade(Case("Refund A1234?", says=("$79",), calls=("issue_refund",)), agent, ctx)
    ('issue_refund was never called',)
    """
    problems, stop = [], agent.why_stop(ctx)
    if stop != DONE:
        problems.append(f"it gave no answer ({stop or 'still going'})")
    else:
        answer = ctx.last().content
        problems += [f"the answer does not say {w!r}" for w in case.says
                     if w.lower() not in answer.lower()]
    called = [m.tool for m in ctx if m.kind == "decision"]
    missing = [f"{t} was never called" for t in case.calls if t not in called]
    problems += missing
    # subtle: `t in rest` reads the iterator up to the first t, so the next name is
    # looked for only among the calls after it: all() holds when they come in order
    rest = iter(called)
    if case.ordered and not missing and not all(t in rest for t in case.calls):
        problems.append(f"the calls were {', '.join(called)}, not in the order "
                        f"{', '.join(case.calls)}")
    problems += [f"{t} was called" for t in case.never if t in called]
    for before, note in itertools.pairwise(ctx.messages):
        if note.kind == "result" and not note.error and note.name in case.asks_first \
                and before.kind != "verdict":
            problems.append(f"{note.name} ran with no human's yes just before it")
    return tuple(problems)


def attempt(agent: Agent, case: Case) -> tuple[Context, str | None]:
    """Run `case`, its human ruling at each pause: the notebook, and the error if any."""
    ctx = agent.start(case.question)
    try:
        while True:
            for step in agent.steps(ctx):
                ctx = step.context
            if step.stop != PAUSED:
                return ctx, None
            tool = agent.tools[waiting(ctx).tool]
            ctx = approve(ctx, tool) if case.yes else deny(ctx, tool, "not this time")
    except Exception as e:  # the brain failed: the case fails, the evaluation goes on
        return ctx, f"the run raised {type(e).__name__}: {said_by(e)}"


def evaluate(agent: Agent, cases: list[Case], repeat: int = 1) -> tuple[Trial, ...]:
    """Run each case `repeat` times (all the cases, then all again) and grade each run."""
    if not isinstance(agent, Agent):
        raise TypeError(f"evaluate runs an Agent, not {agent!r}")
    if not (cases and all(isinstance(c, Case) for c in cases)):
        raise TypeError("evaluate takes a list of Cases: [Case('a question', ...), ...]")
    if not (type(repeat) is int and repeat >= 1):  # (why type(): see agent.py)
        raise ValueError(f"repeat is how many times to run each case: a whole number "
                         f"from 1 up, not {repeat!r}")
    if len({c.name for c in cases}) != len(cases):
        raise ValueError("two cases share a name: give each its own, Case(..., name=...)")
    for case in cases:
        named = case.calls + case.never + case.asks_first
        if unknown := [t for t in named if t not in agent.tools]:
            raise ValueError(f"the case {case.name!r} names {', '.join(unknown)}, and "
                             f"the agent's tools are {', '.join(agent.tools)}")
    trials = []
    for n in range(1, repeat + 1):
        for case in cases:
            ctx, error = attempt(agent, case)
            failures = (error,) if error else grade(case, agent, ctx)
            trials.append(Trial(case, n, ctx, failures))
    return tuple(trials)


def pass_rates(trials: tuple[Trial, ...]) -> list[float]:
    """The share of cases passed on each attempt: one pass rate per repeat.

    >>> c = Case("Hi?")
    >>> pass_rates((Trial(c, 1, Context(), ()), Trial(c, 2, Context(), ("no",))))
    [1.0, 0.0]
    """
    attempts = sorted({t.attempt for t in trials})
    return [sum(t.passed for t in trials if t.attempt == n)
            / sum(t.attempt == n for t in trials) for n in attempts]


def table(results: dict[str, tuple[Trial, ...]]) -> str:
    """A table to read at a glance: a row per case, a column per brain, its passes.

    >>> c = Case("Hi?", name="hi")
    >>> print(table({"rules": (Trial(c, 1, Context(), ()),),
    ...              "model": (Trial(c, 1, Context(), ("no",)),)}))
                        rules  model
    hi                    1/1    0/1
    pass rate            100%     0%
    lowest-highest  100%-100%  0%-0%
    """
    if not (isinstance(results, dict) and results and all(results.values())):
        raise ValueError("table takes {a brain's name: its trials from evaluate}, "
                         "each with one trial or more")
    names = list(dict.fromkeys(t.case.name for ts in results.values() for t in ts))
    rows = [["", *results]]
    for name in names:
        rows.append([name] + [f"{sum(t.passed for t in ts if t.case.name == name)}/"
                              f"{sum(t.case.name == name for t in ts)}"
                              for ts in results.values()])
    rates = [pass_rates(ts) for ts in results.values()]
    rows.append(["pass rate"] + [f"{sum(r) / len(r):.0%}" for r in rates])
    rows.append(["lowest-highest"] + [f"{min(r):.0%}-{max(r):.0%}" for r in rates])
    widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
    return "\n".join(row[0].ljust(widths[0]) + "".join(
        cell.rjust(w + 2) for cell, w in zip(row[1:], widths[1:], strict=True))
        for row in rows)
