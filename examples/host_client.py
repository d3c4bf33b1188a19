"""Clients of the hosted refund office, with the standard library alone: one whole session, two people.

    python -m microagent.host                       # in one terminal: the server
    python examples/host_client.py                  # in another: alice asks, bob approves the refund
    python examples/host_client.py --deny "send it back first"
    python examples/host_client.py --amount 70      # bob approves, with edited arguments

Alice creates a session, asks for a refund and prints each server-sent event as
it arrives; her stream ends with the refund waiting for an approver. Bob, who
approves, reads his queue: the decisions waiting for him, each with a signed
token made out to him. He sends his verdict with it, and his stream prints the
rest of the run. The bearer tokens are read from the users file the server
wrote (alice asks, bob approves); they are never printed. The protocol is in
microagent/host/README.md.
"""

import argparse
import http.client
import json
import sys
import urllib.parse

QUESTION = "Can I get a refund for order A1234? It arrived broken."


def request(url: str, token: str, method: str, path: str, body: dict | None = None):
    """One request; yield (event, data) as each arrives, or one ("answer", JSON) if it is no stream."""
    where = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(where.hostname, where.port, timeout=60)
    conn.request(method, path, None if body is None else json.dumps(body),
                 {"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
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
        print(f"  waiting for {data.get('waits_for', 'you')}: {data['tool']} {json.dumps(data['args'])}")
    else:
        print(f"  {event}: {json.dumps(data)}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--users", default="microagent-users.json", help="the server's users file")
    parser.add_argument("--asker", default="alice")
    parser.add_argument("--approver", default="bob")
    parser.add_argument("--deny", metavar="REASON", help="say no, with this reason")
    parser.add_argument("--amount", type=float, help="approve this amount instead of the one asked")
    options = parser.parse_args(argv)
    with open(options.users) as f:
        users = json.load(f)
    # a user is {"token": ..., "roles": [...]}, or a bare token
    asker, approver = (users[name]["token"] if isinstance(users[name], dict) else users[name]
                       for name in (options.asker, options.approver))

    [(_, created)] = request(options.url, asker, "POST", "/sessions", {})
    sid = created["id"]
    print(f"{options.asker} asks: {QUESTION}")
    for event, data in request(options.url, asker, "POST", f"/sessions/{sid}/messages", {"text": QUESTION}):
        show(event, data)
    [(_, queue)] = request(options.url, approver, "GET", "/approvals")
    if "error" in queue:
        sys.exit(f"{options.approver} has no queue: {queue['error']}")
    asked = next((w for w in queue["waiting"] if w["session"] == sid), None)
    if asked is None:
        sys.exit(f"nothing from this session waits in {options.approver}'s queue")
    print(f"{options.approver}'s queue: {asked['tool']} {json.dumps(asked['args'])}, asked by {asked['asker']}")
    verdict = {"approval_token": asked["approval_token"], "approve": options.deny is None}
    if options.deny is not None:
        verdict["reason"] = options.deny
    elif options.amount is not None:
        verdict["args"] = {**asked["args"], "amount": options.amount}
    print(f"{options.approver} {'approves' if verdict['approve'] else 'denies'}:")
    for event, data in request(options.url, approver, "POST", f"/sessions/{sid}/approvals", verdict):
        show(event, data)


if __name__ == "__main__":
    main()
