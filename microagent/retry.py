"""Recovering from errors: a tool that tries again, and a tool that keeps its secrets.

The loop already writes a tool's exception into the notebook as an error note, and
the brain reads it next turn. Here is the other half, each a Tool wrapping a Tool
(same name, description and schema, so the brain can't tell it apart): `retrying`
calls a flaky tool again, `hiding` keeps a failure's words from the brain. To do
both, hide first: `retrying(hiding(tool, report))`.

The one rule: a tool that answers is not tried again, even when the answer is a no
(a human's denial) or an error note. What it leaves out: neither wrapper retries a
brain's own mistakes (arguments that don't fit never reach the tool), and neither
stops a tool that hangs: a timeout belongs to the tool itself.
"""

import dataclasses
import functools
import math
import time

from microagent.message import Message
from microagent.tool import Tool, said_by


def retrying(tool: Tool, attempts: int = 3, wait: float = 0.0,
             on: tuple[type[Exception], ...] = (Exception,), sleep=time.sleep,
             max_wait: float = 60.0) -> Tool:
    """`tool`, tried again when it raises one of `on`: `attempts` tries in all.

    Between tries it waits wait, 2*wait, 4*wait... seconds, never more than `max_wait`.
    When a retry was needed the result says so, "(on attempt 2 of 3; the last failure:
    ...)", so the notebook shows it; when every attempt fails, the brain gets an error
    note that says how many attempts were made and how the last one failed. An agent
    used as a tool (microagent.team) answers with an error note when its brain fails,
    so it is not run again.
    """
    if not (type(attempts) is int and attempts >= 1
            and _seconds(wait) and _seconds(max_wait)):
        raise ValueError("retrying takes attempts, a whole number from 1 up, and wait "
                         "and max_wait, seconds from 0 up (finite), not "
                         f"{attempts!r}, {wait!r}, {max_wait!r}")
    if not isinstance(tool, Tool) or not callable(sleep):
        raise TypeError("retrying takes a Tool (make one with @as_tool), and sleep, "
                        "a function of seconds")
    if not (isinstance(on, tuple)
            and all(isinstance(e, type) and issubclass(e, Exception) for e in on)):
        raise TypeError("on= is a tuple of exception classes, "
                        "e.g. on=(ConnectionError, TimeoutError)")

    @functools.wraps(tool.fn)  # its signature and docstring, as a model is shown them
    def retried(**args):
        failed = None  # how the last try went wrong
        for attempt in range(1, attempts + 1):
            if failed is not None:
                # subtle: 2.0 ** 1024 overflows before min() can cap it, so the
                # doubling stops at 2 ** 64
                sleep(min(wait * 2.0 ** min(attempt - 2, 64), max_wait))
            try:
                out = tool(**args)
            except on as e:  # anything else (a bug, say) is not worth trying again
                failed = f"{type(e).__name__}: {said_by(e)}"
                continue
            if failed is None:
                return out
            said = f" (on attempt {attempt} of {attempts}; the last failure: {failed})"
            if isinstance(out, Message):
                return dataclasses.replace(out, content=out.content + said)
            return out + said
        raise RuntimeError(f"gave up after {attempts} attempts; "
                           f"the last failure: {failed}")
    return dataclasses.replace(tool, fn=retried)


def hiding(tool: Tool, report, said: str = "it failed; the details went to the developer"
           ) -> Tool:
    """`tool`, whose failures reach the brain as `said` and report(exception) in full.

    For a tool whose failures may hold secrets (a key in a URL, a card number in a
    database error). `report` is a function the developer chooses: `errors.append`,
    or a logger only the developer reads. An agent used as a tool that failed answers
    with an error note that may quote its brain's exception: those words are hidden
    too (report gets them as a RuntimeError), and its run stays in the note.

    Hide first, then retry: `retrying(hiding(tool, report))`. The other way round
    leaks: when a try fails and the next one works, `retrying` writes the failure's
    text into the result, where `hiding` cannot reach it. One price: the hidden tool
    raises only RuntimeError, so retrying's `on=` can no longer pick which failures
    to retry; leave it at its default there.
    """
    if not isinstance(tool, Tool) or not callable(report):
        raise TypeError("hiding takes a Tool and report, a function that receives each "
                        "exception (e.g. errors.append)")

    @functools.wraps(tool.fn)
    def hidden(**args):
        try:
            out = tool(**args)
        except Exception as e:
            report(e)
        else:
            if not (isinstance(out, Message) and out.error and out.notes):
                return out
            # an agent used as a tool that failed: its words may quote an exception
            report(RuntimeError(f"{tool.name}: {out.content}"))
            return dataclasses.replace(out, content=f"error: {tool.name} failed: {said}")
        # subtle: raised here, after the except block, so the new exception has no link
        # (__context__) back to the one with the secret, for a traceback to print
        raise RuntimeError(said)
    return dataclasses.replace(tool, fn=hidden)


def _seconds(n) -> bool:
    return isinstance(n, (int, float)) and math.isfinite(n) and n >= 0
