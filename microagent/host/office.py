"""The hosted refund office: microagent.demo's office, with a refund booked in a ledger.

The refund waits for a human, and is booked in the store's database keyed by its
tool call (CALL, which the stream sets around each step), so a call carried out
again hands back its first receipt: a refund is paid once. `llm_office` puts
microagent.llm's brain in it, its words streamed as `thinking` events.
"""

from microagent.agent import Agent
from microagent.demo import dollars, refund_problem, support_agent, support_policy
from microagent.host.store import open_db
from microagent.host.stream import CALL, Unsettled, thinking
from microagent.llm import chat_policy
from microagent.message import Message
from microagent.schema import as_tool
from microagent.tool import Tool, error_note
from microagent.transport import hardened


def refund_office(db: str, policy=support_policy) -> Agent:
    """microagent.demo's office; its refund waits for a human, and pays once a call."""
    return support_agent(policy, refund=ledger_refund(db))


def ledger_refund(db: str) -> Tool:
    """The refund, written into a ledger in the database, keyed by the tool call."""
    ledger = open_db(db)  # the store's database: a sqlite file, or PostgreSQL
    ledger.schema(f"CREATE TABLE IF NOT EXISTS refunds (n {ledger.serial}, "
                  "call TEXT NOT NULL UNIQUE, order_id TEXT, amount DOUBLE PRECISION)")

    @as_tool(needs_approval=True)
    def issue_refund(order_id: str, amount: float) -> str | Message:
        """Refund an amount in dollars to the card the order was paid with."""
        call = CALL.get(None)
        if call is None:
            raise RuntimeError("the hosted refund runs where microagent.host.CALL is set "
                               "to the tool call's identity (the host sets it around "
                               "each step)")
        if problem := refund_problem(amount):  # -500, or $0.001: nothing is booked
            return error_note("issue_refund", problem)
        if float(amount) != amount:  # 10**30 booked as 1000000000000000019884624838656
            return error_note("issue_refund", f"{amount} is more than the ledger can "
                                              "book exactly: refund it in parts")
        try:  # keyed by the tool call, so a call run again hands back its first receipt
            with ledger.transaction() as run:  # the booking and its receipt, as one
                run("INSERT INTO refunds (call, order_id, amount) VALUES (?, ?, ?) "
                    "ON CONFLICT (call) DO NOTHING", (call, order_id, float(amount)))
                rows, _ = run("SELECT n, amount FROM refunds WHERE call = ?", (call,))
                [(n, paid)] = rows
        except Exception as e:  # the connection dropped, or the commit went unanswered
            raise Unsettled(f"{type(e).__name__}") from e
        return f"{dollars(paid)} refunded to the original card (receipt R{n})"
    return issue_refund


def llm_office(model: str, base_url: str, api_key: str | None = None):
    """The refund office with microagent.llm's brain, its words streamed as `thinking`."""
    def office(db: str) -> Agent:
        brain = chat_policy(model, base_url, api_key=api_key, on_text=thinking,
                            send=hardened(), system="You answer customers' questions "
                                                    "about orders and refunds.")
        return refund_office(db, policy=brain)
    return office
