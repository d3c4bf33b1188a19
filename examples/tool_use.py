"""An agent that calls coworkers: a calculator and a unit converter, then answers.

    python examples/tool_use.py

The brain is scripted, so the run is the same every time. The second decision
is a deliberate mistake (a string where a number belongs): the tool checks the
arguments against its schema, the loop writes the error into the notebook, and
the brain fixes it on its next turn.
"""

from microagent import Action, Agent, final_answer
from microagent.schema import as_tool
from microagent.script import scripted
from microagent.trace import show


@as_tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


@as_tool
def km_to_miles(km: float) -> str:
    """Convert kilometres to miles, rounded to one decimal."""
    return f"{km * 0.621371:.1f}"


policy = scripted(
    Action("multiply", {"a": 42.195, "b": 2}, "a double marathon is twice 42.195 km"),
    Action("km_to_miles", {"km": "84.39"}, "now in miles"),
    Action("km_to_miles", {"km": 84.39}, "the converter wants a number, not text"),
    Action("final_answer", {"answer": "A double marathon is 84.39 km, about 52.4 miles."},
           "that's the answer"),
)
agent = Agent(policy, [multiply, km_to_miles, final_answer], name="runner")

if __name__ == "__main__":
    show(agent.run("How long is a double marathon, in miles?"))
