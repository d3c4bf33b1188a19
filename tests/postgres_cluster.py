"""A throwaway PostgreSQL server in a temporary folder, for the tests and the benchmarks.

    cluster = Cluster()                 # initdb, then pg_ctl start: about a second
    url = cluster.database("office")    # a new, empty database: its postgresql:// URL
    cluster.halt(); cluster.start()     # an outage, and the server back on the same port
    cluster.stop()                      # the server stops and the folder goes

It runs the PostgreSQL binaries Debian installs (/usr/lib/postgresql/<version>/bin,
or initdb on the PATH). initdb refuses to run as root, so as root they run as
the user postgres, in a folder that user owns. The server listens on 127.0.0.1
only, on a free port, and asks for a password (scram-sha-256), random for each
cluster. It commits without waiting for the disk (synchronous_commit=off): a
commit survives a killed client, not a power cut, as with the sqlite host's
synchronous=NORMAL.

`why_not()` says why no cluster can start here, or None if one can.
"""

import contextlib
import glob
import os
import pathlib
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile


def binaries() -> pathlib.Path | None:
    """The folder with initdb and pg_ctl, the newest version first; None if there is none."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    initdb = found[-1] if found else shutil.which("initdb")
    return pathlib.Path(initdb).parent if initdb else None


def why_not() -> str | None:
    """Why a cluster can't start on this machine (None: it can)."""
    if binaries() is None:
        return ("PostgreSQL's initdb and pg_ctl are not installed (on Debian: apt-get install "
                "postgresql); these tests need a real server")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg 3 is not installed: pip install -e '.[postgres]'"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and there is no user postgres to run PostgreSQL as"
    return None


class Cluster:
    def __init__(self):
        self.bin = binaries()
        self.folder = pathlib.Path(tempfile.mkdtemp(prefix="microagent-postgres-"))
        self.password = secrets.token_urlsafe(16)
        (self.folder / "password").write_text(self.password)
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
            shutil.chown(self.folder / "password", "postgres")
        self.pg("initdb", "-D", self.folder / "data", "-U", "postgres", "-E", "UTF8",
                "--locale=C", "--no-sync", "--auth-local=trust", "--auth-host=scram-sha-256",
                "--pwfile", self.folder / "password")
        with socket.socket() as s:  # a free port (the server binds it a moment later)
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.start()

    def start(self) -> None:
        """Start the server (again, after `halt`: the same port, the same databases)."""
        settings = (f"-c listen_addresses=127.0.0.1 -c port={self.port} -c synchronous_commit=off "
                    f"-c unix_socket_directories={self.folder}")
        self.pg("pg_ctl", "-D", self.folder / "data", "-l", self.folder / "log", "-w", "-t", "60",
                "-o", settings, "start")

    def halt(self, mode: str = "fast") -> None:
        """Stop the server, hanging up on every client, as a restart does; `start` brings it
        back. ("immediate" is a crash: with synchronous_commit=off, the last commits may go.)"""
        self.pg("pg_ctl", "-D", self.folder / "data", "-m", mode, "-w", "stop")

    def pg(self, program: str, *args) -> None:
        command = [str(self.bin / program), *map(str, args)]
        if os.geteuid() == 0:  # initdb refuses root
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{program} failed: {done.stdout}{done.stderr}")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres:{self.password}@127.0.0.1:{self.port}/{database}"

    def database(self, name: str) -> str:
        """A new, empty database: its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError):  # halted already (a test that failed mid-outage)
            self.halt("immediate")
        shutil.rmtree(self.folder, ignore_errors=True)
