"""Human approval that can wait: the run pauses, the process exits, a human decides later.

    python examples/pause_resume.py start run.json
    python examples/pause_resume.py approve run.json --by alice
    python examples/pause_resume.py approve run.json --by alice --args '{"order_id": "A1234", "amount": 70}'
    python examples/pause_resume.py deny run.json --by alice --reason "send the headphones back first"

`start` runs the refund office until the brain asks for the refund. The refund
needs a human's approval, so the run pauses before it: the notebook is saved to
the file, and the process ends. `approve` or `deny` is a new process (next
week, on another machine): it loads the notebook, checks it, writes the
human's verdict into it, and lets the agent finish. The finished notebook goes
back into the same file, and its story is printed.

Nothing else is kept anywhere: the file is the whole state of the run. So two
people deciding at the same moment must not both resume it: `approve` and `deny`
hold a lock on the file while they decide and run, and the second one waits,
then finds the verdict in and nothing waiting. The verdict is saved before the
run goes on, and then every step: if the run fails half way, `approve` or
`deny` again carries out the verdict already given and asks for no new one, and
a tool that ran is never run again. (A copy of the file is another run:
resuming a copy runs the approved tool again. Keep one file.)
"""

import argparse
import contextlib
import dataclasses
import fcntl
import json
import os
import pathlib
import sys

from microagent import Action, Agent, Context, approve, deny, final_answer, story
from microagent.demo import QUESTION, check_policy, issue_refund, look_up_order, support_policy
from microagent.invariants import check

# the demo's refund coworker, but this one waits for a human instead of asking on the spot
refund = dataclasses.replace(issue_refund, needs_approval=True)


def policy(ctx: Context, tools) -> Action:
    """The demo's support brain, plus what to tell the customer once a human has ruled."""
    last = ctx.last()
    denied = last.name == refund.name and last.error and ctx[-2].is_verdict and ctx[-2].args is None
    if denied:
        reason = ctx[-2].content  # the human's reason, in their verdict note
        return Action("final_answer", {"answer": f"Sorry, I can't refund this yet: {reason}."},
                      "the refund was denied, so tell the customer why")
    if last.name == refund.name and not last.error:
        return Action("final_answer", {"answer": f"Done: {last.content}, there in 3 to 5 days."},
                      "the refund went through, so tell the customer what was refunded")
    return support_policy(ctx, tools)


agent = Agent(policy, [look_up_order, check_policy, refund, final_answer], name="support")


def start(path: pathlib.Path) -> None:
    """Run until the refund waits for a human; save the paused notebook; say what waits."""
    ctx = agent.run(QUESTION).context
    with _lock(path):  # not while someone decides on the run already in the file
        _save(path, ctx)
    print(story(ctx))
    print(f"\nwaiting for a human: {ctx.pending.tool} {ctx.pending.args}")
    print(f"saved to {path.name}; decide with: approve {path.name} [--by NAME] [--args JSON]"
          f" or deny {path.name} --reason TEXT")


def finish(path: pathlib.Path, options: argparse.Namespace) -> None:
    """Load the paused notebook, write the verdict into it, let the agent finish, save it, tell the story."""
    # subtle: one decision at a time. Without the lock, two approvals at the same moment
    # would each load the paused run and each pay; with it, the second loads the finished one.
    with _lock(path):
        ctx = check(Context.from_json(path.read_text(encoding="utf-8")))  # the file may have been edited
        if not ctx.last().is_verdict:  # (one is there if a run failed after it: it is carried out, not asked again)
            if options.command == "approve":
                args = None if options.args is None else _parse(options.args)
                ctx = approve(ctx, by=options.by, args=args, tool=refund)
            else:
                ctx = deny(ctx, options.reason, by=options.by, tool=refund)
            _save(path, ctx)  # the verdict first: should the run fail later, the human is not asked again
        for step in agent.steps(context=ctx):
            _save(path, step.context)  # and every step as it is taken, so a tool that ran is never run again
        ctx = step.context
    print(story(ctx))


@contextlib.contextmanager
def _lock(path: pathlib.Path):
    """Hold the run's lock file (beside it) for as long as the with-block runs; others wait."""
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even if this process dies
        yield


def _save(path: pathlib.Path, ctx: Context) -> None:
    """Write the notebook whole or not at all: a new file, then renamed over the old one."""
    new = path.with_name(path.name + ".new")
    new.write_text(ctx.to_json(), encoding="utf-8")
    os.replace(new, path)


def _parse(text: str) -> dict:
    """The edited arguments given on the command line, read as JSON."""
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValueError(f"--args must be a JSON object: {e}") from None


def main(argv: list[str] | None = None) -> int:
    """Run one command; the exit code is 0 when done, 1 when refused, 2 for a bad command line."""
    parser = argparse.ArgumentParser(prog="pause_resume.py", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("start", help="run until the refund waits for a human").add_argument("file")
    yes = commands.add_parser("approve", help="approve the waiting refund and finish the run")
    yes.add_argument("file")
    yes.add_argument("--by", default="a human", help="who approves")
    yes.add_argument("--args", help="edited arguments, as a JSON object")
    no = commands.add_parser("deny", help="deny the waiting refund and finish the run")
    no.add_argument("file")
    no.add_argument("--by", default="a human", help="who denies")
    no.add_argument("--reason", required=True, help="why: the brain reads it")
    options = parser.parse_args(argv)
    path = pathlib.Path(options.file)
    try:
        if options.command == "start":
            start(path)
        else:
            finish(path, options)
    except (OSError, ValueError) as e:  # a missing file, broken JSON, a verdict that can't be right
        print(f"{parser.prog}: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
