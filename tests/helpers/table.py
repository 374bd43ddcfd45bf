"""The rules engine's test table, from the product (`rules.testing`)."""

from rules.testing import SHEET, Table, stable_room

__all__ = ["SHEET", "Table", "stable_room"]
