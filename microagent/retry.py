"""Recovering from errors: a tool that tries again, and a tool that keeps its secrets.

The loop already writes a tool's exception into the notebook as an error note,
and the brain reads it on its next turn (errors are notes). Here is the other
half, each a Tool wrapping a Tool:

`retrying(tool, attempts=3)` calls a flaky tool again when it raises, a bounded
number of times, waiting a little longer before each new try (a tool that
answers, even with a no, is not retried). When a retry was needed the
result says so, "(on attempt 2 of 3; the last failure: ...)", so
the notebook shows it; when every attempt fails, the brain gets an error note
that says how many attempts were made and how the last one failed.

`hiding(tool, report)` is for a tool whose exceptions may hold secrets (a key
in a URL, a card number in a database error). The brain sees only a generic
error note; the exception itself, in full, goes to `report`, a function the
developer chooses: `errors.append`, or a logger that only the developer reads.

To do both, hide first and retry the hidden tool: `retrying(hiding(tool, report))`.
The other way round leaks: when a try fails and the next one works, `retrying`
writes the failure's text into the result, where `hiding` cannot reach it.
One price: the hidden tool raises only RuntimeError, so `on=` can no longer
pick which failures to retry; leave it at its default there.

A wrapped tool keeps the name, description and argument schema of the tool it
wraps (functools.wraps), so the brain can't tell it apart. Neither wrapper
retries a brain's own mistakes (arguments that don't fit never reach the tool),
and neither stops a tool that hangs: a timeout belongs to the tool itself.
"""

import dataclasses
import functools
import time

from microagent.message import Message
from microagent.tool import Tool


def retrying(tool: Tool, attempts: int = 3, wait: float = 0.0, on: tuple[type[Exception], ...] = (Exception,),
             sleep=time.sleep, max_wait: float = 60.0) -> Tool:
    """`tool`, tried again when it raises one of `on`: `attempts` tries in all, waiting wait, 2*wait, 4*wait...

    No single wait is longer than `max_wait` seconds, however many attempts there are.
    """
    numbers = all(isinstance(n, (int, float)) and n >= 0 for n in (wait, max_wait))  # nan >= 0 is False
    if not (type(attempts) is int and attempts >= 1 and numbers):
        raise ValueError("retrying takes attempts, a whole number from 1 up, and wait and max_wait, seconds from 0 up")
    if not isinstance(tool, Tool) or not callable(sleep):
        raise TypeError("retrying takes a Tool (make one with @as_tool), and sleep, a function of seconds")
    if not (isinstance(on, tuple) and all(isinstance(e, type) and issubclass(e, Exception) for e in on)):
        raise TypeError("on= is a tuple of exception classes, e.g. on=(ConnectionError, TimeoutError)")

    @functools.wraps(tool.fn)  # the wrapper takes exactly the arguments the tool takes
    def retried(**args):
        failed, ran = None, None  # what went wrong last time, and an inner agent's run so far
        for attempt in range(1, attempts + 1):
            if failed is not None:
                # subtle: 2.0 ** 1024 overflows, so the doubling stops long before the cap is reached
                sleep(min(wait * 2.0 ** min(attempt - 2, 64), max_wait))
            try:
                out = tool(**args)
            except on as e:  # anything else (a bug, say) is not worth trying again
                failed, ran = f"{type(e).__name__}: {e}", getattr(e, "inner_run", None)
                continue
            if failed is None:
                return out
            said = f" (on attempt {attempt} of {attempts}; the last failure: {failed})"
            return dataclasses.replace(out, content=out.content + said) if isinstance(out, Message) else out + said
        gave_up = RuntimeError(f"gave up after {attempts} attempts; the last failure: {failed}")
        if ran is not None:
            gave_up.inner_run = ran  # an agent used as a tool: its last run stays on record
        raise gave_up
    return dataclasses.replace(tool, fn=retried)


def hiding(tool: Tool, report, said: str = "it failed; the details went to the developer") -> Tool:
    """`tool`, whose exceptions reach the brain as `said` and reach `report(exception)` in full."""
    if not isinstance(tool, Tool) or not callable(report):
        raise TypeError("hiding takes a Tool and report, a function that receives each exception "
                        "(e.g. errors.append)")
    @functools.wraps(tool.fn)
    def hidden(**args):
        try:
            return tool(**args)
        except Exception as e:
            report(e)
            ran = getattr(e, "inner_run", None)
        # subtle: raised here, after the except block, so the new exception has no link
        # (__context__) back to the one with the secret, for a traceback to print
        hidden_error = RuntimeError(said)
        if ran is not None:
            hidden_error.inner_run = ran  # an agent used as a tool: its run stays on record
        raise hidden_error
    return dataclasses.replace(tool, fn=hidden)
