"""`python -m microagent` runs the refund office once and prints its story (demo.py)."""

from microagent.demo import main

if __name__ == "__main__":
    main()
