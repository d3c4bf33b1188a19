"""A client of the hosted refund office, with the standard library alone: one whole session.

    python -m microagent.host                       # in one terminal: the server
    python examples/host_client.py                  # in another: alice asks, and approves the refund
    python examples/host_client.py --deny "send it back first"
    python examples/host_client.py --amount 70      # approve, with edited arguments

It creates a session, asks for a refund and prints each server-sent event as
it arrives; the stream ends waiting for approval, with a signed token. Then it
sends the verdict with that token, and prints the rest of the run. The bearer
token is read from the users file the server wrote; it is never printed. The
protocol is in microagent/host/README.md.
"""

import argparse
import http.client
import json
import urllib.parse

QUESTION = "Can I get a refund for order A1234? It arrived broken."


def post(url: str, token: str, path: str, body: dict):
    """POST a JSON body; yield (event, data) as each arrives, or one ("answer", JSON) if it is no stream."""
    where = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
    conn.request("POST", path, json.dumps(body), {"Authorization": f"Bearer {token}",
                                                   "Content-Type": "application/json"})
    response = conn.getresponse()
    if response.getheader("Content-Type") != "text/event-stream":
        yield "answer", {"status": response.status, **json.loads(response.read())}
        return
    event = None
    for line in response:  # one line at a time, as the server writes them
        line = line.decode().rstrip("\n")
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield event, json.loads(line.removeprefix("data: "))
    conn.close()


def show(event: str, data: dict) -> None:
    if event == "result":
        print(f"  {data['tool']} -> {data['content']}")
    elif event == "approval_required":
        print(f"  waiting for approval: {data['tool']} {json.dumps(data['args'])}")
    else:
        print(f"  {event}: {json.dumps(data)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--users", default="microagent-users.json", help="the server's users file")
    parser.add_argument("--user", default="alice")
    parser.add_argument("--deny", metavar="REASON", help="say no, with this reason")
    parser.add_argument("--amount", type=float, help="approve this amount instead of the one asked")
    options = parser.parse_args(argv)
    with open(options.users) as f:
        token = json.load(f)[options.user]

    [(_, created)] = post(options.url, token, "/sessions", {})
    sid = created["id"]
    print(f"{options.user} asks: {QUESTION}")
    asked = None
    for event, data in post(options.url, token, f"/sessions/{sid}/messages", {"text": QUESTION}):
        show(event, data)
        asked = data if event == "approval_required" else asked
    if asked is None:
        return
    verdict = {"approval_token": asked["approval_token"], "approve": options.deny is None}
    if options.deny is not None:
        verdict["reason"] = options.deny
    elif options.amount is not None:
        verdict["args"] = {**asked["args"], "amount": options.amount}
    print(f"{options.user} {'approves' if verdict['approve'] else 'denies'}:")
    for event, data in post(options.url, token, f"/sessions/{sid}/approvals", verdict):
        show(event, data)


if __name__ == "__main__":
    main()
