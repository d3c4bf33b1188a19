"""python -m microagent.host: serve an office over HTTP, or print the audit trail.

    python -m microagent.host                # the refund office on http://127.0.0.1:8000
    python -m microagent.host --approve-own  # one may ask and approve (a tutorial's flow)
    python -m microagent.host --audit        # print the audit trail and exit

On a first start it writes a users file (alice, who asks; bob, who approves) and
a signing secret, each readable by its owner only.
"""

import argparse
import contextlib
import importlib
import json
import os
import secrets

from microagent.host.http import Server
from microagent.host.office import llm_office, refund_office
from microagent.host.store import SERVERS, Store, shown
from microagent.host.users import APPROVES, ASKS, read_users
from microagent.trace import CONTROL


def write_new(path: str, data: bytes) -> None:
    """Write a new file that only its owner may read (0600); one that is there is left
    as it is."""
    with contextlib.suppress(FileExistsError):
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(data)


def secret_from(path: str) -> bytes:
    """The signing secret: $MICROAGENT_HOST_SECRET, else the file at `path` (made 0600
    if missing)."""
    if os.environ.get("MICROAGENT_HOST_SECRET"):
        return os.environ["MICROAGENT_HOST_SECRET"].encode()
    write_new(path, secrets.token_bytes(32))
    with open(path, "rb") as f:
        return f.read()


FIRST_USERS = {"alice": [ASKS], "bob": [APPROVES]}  # the users file a first start writes


def users_from(path: str) -> dict:
    """The users in a JSON file (see read_users); a new file with alice, who asks, and
    bob, who approves, if it is missing."""
    made = [f'"{name}": ' + json.dumps({"token": secrets.token_urlsafe(24),
                                        "roles": roles})
            for name, roles in FIRST_USERS.items()]  # a user a line
    write_new(path, ("{\n " + ",\n ".join(made) + "\n}\n").encode())
    try:
        with open(path) as f:
            users = json.load(f)
        read_users(users)
    except ValueError as e:  # json's errors are ValueErrors too
        raise SystemExit(f"{path}: {e}") from None
    return users


def printable(value) -> str:
    """A value of the audit trail as one line, escaped as the story escapes a note
    (microagent.trace: line breaks, controls, marks that reorder text, characters that
    print as nothing), and each backslash doubled, so the line reads back as the value.

    >>> print(printable("no\\n2026 | bob | approved \\u202e97"))
    no\\n2026 | bob | approved \\u202e97
    """
    text = "-" if value is None else str(value).replace("\\", "\\\\")
    return CONTROL.sub(lambda c: ascii(c.group())[1:-1], text)


def options(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m microagent.host",
                                description="The loop behind HTTP, one session per "
                                "notebook, approvals as signed tokens.")
    p.add_argument("--db", default="microagent-host.db",
                   help="sessions, audit trail, refunds: a sqlite file, or a "
                        "postgresql:// URL (pip install '.[postgres]'; the password "
                        "best in $PGPASSWORD)")
    p.add_argument("--users", default="microagent-users.json",
                   help='JSON: user name -> {"token": ..., '
                        '"roles": ["asks", "approves"]}')
    p.add_argument("--approve-own", action="store_true",
                   help="a user who asks and approves may approve their own requests")
    p.add_argument("--secret-file",
                   help="the signing secret (default: the db file's name + .secret, "
                   "or microagent-host.secret for PostgreSQL); "
                   "$MICROAGENT_HOST_SECRET wins over it")
    p.add_argument("--port", type=int, default=8000, help="0: any free port")
    p.add_argument("--office",
                   help="module:function, a function (db) -> Agent to host instead")
    p.add_argument("--model",
                   help="the refund office with microagent.llm's brain: the model's name")
    p.add_argument("--base-url", default="http://localhost:11434/v1",
                   help="with --model: the server")
    p.add_argument("--api-key-env",
                   help="with --model: the environment variable with the API key")
    p.add_argument("--lease", type=float, default=30.0,
                   help="seconds a killed server keeps a session")
    p.add_argument("--token-ttl", type=int, default=600,
                   help="seconds an approval token lives")
    p.add_argument("--rate", type=float, nargs=2, default=(1.0, 20),
                   metavar=("PER_SECOND", "BURST"),
                   help="runs a user may start: a burst, then so many a second")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds a client may take to send a request")
    p.add_argument("--follows", type=int, default=20,
                   help="event streams one user may follow at once (each holds a thread)")
    p.add_argument("--audit", action="store_true", help="print the audit trail and exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None, routes: dict | None = None) -> None:
    """`routes`: more routes for the Server (__main__.py gives A2A's)."""
    o = options(argv)
    if o.audit:
        for row in Store(o.db).trail():
            print(" | ".join(printable(v) for v in row))
        return
    office = refund_office
    if o.office:
        module, _, function = o.office.partition(":")
        office = getattr(importlib.import_module(module), function)
    elif o.model:
        key = os.environ.get(o.api_key_env) if o.api_key_env else None
        if o.api_key_env and not key:
            raise SystemExit(f"--api-key-env {o.api_key_env}: that environment variable "
                             "is not set")
        office = llm_office(o.model, o.base_url, api_key=key)
    secret_file = o.secret_file or ("microagent-host.secret" if o.db.startswith(SERVERS)
                                    else o.db + ".secret")
    try:
        server = Server(office, o.db, users_from(o.users), secret_from(secret_file),
                        port=o.port, token_ttl=o.token_ttl, lease=o.lease,
                        timeout=o.timeout, rate=(o.rate[0], int(o.rate[1])),
                        approve_own=o.approve_own, follows=o.follows, routes=routes)
    except (ConnectionError, PermissionError, ImportError, ValueError) as e:  # the db
        raise SystemExit(f"python -m microagent.host: {e}") from None
    print(f"serving on http://127.0.0.1:{server.server_address[1]} "
          f"(database {shown(o.db)}); the users' bearer tokens are in {o.users}",
          flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
