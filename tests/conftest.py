"""Test settings: hypothesis keeps its files in a temporary folder, so the tests write nothing into the project."""

import tempfile

from hypothesis import configuration, settings

configuration.set_hypothesis_home_dir(tempfile.mkdtemp(prefix="microagent-hypothesis-"))
settings.register_profile("microagent", database=None)
settings.load_profile("microagent")
