"""Shared fixtures: one random generator per test, seeded from the run seed
(seeding.py) and the test's id."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import seeding  # noqa: E402


def pytest_report_header(config):
    return f"flashpp test seed: FLASHPP_TEST_SEED={seeding.RUN_SEED}"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if exitstatus != 0:
        terminalreporter.write_line(f"flashpp: {seeding.reproduce_hint()}")


@pytest.fixture
def seed(request):
    return seeding.seed_for(request.node.nodeid)


@pytest.fixture
def rng(seed):
    np = pytest.importorskip("numpy")
    return np.random.default_rng(seed)
