"""`python -m microagent` runs the refund office and prints its story (see microagent/demo.py)."""

from microagent.demo import main

if __name__ == "__main__":
    main()
