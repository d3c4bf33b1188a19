"""Where prompts live: zero-shot, few-shot and ReAct, each a brain's choice of request.

A language model reads one request a turn (microagent.chat): a system prompt, the
tools' descriptions, and the notebook as chat messages. That request is the whole
prompt, so a prompt technique is a choice of what the brain puts in it (`zero_shot`,
`few_shot`, `react`; JSON mode, native=False, is a setting of each).

The one rule: a technique changes the request, never the notebook. An example is shown
to the brain and never written down, so the agent, its tools and its notes stay the
same whichever technique its brain uses. It leaves out picking examples to fit each
question, and a model's hidden reasoning (the thought here is one the model writes
where we read it).
"""

from microagent.context import Context
from microagent.invariants import check
from microagent.llm import LOCAL, chat_policy

REACT = ("Think before each tool call: write what you know so far, and why the call "
         "you are about to make comes next, in a sentence or two. Then make the call.")
REACT_JSON = 'Write that thought in "reasoning", the first key of your JSON object.'


def zero_shot(model: str, base_url: str = LOCAL, *, system: str, **settings):
    """A brain shown its instructions and the tools' descriptions, and no example.

    `settings` go to chat_policy as they are: native, response_format, stream, send, ...
    """
    return chat_policy(model, base_url, system=_instructions(system), **settings)


def react(model: str, base_url: str = LOCAL, *, system: str, native: bool = True,
          **settings):
    """A zero-shot brain asked to write its thought before each call (REACT).

    The thought comes back as the reply's words beside its call (with native=False, as
    the move's "reasoning"); chat.to_action makes it the Action's reasoning, so the
    decision note says it, and the model reads it again on every later turn.
    """
    if not native and settings.get("response_format") is not None:
        # a grammar writes the keys in the schema's order, and chat.move_schema's is
        # tool, args, reasoning: the model would pick its call before it thinks
        raise ValueError("react with a response_format holds the model to a move whose "
                         "reasoning comes after its tool, so it would choose before it "
                         "thinks: leave response_format out, or use native tool calls")
    asked = REACT if native else f"{REACT} {REACT_JSON}"
    return zero_shot(model, base_url, system=f"{_instructions(system)}\n\n{asked}",
                     native=native, **settings)


def few_shot(policy, *examples: Context):
    """`policy` shown worked runs before the notebook; the agent writes none of them.

    An example is the notebook of a finished run (its question, then its turns), one
    the office wrote before, say. Under memory, put few_shot inside:
    remembering(few_shot(brain, ...)), or the examples would be summed up.
    """
    if not callable(policy):
        raise TypeError("few_shot takes a policy, a function (context, tools) -> Action, "
                        f"then the examples, not {type(policy).__name__}")
    if not examples:
        raise ValueError("few_shot shows the model at least one worked run: with none, "
                         "it is zero-shot")
    for n, example in enumerate(examples, start=1):
        _check_example(example, n)

    def policy_with_examples(ctx: Context, tools):
        for n, example in enumerate(examples, start=1):
            for m in example:  # an example that calls a tool this agent lacks misleads
                if m.kind == "decision" and m.tool not in tools:
                    raise ValueError(f"example {n} calls {m.tool}, which is not one of "
                                     f"this agent's tools ({', '.join(tools)}): fix the "
                                     "example, or give the agent that tool")
        return policy(with_examples(ctx, *examples), tools)
    return policy_with_examples


def with_examples(ctx: Context, *examples: Context) -> Context:
    """The notebook a few-shot brain reads: the system note, the examples, the rest.

    >>> from microagent.message import Message
    >>> told, ask = Message("system", "Add."), Message("user", "2 + 3?")
    >>> done = Message("assistant", "", "me", "final_answer", '{"answer": "2"}')
    >>> example = Context((Message("user", "1 + 1?"), done,
    ...                    Message("tool", "2", "final_answer")))
    >>> [m.content for m in with_examples(Context((told, ask)), example)]
    ['Add.', '1 + 1?', '', '2', '2 + 3?']
    """
    head = 1 if ctx and ctx[0].kind == "system" else 0  # the system note stays first
    shown = tuple(m for example in examples for m in example)
    return Context(ctx.messages[:head] + shown + ctx.messages[head:])


def _instructions(system) -> str:
    if not (isinstance(system, str) and system.strip()):
        raise ValueError("system is the model's instructions: a prompt that says what "
                         f"the assistant is for and how it works, not {system!r}")
    return system


def _check_example(example, n: int) -> None:
    """A worked run from its question to its end, or an error saying what is wrong."""
    if not isinstance(example, Context):
        raise TypeError(f"example {n} is a Context, the notebook of a worked run "
                        f"(agent.run(question)), not {type(example).__name__}")
    if not example or example[0].kind != "question":
        begins = f"begins with a {example[0].kind} note" if example else "is empty"
        raise ValueError(f"example {n} {begins}: an example is a run from its question "
                         "on (the run's own system note is the one the model reads)")
    try:
        check(example)
    except ValueError as e:
        raise ValueError(f"example {n} is not a sound notebook: {e}") from None
    if example[-1].kind in ("decision", "verdict"):
        raise ValueError(f"example {n} ends with a call nothing answered (a run paused "
                         "for a human?): settle it with approve or deny, or cut it off")
