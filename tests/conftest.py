"""Shared fixtures live in tests/helpers/; each family registers here."""

pytest_plugins: list[str] = []
