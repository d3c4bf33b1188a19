"""The refund office with a language model for a brain: the same agent, tools and story.

    python examples/llm_agent.py --model llama3.1                                    # Ollama
    python examples/llm_agent.py --base-url http://localhost:8080/v1 --model local   # llama.cpp's server
    python examples/llm_agent.py --base-url https://api.openai.com/v1 --model gpt-4o-mini \\
        --api-key-env OPENAI_API_KEY                                                  # OpenAI
    python examples/llm_agent.py --base-url http://127.0.0.1:8000/v1 --model smollm2 \\
        --json-tools --response-format json_object --max-tokens 200      # llama-cpp-python, a small model

The story is printed as it happens: the model's words as they stream in (after
"..."), the tokens each reply cost, then each note of the notebook. The agent
is microagent.demo's support_agent, exactly as `python -m microagent` runs it
with its rule-based brain; only the policy differs. The human who signs off
refunds says yes to everything here.
"""

import argparse
import json
import sys

from microagent.demo import QUESTION, support_agent
from microagent.llm import LLMError, Usage, chat_policy
from microagent.trace import story


def main(argv: list[str] | None = None) -> int:
    """Run the refund office once with an LLM brain, printing the story as it streams."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default="http://localhost:11434/v1",
                        help="an OpenAI-compatible API, ending in /v1 (default: Ollama on this machine)")
    parser.add_argument("--model", required=True, help="the model's name on that server")
    parser.add_argument("--api-key-env", help="the environment variable that holds the API key, if one is needed")
    parser.add_argument("--no-stream", action="store_true", help="wait for each whole reply")
    parser.add_argument("--json-tools", action="store_true",
                        help="for models without native tool calling: one JSON object per turn")
    parser.add_argument("--response-format", choices=["json_schema", "json_object"],
                        help="with --json-tools: send the JSON Schema of a move (json_schema: OpenAI's form, "
                             "a hint there, since the brain sends no \"strict\": true; json_object: llama.cpp's; "
                             "vLLM and llama.cpp enforce it)")
    parser.add_argument("--tool-choice", help="auto, required, none, or a tool's name: that tool is then forced on "
                                              "EVERY turn, so the run never reaches final_answer (llama-cpp-python's "
                                              "server calls no tool unless one is named: for a whole run there, use "
                                              "--json-tools --response-format json_object)")
    parser.add_argument("--max-tokens", type=int, help="the most tokens one reply may take")
    parser.add_argument("--extra", type=json.loads, help='further request fields, as JSON: \'{"cache_prompt": true}\'')
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the server (default 120)")
    parser.add_argument("--deadline", type=float, default=300.0, help="seconds for one whole reply (default 300)")
    parser.add_argument("question", nargs="?", default=QUESTION, help="what the customer asks")
    options = parser.parse_args(argv)

    choice = options.tool_choice
    if choice not in (None, "auto", "required", "none"):  # a tool's name: that tool, every turn
        choice = {"type": "function", "function": {"name": choice}}
    try:
        policy = chat_policy(options.model, options.base_url, api_key_env=options.api_key_env,
                             stream=not options.no_stream, native_tools=not options.json_tools,
                             response_format=options.response_format, tool_choice=choice,
                             max_tokens=options.max_tokens, extra=options.extra, timeout=options.timeout,
                             deadline=options.deadline)
    except ValueError as e:  # a setting that can't work, such as a key variable that is not set
        print(f"error: {e}", file=sys.stderr)
        return 2  # as argparse does for a bad command line
    agent = support_agent(policy=policy)
    told, writing = 0, False  # lines of the story printed so far; in the middle of the model's words?
    try:
        for step in agent.steps(options.question):
            lines = story(step.context).splitlines()
            if writing and (lines[told:] or not isinstance(step.event, str)):
                print()  # the model's words have ended
                writing = False
            for line in lines[told:]:  # the notes written since the last step
                print(line)
            told = len(lines)
            if isinstance(step.event, str):  # a piece of the model's words, as it streams in
                print(step.event if writing else "  ... " + step.event, end="", flush=True)
                writing = True
            elif isinstance(step.event, Usage):
                print(f"      (tokens: {step.event.prompt_tokens} in, {step.event.completion_tokens} out)")
    except LLMError as e:
        print(f"\nerror: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
