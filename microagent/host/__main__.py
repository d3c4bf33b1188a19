"""`python -m microagent.host` serves the refund office (see server.py, and README.md beside it)."""

from microagent.host.server import main

if __name__ == "__main__":
    main()
