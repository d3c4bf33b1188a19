"""A program run as a subprocess and spoken to a line at a time: stdio, with no MCP in it.

Three threads serve it: one reads its stdout a line at a time and hands each line
on, one drains its stderr and keeps the last TAIL bytes (a pipe nobody reads fills
at 64 KiB, and the program then blocks for ever), one writes what is `put` to its
stdin. A fourth waits for it to exit: the program is the process you started, and
when it goes its stream is over, even if a child of it still holds its stdout open.

It runs in a session of its own, so that `close()` stops whatever it started too
(`npx` starts `node`): its stdin closed, then SIGTERM to its process group, then
SIGKILL, GRACE s apart. What it leaves out: a process that left the group on
purpose (`setsid`, a daemon), and on Windows, whatever the program started.
"""

import os
import queue
import signal
import subprocess
import threading
import time

from microagent.mcp.wire import MAX_LINE

GRACE = 2.0     # seconds a program has to go after each of: stdin closed, SIGTERM
TICK = 0.05     # seconds between looks at whether it has gone
TAIL = 16 << 10  # bytes of its stderr kept, to quote when it dies
# what of your environment a program sees beside what you pass: nothing secret
PASSED_ON = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL",
             "LC_CTYPE", "TZ", "TMPDIR", "SYSTEMROOT")


class Process:
    """`command` running, spoken to a line at a time once `start`ed."""

    def __init__(self, command: list[str], *, env: dict | None = None,
                 cwd: str | None = None):
        self._tail, self._tail_lock, self._trimmed = bytearray(), threading.Lock(), False
        self._outbox = queue.Queue()  # bytes for its stdin; None: close it
        self._heard = self._ended = None
        self.proc = subprocess.Popen(  # an OSError if it can't start: the caller says why
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=environment(env), cwd=cwd,
            start_new_session=os.name == "posix")  # its children are stopped with it
        self.threads = [threading.Thread(target=work, daemon=True, name=f"mcp {what}")
                        for work, what in ((self._read, "reader"),
                                           (self._drain, "stderr"),
                                           (self._write, "writer"))]

    def start(self, heard, ended) -> None:
        """Start reading and writing: `heard(line)` gets each line of its stdout (bytes,
        MAX_LINE + 1 at most) and says whether to read on; `ended()` is called once its
        stdout is over, or once it has exited and its stdout does not end (maybe both)."""
        self._heard, self._ended = heard, ended
        for thread in self.threads:
            thread.start()
        threading.Thread(target=self._watch, daemon=True, name="mcp watcher").start()

    def put(self, data: bytes) -> None:
        """Write `data` to its stdin, in order, from the writer thread."""
        self._outbox.put(data)

    def tail(self) -> tuple[str, bool]:
        """What it last wrote to stderr (TAIL bytes at most), and whether older bytes
        were let go (maybe in the middle of a word)."""
        with self._tail_lock:
            return bytes(self._tail).decode("utf-8", "replace"), self._trimmed

    def how(self) -> str:
        """How it went, in words ("exited with code 4", "was killed by SIGKILL"),
        once its stderr's last words are in (GRACE s at most for it to go)."""
        try:
            code = self.proc.wait(GRACE)
        except subprocess.TimeoutExpired:
            code = None
        self.threads[1].join(0.5)  # the stderr drain: let its last words in
        if code is None:
            return "closed its stdout"
        if code < 0:
            return f"was killed by {signal_name(-code)}"
        return f"exited with code {code}"

    def close(self) -> None:
        """Close its stdin, then stop it and its process group; its pipes closed."""
        self._outbox.put(None)  # the writer closes stdin once what it holds is sent
        self.stop()
        # with the group gone its pipes are at their end, and the threads with them; a
        # process that left the group (setsid) may still hold them: GRACE s, then on
        deadline = time.monotonic() + GRACE
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        reader, drain, _ = self.threads
        for thread, pipe in ((reader, self.proc.stdout), (drain, self.proc.stderr)):
            if not thread.is_alive():  # (closing a pipe a thread still reads would block)
                pipe.close()

    def stop(self) -> None:
        """Wait for it and its process group to go, then SIGTERM them, then SIGKILL
        them, GRACE s each time."""
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                self._signal(sig)
            deadline = time.monotonic() + GRACE
            while self.running():
                if time.monotonic() >= deadline:
                    break
                time.sleep(TICK)
            else:
                return

    def running(self) -> bool:
        """Whether it, or anything it started that is still in its group, runs."""
        if self.proc.poll() is None:
            return True
        return os.name == "posix" and group_runs(self.proc.pid)

    # -- the threads: read its stdout, drain its stderr, write its stdin, watch it --

    def _read(self):
        out = self.proc.stdout
        try:
            while raw := out.readline(MAX_LINE + 1):
                if not self._heard(raw):
                    return
        except (OSError, ValueError):  # the pipe closed under us, by close()
            pass
        self._ended()

    def _drain(self):
        try:
            while chunk := self.proc.stderr.read1(64 << 10):
                with self._tail_lock:
                    self._tail += chunk
                    self._trimmed |= len(self._tail) > TAIL
                    del self._tail[:-TAIL]
        except (OSError, ValueError):
            pass

    def _write(self):
        pipe = self.proc.stdin
        try:
            while (data := self._outbox.get()) is not None:
                pipe.write(data)
                pipe.flush()
        except (OSError, ValueError):  # it is gone: the reader says why
            pass
        finally:
            try:
                pipe.close()
            except OSError:
                pass

    def _watch(self):
        """It exited: its stream is over, even if what it started still holds its
        stdout open (the reader would wait for the end of a pipe that never ends)."""
        self.proc.wait()
        reader = self.threads[0]
        reader.join(GRACE)  # the lines it wrote before it went are read first
        if reader.is_alive():
            self._ended()
            self.stop()

    def _signal(self, sig):
        try:
            if os.name == "posix":  # it and whatever it started, even once it has gone
                os.killpg(self.proc.pid, sig)
            elif self.proc.poll() is not None:
                return
            elif sig == signal.SIGKILL:
                self.proc.kill()
            else:
                self.proc.terminate()
        except (ProcessLookupError, PermissionError):
            pass


def environment(extra: dict | None) -> dict:
    """The environment a program starts with: a few harmless variables, and `extra`."""
    passed = {k: v for k in PASSED_ON if (v := os.environ.get(k)) is not None
              and not v.startswith("()")}  # "()": a shell function, not a value
    return {**passed, **(extra or {})}


def signal_name(number: int) -> str:
    """A signal's name, from its number.

    >>> signal_name(9), signal_name(999)
    ('SIGKILL', 'signal 999')
    """
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def group_runs(group: int) -> bool:
    """Whether a process of the process group `group` is alive (a zombie, dead but not
    yet reaped, is not: an init that never reaps orphans is common in containers)."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    if not os.path.isdir("/proc"):  # not Linux: its init reaps, so killpg told the truth
        return True
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
                state, _, in_group = f.read().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):  # gone while we looked
            continue
        if in_group == str(group) and state != "Z":
            return True
    return False
