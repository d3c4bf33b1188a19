"""The smallest agent: one question, a brain that answers at once, the story printed.

    python examples/hello_agent.py

`agent.run(question)` hands back the notebook: every note of the run, in order.
`show` prints it as a story, and the answer is the last note's content
(`agent.why_stop(ctx)` says the run is "done").
"""

from microagent import Action, Agent, final_answer
from microagent.trace import show


def polite(ctx, tools):
    """A brain is any function (notebook, tools) -> Action. This one always answers."""
    question = ctx.last().content
    return Action("final_answer", {"answer": f"Hello! You said: {question}"},
                  "a greeting deserves a reply")


agent = Agent(polite, [final_answer], name="greeter")

if __name__ == "__main__":
    ctx = agent.run("Hi there")
    show(ctx)
    print("the answer:", ctx.last().content)
