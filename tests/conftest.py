"""Shared fixtures live in tests/helpers/; each family registers here.

The suite runs on xdist's workers (pyproject's addopts): `--dist loadgroup`
sends the tests one by one to whichever worker is free, except a module
marked `xdist_group` (its costly module fixture made once), which one
worker runs whole."""

from pathlib import Path

import pytest

pytest_plugins: list[str] = []
pytest_plugins += ["tests.helpers.server", "tests.helpers.browser", "tests.helpers.pg"]

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The whole-repository checks (tests/test_*.py: the static checks, the
    JavaScript suites, the README's commands on a fresh copy) first: they
    are the longest, and sent last they would leave one worker running
    them alone at the end. The order is otherwise kept (a stable sort)."""
    items.sort(key=lambda item: item.path.parent != HERE)
