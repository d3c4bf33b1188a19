"""Human approval that can wait: the run pauses, the process ends, a human decides later.

    python examples/pause_resume.py start run.json
    python examples/pause_resume.py approve run.json --by alice
    python examples/pause_resume.py approve run.json --by alice --args '{"order_id": "A1234", "amount": 70}'
    python examples/pause_resume.py deny run.json --by alice --reason "send the headphones back first"

`start` runs the refund office until the brain asks for the refund. The refund
needs a human's approval, so the run pauses before it: the notebook is saved to
the file, and the process ends. `approve` or `deny` is a new process (next
week, on another machine): it loads the notebook, checks it, writes the human's
verdict into it, carries the verdict out, and lets the agent finish. The
finished notebook goes back into the same file, and its story is printed.

The file is the whole state of the run, so two people deciding at the same
moment must not both go on with it: `approve` and `deny` hold a lock on the
file while they decide and run, and the second one waits, then finds the
verdict in and nothing waiting.

The one rule: a refund approved once is paid once, whenever the process dies.
The verdict is saved before the refund runs, and every step after it, so
`approve` or `deny` again after a crash goes on with the verdict already given
(carrying it out, if that was not saved) and asks for no new one. A crash while
the refund is paid (the money gone, its result not saved) leaves the verdict to
be carried out again, so the refund is keyed by its call: the ledger beside the
file (`run.json.ledger`, a line per refund paid) remembers each call it paid,
and a second carry-out of the same call hands back the first receipt instead of
paying again. A call is named by the notebook up to its decision (hashed), so a
new `start` in the same file, making the very same moves, is the same call too.
(A copy of the file under another name has a ledger of its own: resuming it
pays again. Keep one file.)

Every refusal is one line on stderr, never a traceback. The exit code is 0 when
done, 1 when refused (a file that is not a sound paused run, nothing waiting,
arguments that don't fit), 2 for a bad command line (`--args` that is not one
JSON object, each key once).

What it leaves out: a real bank. The ledger is a local file, written by one
process at a time (the lock); a payment service keys its calls the same way.
"""

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import pathlib
import sys

from microagent import PAUSED, Action, Context, read_json
from microagent.approval import settle, verdict, waiting
from microagent.demo import QUESTION, support_agent, support_policy
from microagent.invariants import check
from microagent.saving import from_json, to_json
from microagent.tool import Tool
from microagent.trace import story


def policy(ctx: Context, tools) -> Action:
    """The demo's support brain, and what to tell the customer once a human has ruled."""
    # notes found by kind and name, never by position: a verdict sits between a decision
    # and its result, and a reply that held no move may come after the result
    last = next(m for m in reversed(ctx.messages) if m.kind in ("question", "result"))
    if last.name == "issue_refund":
        # this call's verdict, if a human ruled: the newest decision or verdict
        ruled = next(m for m in reversed(ctx.messages) if m.kind in ("decision", "verdict"))
        if ruled.kind == "verdict" and ruled.args is None:  # a no: the verdict says why
            said = f"Sorry, I can't refund this yet: {ruled.content}."
            return Action("final_answer", {"answer": said},
                          "the refund was denied, so tell the customer why")
        if not last.error:
            said = f"Done: {last.content}, there in 3 to 5 days."
            why = "the refund went through, so tell the customer what was refunded"
            return Action("final_answer", {"answer": said}, why)
    return support_policy(ctx, tools)


agent = support_agent(policy)  # no approver on the spot: the refund waits for a verdict
refund = agent.tools["issue_refund"]


def start(path: pathlib.Path) -> None:
    """Run until the refund waits for a human; save the paused run; say what waits."""
    ctx = agent.run(QUESTION)
    with _lock(path):  # not while someone decides on the run already in the file
        _save(path, ctx)
    asked = waiting(ctx)
    print(story(ctx))
    print(f"\nwaiting for a human: {asked.tool} {asked.args}")
    print(f"saved to {path.name}; decide with: approve {path.name} [--by NAME] "
          f"[--args JSON] or deny {path.name} --reason TEXT")


def finish(path: pathlib.Path, options: argparse.Namespace) -> None:
    """Load the paused run, write the verdict, carry it out, finish; tell the story."""
    # one decision at a time: without the lock, two approvals at the same moment would
    # each load the paused run and each pay; with it, the second loads the finished one
    with _lock(path):
        ctx = _load(path)
        if waiting(ctx) is not None:
            ctx = verdict(ctx, refund, options.command == "approve", by=options.by,
                          args=options.args, reason=options.reason)
            _save(path, ctx)  # before the refund runs: after a crash, no one asks again
        elif not _ruled_and_unfinished(ctx):
            raise ValueError("nothing in this notebook is waiting for approval")
        ctx = settle(ctx, paying(path, ctx))  # (if a run died, perhaps carried out)
        _save(path, ctx)
        for step in agent.steps(ctx):
            _save(path, step.context)  # every step as it is taken: what ran stays run
        ctx = step.context
    print(story(ctx))


