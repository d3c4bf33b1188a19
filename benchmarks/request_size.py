"""Measure what the LLM brain sends per turn: the bytes of each request of the scripted refund.

    python benchmarks/request_size.py            # native tool calls, then JSON mode

The refund office is driven through the LLM brain against the stand-in model server on
127.0.0.1 (microagent.transport.stand_in), which replays a scripted model (three tool
calls, then the answer in words). The office is the one the frameworks in the README's
table were measured with: a 24-byte instruction and three tool functions with
Google-style docstrings. The bytes are caught at the brain's one seam: a `send` that
keeps each body as it goes on the wire, then hands it to the book's `post`. For each
request it prints its bytes, the bytes of its tools array, the share of it that is new
(the rest repeats the request before, byte for byte from the start), and the share of
the request before that it so repeats (what a server's prompt cache can reuse). No
model, no network beyond this machine.
"""

import json
import os

from microagent.agent import Agent
from microagent.demo import ORDERS, QUESTION
from microagent.llm import chat_policy, post
from microagent.schema import as_tool
from microagent.tool import final_answer
from microagent.transport.stand_in import reply, serve

INSTRUCTION = "You are a support agent."  # 24 bytes


@as_tool
def look_up_order(order_id: str) -> str:
    """Look up an order by its id.

    Args:
        order_id: The order's id.
    """
    item, price, state = ORDERS.get(order_id, ("?", 0, "no such order"))
    return f"{order_id}, {item}, ${price}, {state}"


@as_tool
def check_policy(order_id: str) -> str:
    """Check if an order qualifies for a refund.

    Args:
        order_id: The order's id.
    """
    return "eligible, within the 30 day window and reported defective"


@as_tool
def issue_refund(order_id: str, amount: float) -> str:
    """Refund an order to its card.

    Args:
        order_id: The order's id.
        amount: The amount, in dollars.
    """
    return f"${amount:g} refunded to the original card"


def script(native: bool) -> list[dict]:
    """The scripted model: three calls, then the answer in words (as JSON moves without native tools)."""
    moves = [("look_up_order", {"order_id": "A1234"}), ("check_policy", {"order_id": "A1234"}),
             ("issue_refund", {"order_id": "A1234", "amount": 79})]
    answer = "Good news: A1234 qualifies, and $79 is on its way back to your card."
    if native:
        return [reply(calls=[(name, json.dumps(args))]) for name, args in moves] + [reply(answer)]
    return [reply(json.dumps({"tool": name, "args": args, "reasoning": ""})) for name, args in moves] + \
        [reply(json.dumps({"tool": "final_answer", "args": {"answer": answer}, "reasoning": ""}))]


def measure(native: bool) -> list[tuple[int, int, float, float]]:
    """For each request of the run: its bytes, its tools array's bytes, the share of it that
    repeats the request before from the start, and the share of the request before so repeated."""
    sent = []

    def keeping(url, body, headers):  # the bytes exactly as they go on the wire
        sent.append(body)
        return post(url, body, headers)
    with serve(script(native)) as server:
        brain = chat_policy("stand-in", server.url, system=INSTRUCTION, native=native, stream=False,
                            send=keeping)
        Agent(brain, [look_up_order, check_policy, issue_refund, final_answer]).run(QUESTION)
    rows, before = [], b""
    for data in sent:
        tools_bytes = 0
        if b'"tools":' in data:  # the array exactly as sent: from its "[" to its "]"
            text = data.decode()
            start = text.index("[", text.index('"tools":'))
            tools_bytes = len(text[start:json.JSONDecoder().raw_decode(text, start)[1]].encode())
        same = len(os.path.commonprefix([before, data]))  # bytes from the start that repeat the one before
        rows.append((len(data), tools_bytes, same / len(data), same / len(before) if before else 0.0))
        before = data
    return rows


if __name__ == "__main__":
    for native in (True, False):
        rows = measure(native)
        print("native tool calls" if native else "JSON mode (tools described in the prompt)")
        print(f"{'request':>8} {'bytes':>7} {'tools array':>12} {'new':>7} {'the one before, reused':>23}")
        for n, (size, tools, share, reused) in enumerate(rows, start=1):
            print(f"{n:>8} {size:>7,} {tools:>12,} {1 - share:>7.1%} {f'{reused:.1%}' if n > 1 else '-':>23}")
        print(f"{'run':>8} {sum(r[0] for r in rows):>7,}\n")
