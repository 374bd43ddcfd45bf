"""Shared fixtures live in tests/helpers/; each family registers here."""

pytest_plugins: list[str] = []
pytest_plugins += ["tests.helpers.server", "tests.helpers.browser", "tests.helpers.pg"]