def _ruled_and_unfinished(ctx: Context) -> bool:
    """Did a run that died leave this notebook: a verdict given, and the run not over?"""
    ruled = any(m.kind == "verdict" for m in ctx)
    return ruled and agent.why_stop(ctx) in (None, PAUSED)


def paying(path: pathlib.Path, ctx: Context) -> Tool:
    """The refund that carries out the verdict `ctx` ends with: paid once per call."""
    decision = len(ctx) - 2  # the verdict's decision: the call it rules on
    digest = hashlib.sha256(to_json(Context(ctx[:decision + 1])).encode()).hexdigest()
    call, ledger = f"{decision}:{digest[:16]}", path.with_name(path.name + ".ledger")

    def issue_refund(order_id: str, amount: float) -> str:
        return pay(ledger, call, order_id, amount)
    return Tool(refund.name, refund.description, issue_refund, schema=refund.schema)


def pay(ledger: pathlib.Path, call: str, order_id: str, amount: float) -> str:
    """Pay a refund for `call` once: a line in the ledger, and after that its receipt."""
    paid = ledger.read_text(encoding="utf-8").splitlines() if ledger.exists() else []
    for line in map(json.loads, paid):
        if line["call"] == call:  # paid already, by a process that died before saving it
            return line["receipt"]
    receipt = refund(order_id=order_id, amount=amount)  # the demo's words for it
    entry = {"call": call, "order_id": order_id, "amount": amount, "receipt": receipt}
    with ledger.open("a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")  # ASCII, one line: \u2028 and the like escaped
        f.flush()
        os.fsync(f.fileno())
    return receipt


@contextlib.contextmanager
def _lock(path: pathlib.Path):
    """Hold the run's lock file (beside it) while the with-block runs; others wait."""
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # let go when it closes, even if this dies
        yield


def _load(path: pathlib.Path) -> Context:
    """The run saved in the file, checked: it may have been edited, or be no run."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"can't read {path}: {e.strerror or e}") from None
    return check(from_json(text))


def _save(path: pathlib.Path, ctx: Context) -> None:
    """Write the notebook whole or not at all: a new file, renamed over the old one."""
    new = path.with_name(path.name + ".new")
    new.write_text(to_json(ctx), encoding="utf-8")
    os.replace(new, path)


def _edited(text: str) -> dict:
    """The edited arguments of --args: one JSON object, read strictly (each key once)."""
    try:
        args = read_json(text)
    except ValueError as e:  # a key twice, absurd nesting, NaN: not what was shown
        raise argparse.ArgumentTypeError(str(e)) from None
    if not isinstance(args, dict):
        raise argparse.ArgumentTypeError('give one JSON object: '
                                         '{"order_id": ..., "amount": ...}')
    return args


def main(argv: list[str] | None = None) -> int:
    """Run one command; exit code 0 when done, 1 when refused, 2: a bad command line."""
    parser = argparse.ArgumentParser(prog="pause_resume.py",
                                     description=__doc__.splitlines()[0])
    parser.set_defaults(args=None, reason="")  # for the commands that don't take them
    commands = parser.add_subparsers(dest="command", required=True)
    begin = commands.add_parser("start", help="run until the refund waits for a human")
    begin.add_argument("file")
    yes = commands.add_parser("approve", help="approve the refund, finish the run")
    yes.add_argument("file")
    yes.add_argument("--by", default="a human", help="who approves")
    yes.add_argument("--args", type=_edited, action="append",
                     help="edited arguments, as a JSON object")
    no = commands.add_parser("deny", help="deny the refund, finish the run")
    no.add_argument("file")
    no.add_argument("--by", default="a human", help="who denies")
    no.add_argument("--reason", required=True, help="why: the brain reads it")
    options = parser.parse_args(argv)
    if options.args is not None:  # --args twice would show one amount and pay the other
        if len(options.args) > 1:
            parser.error("argument --args: given twice; give the edited arguments once")
        options.args = options.args[0]
    path = pathlib.Path(options.file)
    try:
        if options.command == "start":
            start(path)
        else:
            finish(path, options)
    except (OSError, ValueError) as e:  # a file that is no run, a verdict that can't be
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
