"""The engine's test table, re-exported from the product's `rules.testing`
(where the benchmarks find it too, without importing the test suite)."""

from rules.testing import SHEET, AlwaysDice, Table, infirmary, stable_room

__all__ = ["SHEET", "AlwaysDice", "Table", "infirmary", "stable_room"]
