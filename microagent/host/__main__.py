"""`python -m microagent.host` serves the refund office (see cli.py, and README.md), and
serves it as an A2A agent too (microagent.a2a.server): nothing imports this file, so
the host itself imports nothing of A2A's, which is built on it."""

from microagent.a2a.server import ROUTES
from microagent.host.cli import main

if __name__ == "__main__":
    main(routes=ROUTES)
