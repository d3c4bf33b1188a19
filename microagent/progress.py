"""Progress from inside a long tool: how far it has got, told to whoever listens.

A tool that works for a minute calls `report(3, 10, "copying")` as it goes, not
knowing who listens; whoever drives the run listens with `with listening(fn):`, and
each report made in that block (in its thread) is fn(done, total, message). Outside
any listener a report only checks its arguments, so a tool runs the same in a test,
a notebook, a host or an MCP server. `keeping(tool)` gives each call a listener of
its own that passes the reports on and, when the call fails, ends its error with the
last one ("(it got as far as 3 of 10: copying)"), so the notebook keeps it.

The one rule (MCP's): within one listener, progress increases; a report that doesn't
is a ValueError, a bug in the tool. What it leaves out: a report is no note (only a
failure's words keep one); a thread the tool starts hears nothing unless it runs in a
copy of its context; and a report can't stop a tool (a cancel is heard between steps).
"""

import contextlib
import contextvars
import dataclasses
import functools
import math
import threading

from microagent.message import Message
from microagent.tool import Tool, said_by

MAX_MESSAGE = 200  # characters of a report's message kept: what fits on a status line
_LISTENER = contextvars.ContextVar("progress listener", default=None)


class _Listener:
    """fn, and the last report it heard: (done, total, message), or None."""

    def __init__(self, fn):
        self.fn, self.last, self.lock = fn, None, threading.Lock()


def report(done: float, total: float | None = None, message: str = "") -> None:
    """Tell whoever listens that `done` of `total` (None: not known) is done, and what
    is being done now; nothing happens outside a listener."""
    if not (_number(done) and (total is None or _number(total))
            and isinstance(message, str)):
        raise TypeError(f"report takes done and total, finite numbers (total may be "
                        f"None), and a message, text; not {done!r}, {total!r}, "
                        f"{message!r}")
    listener = _LISTENER.get()
    if listener is None:
        return
    if len(message) > MAX_MESSAGE:
        message = message[:MAX_MESSAGE - 3] + "..."
    with listener.lock:  # subtle: tools called at once report from several threads
        if listener.last is not None and done <= listener.last[0]:
            raise ValueError(f"progress must increase: {done!r} came after "
                             f"{listener.last[0]!r}. (Tools reporting at once? Give each "
                             "call a listener of its own: progress.keeping(tool))")
        listener.last = (done, total, message)
        listener.fn(done, total, message)


@contextlib.contextmanager
def listening(fn):
    """While the block runs, each report made in this thread (or a copy of its
    context) is fn(done, total, message); `with listening(fn) as heard:` keeps the
    last made straight to it in `heard.last` (a kept tool's reports reach fn, and are
    kept by that tool's own listener)."""
    if not callable(fn):
        raise TypeError(f"listening takes a function (done, total, message), not {fn!r}")
    heard = _Listener(fn)
    token = _LISTENER.set(heard)
    try:
        yield heard
    finally:
        _LISTENER.reset(token)


def told(done: float, total: float | None = None, message: str = "") -> str:
    """A report in words.

    >>> told(3, 10, "copying"), told(0.5), told(7, message="indexing")
    ('3 of 10: copying', '0.5', '7: indexing')
    """
    said = _shown(done) if total is None else f"{_shown(done)} of {_shown(total)}"
    return f"{said}: {message}" if message else said


def keeping(tool: Tool) -> Tool:
    """`tool`, each call with a listener of its own that passes every report on to
    whoever listens, and ends a failure's words with the last one.

    A call that raises raises a RuntimeError saying what it raised and how far it got
    (Tool.run makes that an error note); one that answers with an error note (an MCP
    call, an agent used as a tool) gets the same words at its end. To try again too,
    keep first: `retrying(keeping(tool))`, so that each try reports from 1 again. With
    retry.hiding, keep last: `keeping(hiding(tool, errors.append))` hides the failure's
    words and keeps how far it got (the progress a client was shown as it came). A kept
    tool kept again (a host keeps every tool it serves) says how far it got once.
    """
    if not isinstance(tool, Tool):
        raise TypeError(f"keeping takes a Tool (make one with @as_tool), not {tool!r}")

    @functools.wraps(tool.fn)  # its signature and docstring, as a model is shown them
    def kept(**args):
        outer = _LISTENER.get()

        # subtle: a report is checked by this call's listener, then handed to the outer
        # one's fn as it is, not checked again: calls at once share the outer listener
        def pass_on(done, total, message):
            if outer is not None:
                with outer.lock:
                    outer.fn(done, total, message)
            heard.last = (done, total, message)  # and what a kept tool inside passes on
        with listening(pass_on) as heard:
            try:
                out = tool(**args)
            except Exception as e:
                far = heard.last and _as_far(heard.last)
                said = said_by(e) if type(e) is RuntimeError else \
                    f"{type(e).__name__}: {said_by(e)}"  # hiding's words as they are
                if far is None or said.endswith(far):  # no progress, or told already
                    raise
                raise RuntimeError(f"{said} {far}") from e
        far = heard.last and _as_far(heard.last)
        if isinstance(out, Message) and out.error and far \
                and not out.content.endswith(far):
            return dataclasses.replace(out, content=f"{out.content} {far}")
        return out
    return dataclasses.replace(tool, fn=kept)


def _as_far(last) -> str:
    return f"(it got as far as {told(*last)})"


def _shown(n) -> str:
    return f"{n:.15g}" if isinstance(n, float) else str(n)  # 3.0 as 3, 0.1 as 0.1


def _number(n) -> bool:
    return type(n) in (int, float) and math.isfinite(n)
