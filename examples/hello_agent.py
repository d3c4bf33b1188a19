"""The smallest agent: one question, a brain that answers at once, the story printed.

    python examples/hello_agent.py
"""

from microagent import Action, Agent, final_answer, show


def polite(ctx, tools):
    """A brain is any function (notebook, tools) -> Action. This one always answers."""
    question = ctx.last().content
    return Action("final_answer", {"answer": f"Hello! You said: {question}"}, "a greeting deserves a reply")


agent = Agent(polite, [final_answer], name="greeter")
show(agent.run("Hi there").context)
print("the answer:", agent.answer("Hi there"))
