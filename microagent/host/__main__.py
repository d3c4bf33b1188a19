"""`python -m microagent.host` serves the refund office (see cli.py, and README.md)."""

from microagent.host.cli import main

if __name__ == "__main__":
    main()
