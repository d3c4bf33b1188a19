"""Test settings: hypothesis keeps its files in a temporary folder, so the tests write nothing into the project;
stand-in model servers for the LLM brain's tests; and a real PostgreSQL server (tests/postgres_cluster.py) for
the tests that ask for one."""

import itertools
import os
import tempfile

import pytest
from hypothesis import configuration, settings

import postgres_cluster as postgres_cluster_module
from microagent.schema import as_tool
from microagent.transport.stand_in import serve

configuration.set_hypothesis_home_dir(tempfile.mkdtemp(prefix="microagent-hypothesis-"))
settings.register_profile("microagent", database=None, deadline=None)  # a busy 2-core machine is slow by chance
settings.load_profile("microagent")


@pytest.fixture
def stand_in():
    """Start stand-in model servers with scripted replies (over TLS with a certificate); all are
    closed after the test."""
    started = []

    def start(*script, certificate=None):
        started.append(serve(list(script), certificate))
        return started[-1]
    yield start
    for server in started:
        server.close()


# ----------------------------------------------------------------------------
# the LLM brain's tests (test_llm.py, transport/test_transport.py): a key, a tool, an approver

KEY = "sk-proj-" + "k" * 36  # 44 characters, as OpenAI's keys are


@as_tool
def add(a: int, b: int) -> int:
    """Add two whole numbers."""
    return a + b


def yes(tool_name, args) -> bool:
    return True


# ----------------------------------------------------------------------------
# a real PostgreSQL server for the host's store: one cluster for the whole run, a new
# database for each test that asks. Without PostgreSQL's binaries (or psycopg) its tests
# skip and say why; .ci/run sets MICROAGENT_POSTGRES=required, and then they fail instead.

def new_cluster():
    """A new throwaway PostgreSQL server, or the test skips (fails, if it is required) and says why."""
    reason = postgres_cluster_module.why_not()
    if reason:
        (pytest.fail if os.environ.get("MICROAGENT_POSTGRES") == "required" else pytest.skip)(reason)
    return postgres_cluster_module.Cluster()


@pytest.fixture(scope="session")
def postgres_cluster():
    cluster = new_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture
def postgres(postgres_cluster) -> str:
    """The postgresql:// URL of a new, empty database."""
    return postgres_cluster.database(f"test_{next(DATABASES)}")


DATABASES = itertools.count()
