"""An A2A agent served by the a2a-sdk server (on uvicorn), for tests/a2a/test_client.py.

    python tests/a2a/client_peer.py [--no-streaming]

binds 127.0.0.1 on a free port, prints that port on a line of its own, and serves the
agent until killed. What it does is read off the request's first word:

    complete ...  completed, with the request as an artifact ("done: ...")
    ask ...       input_required ("Which order?"); the answer completes it
    auth ...      auth_required ("bob must approve the refund first")
    fail ...      failed ("the refund desk is closed")
    reject ...    rejected ("refunds over $500 are not ours")
    stream ...    each later word a working status of its own, then completed
    slow ...      working, and then nothing until it is cancelled
    agent ...     a microagent Agent (a scripted brain) runs the request; its answer

Its task ids count, task-1, task-2, ..., so a scripted brain can name the first one.
Code nobody here wrote answers here: the client under test must speak the SDK's A2A.
"""

import asyncio
import socket
import sys

import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message, new_text_message, \
    new_text_part
from a2a.server.agent_execution import AgentExecutor, SimpleRequestContextBuilder
from a2a.server.id_generator import IDGenerator
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, \
    TaskState
from starlette.applications import Starlette

from microagent import Action, Agent, final_answer, scripted


class Office(AgentExecutor):
    async def execute(self, context, event_queue):
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
        said = context.get_user_input()
        todo = TaskUpdater(event_queue, task.id, task.context_id)

        def words(text):
            return new_text_message(text, context_id=task.context_id, task_id=task.id)
        if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:  # the answer
            await todo.add_artifact([new_text_part(f"refunded order {said}")])
            await todo.complete()
            return
        first = said.split()[0].rstrip(":") if said.split() else ""
        if first == "complete":
            await todo.add_artifact([new_text_part(f"done: {said}")], name="answer")
            await todo.complete()
        elif first == "ask":
            await todo.requires_input(words("Which order?"))
        elif first == "auth":
            await todo.requires_auth(words("bob must approve the refund first"))
        elif first == "fail":
            await todo.failed(words("the refund desk is closed"))
        elif first == "reject":
            await todo.reject(words("refunds over $500 are not ours"))
        elif first == "stream":
            for word in said.split()[1:]:
                await todo.start_work(words(word + " "))
                await asyncio.sleep(0.01)
            await todo.add_artifact([new_text_part("streamed")])
            await todo.complete()
        elif first == "agent":  # a Python agent behind the A2A agent
            brain = scripted(Action("final_answer", {"answer": f"an agent says: {said}"}))
            answer = Agent(brain, [final_answer], name="inner").run(said).last().content
            await todo.add_artifact([new_text_part(answer)])
            await todo.complete()
        elif first == "slow":
            await todo.start_work(words("working on it"))
            await asyncio.sleep(3600)
        else:
            await todo.failed(words(f"no such request: {said!r}"))

    async def cancel(self, context, event_queue):
        task = context.current_task
        await TaskUpdater(event_queue, task.id, task.context_id).cancel()


class Counting(IDGenerator):
    def __init__(self, kind):
        self.kind, self.made = kind, 0

    def generate(self, context):
        self.made += 1
        return f"{self.kind}-{self.made}"


def app(port: int, streaming: bool) -> Starlette:
    card = AgentCard(
        name="Refund office", description="A small office that refunds orders.",
        version="1.0", default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        capabilities=AgentCapabilities(streaming=streaming),
        supported_interfaces=[AgentInterface(url=f"http://127.0.0.1:{port}/",
                                             protocol_binding="JSONRPC",
                                             protocol_version="1.0")],
        skills=[AgentSkill(id="refunds", name="refunds",
                           description="Refunds an order, asking what it needs to know.",
                           tags=["refunds"], examples=["refund order A1234"])])
    store = InMemoryTaskStore()
    ids = SimpleRequestContextBuilder(task_store=store, task_id_generator=Counting("task"),
                                      context_id_generator=Counting("context"))
    handler = DefaultRequestHandler(agent_executor=Office(), task_store=store, agent_card=card,
                                    request_context_builder=ids)
    return Starlette(routes=create_agent_card_routes(card)
                     + create_jsonrpc_routes(handler, "/"))


if __name__ == "__main__":
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    print(port, flush=True)
    config = uvicorn.Config(app(port, "--no-streaming" not in sys.argv), log_level="error")
    uvicorn.Server(config).run(sockets=[sock])
