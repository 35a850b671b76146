"""The injection suite's figures, printed after the run so `make test` shows them; a replaying agent."""

import pytest

from agents.models import Agent, ModelProfile, Tool
from agents.services import agent_publish

FIGURES: list[str] = []


def pytest_terminal_summary(terminalreporter):
    if FIGURES:
        terminalreporter.section("security figures")
        for line in FIGURES:
            terminalreporter.write_line(line)


@pytest.fixture
def replay_agent(demo):
    """An agent whose model follows the script given as the run's input (tests/runs/backends.py)."""
    profile = ModelProfile.objects.create(name="replay", backend="replay", model="replay-1")
    agent = Agent.objects.create(slug="replayer", name="Replayer", instructions="Follow the script.",
                                 model_profile=profile)
    agent.tools.set(Tool.objects.all())
    agent_publish(agent=agent)
    return agent
