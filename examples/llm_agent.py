"""The refund office with a language model for a brain: the same agent, tools and story.

    python examples/llm_agent.py --model llama3.1                                    # Ollama
    python examples/llm_agent.py --base-url http://localhost:8080/v1 --model local   # llama.cpp
    python examples/llm_agent.py --base-url https://api.openai.com/v1 --model gpt-4o-mini \\
        --api-key-env OPENAI_API_KEY                                                 # OpenAI
    python examples/llm_agent.py --base-url http://127.0.0.1:8000/v1 --model smollm2 \\
        --json-tools --response-format json_object --max-tokens 200   # llama-cpp-python, small

The model's words are printed as they stream in (after "..."), then the tokens each
reply cost, then the notes the run wrote. The brain is microagent.llm's chat_policy on
the workshop's hardened transport (retries, a deadline for each reply, the key kept out
of what a server sends back); the office is microagent.demo's support_agent, as
`python -m microagent` runs it with its rule-based brain. The human who signs off
refunds says yes to everything here.
"""

import argparse
import json
import os
import sys

from microagent.demo import QUESTION, support_agent
from microagent.llm import LOCAL, LLMError, chat_policy
from microagent.trace import story
from microagent.transport import hardened


def counting(send, tell):
    """`send`, telling `tell` the tokens each reply cost: a wrapper on the brain's one seam."""
    def send_counting(url, body, headers):
        replies = send(url, body, headers)
        try:
            for reply in replies:
                yield reply  # the brain reads it (and says its words) before the count
                usage = reply.get("usage")
                if isinstance(usage, dict):
                    tell(f"      (tokens: {usage.get('prompt_tokens')} in, "
                         f"{usage.get('completion_tokens')} out)")
        finally:
            replies.close()  # the brain stopped reading: so does the transport
    return send_counting


def main(argv: list[str] | None = None) -> int:
    """Run the refund office once with an LLM brain, printing its words as they stream."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=LOCAL,
                        help="an OpenAI-compatible API, ending in /v1 (default: Ollama here)")
    parser.add_argument("--model", required=True, help="the model's name on that server")
    parser.add_argument("--api-key-env", help="the environment variable with the API key")
    parser.add_argument("--system", help="a system prompt, sent before the notebook")
    parser.add_argument("--no-stream", action="store_true", help="wait for each whole reply")
    parser.add_argument("--json-tools", action="store_true",
                        help="for models without native tool calls: one JSON object a turn")
    parser.add_argument("--response-format", choices=["json_schema", "json_object"],
                        help="with --json-tools: send the JSON Schema of a move (json_schema: "
                             "OpenAI's form; json_object: llama.cpp's, which it enforces)")
    parser.add_argument("--tool-choice", help="auto, required, none, or a tool's name: that "
                                              "tool is then forced on EVERY turn")
    parser.add_argument("--max-tokens", type=int, help="the most tokens one reply may take")
    parser.add_argument("--extra", type=json.loads, default={},
                        help='further request fields, as JSON: \'{"cache_prompt": true}\'')
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds to wait for the server each time (default 120)")
    parser.add_argument("--deadline", type=float, default=300.0,
                        help="seconds for one whole reply (default 300)")
    parser.add_argument("question", nargs="?", default=QUESTION, help="what the customer asks")
    options = parser.parse_args(argv)

    key = None
    if options.api_key_env:
        key = os.environ.get(options.api_key_env)
        if not key:
            print(f"error: the environment variable {options.api_key_env} is not set: "
                  "set it to your API key", file=sys.stderr)
            return 2
    choice = options.tool_choice
    if choice not in (None, "auto", "required", "none"):  # a tool's name: it, every turn
        choice = {"type": "function", "function": {"name": choice}}
    request = {"tool_choice": choice, "max_tokens": options.max_tokens,
               "response_format": options.response_format, **options.extra}
    writing = False  # in the middle of the model's words?

    def say(piece: str) -> None:  # on_text: a piece of the model's words, as it streams in
        nonlocal writing
        if piece:
            print(piece if writing else "  ... " + piece, end="", flush=True)
            writing = True

    def tell(line: str | None) -> None:  # a line of its own, after the words (None: none)
        nonlocal writing
        if writing:
            print()
            writing = False
        if line is not None:
            print(line)

    try:
        send = counting(hardened(timeout=options.timeout, deadline=options.deadline), tell)
        policy = chat_policy(options.model, options.base_url, api_key=key,
                             system=options.system, stream=not options.no_stream,
                             native=not options.json_tools, on_text=say, send=send,
                             **{name: value for name, value in request.items()
                                if value is not None})
    except ValueError as e:  # a setting that can't work
        print(f"error: {e}", file=sys.stderr)
        return 2  # as argparse does for a bad command line
    agent = support_agent(policy=policy, approver=lambda tool, args: True)
    told = 0  # lines of the story printed so far

    def show(notebook) -> None:  # the notes written since last time
        nonlocal told
        lines = story(notebook).splitlines()
        for line in lines[told:]:
            tell(line)
        told = len(lines)

    ctx = agent.start(options.question)
    show(ctx)
    try:
        for step in agent.steps(ctx):
            show(step.context)
    except LLMError as e:
        tell(None)
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0

if __name__ == "__main__":
    sys.exit(main())
