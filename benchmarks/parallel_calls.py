"""Three slow calls, one after another and at once: what microagent.parallel's at_once saves.

    python benchmarks/parallel_calls.py            # each call waits 0.3 s
    python benchmarks/parallel_calls.py --wait 1

Three tools each wait `--wait` seconds (a model server, a database, a web page, say):
two plain ones that sleep, and an `async def` one that awaits asyncio.sleep. One
run's brain calls them one after another, a turn each; the other's brain makes one
call to at_once with the three calls, which runs them in threads. The brains are
scripted, so the time is the tools' waiting and the loop's own small cost. Best of
three rounds of each; the ratio is what to read, the absolute times only a guide.
"""

import argparse
import asyncio
import time

from microagent import Action, Agent, final_answer, scripted
from microagent.parallel import async_tool, at_once
from microagent.schema import as_tool


def office(wait: float) -> list:
    """Three tools that each wait `wait` seconds, and at_once over them."""
    @as_tool
    def stock(item: str) -> str:
        """How many of an item are in stock."""
        time.sleep(wait)
        return f"{item}: 3 in stock"

    @as_tool
    def price(item: str) -> str:
        """What an item costs."""
        time.sleep(wait)
        return f"{item}: $79"

    @async_tool
    async def shipping(item: str) -> str:
        """How long an item takes to ship."""
        await asyncio.sleep(wait)
        return f"{item}: 2 days"
    slow = [stock, price, shipping]
    return slow + [at_once(slow), final_answer]


CALLS = [Action(name, {"item": "headphones"}) for name in ("stock", "price", "shipping")]
ANSWER = Action("final_answer", {"answer": "in stock, $79, 2 days"})
TOGETHER = Action("at_once", {"calls": [{"tool": a.tool, "args": {"item": "headphones"}}
                                        for a in CALLS]})


def seconds(moves: list, wait: float) -> float:
    """The best of three runs of a scripted brain making `moves`, in seconds."""
    best = float("inf")
    for _ in range(3):
        agent = Agent(scripted(*moves), office(wait))
        started = time.perf_counter()
        ctx = agent.run("Tell me about the headphones.")
        best = min(best, time.perf_counter() - started)
        assert agent.why_stop(ctx) == "done" and not any(m.error for m in ctx)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wait", type=float, default=0.3)
    wait = parser.parse_args().wait
    apart = seconds(CALLS + [ANSWER], wait)
    together = seconds([TOGETHER, ANSWER], wait)
    print(f"three calls that wait {wait:g} s each:")
    print(f"  one after another, a turn each   {apart:.3f} s")
    print(f"  at once, one call to at_once     {together:.3f} s")
    print(f"  ratio                            {apart / together:.2f}x")


if __name__ == "__main__":
    main()
