"""The room's recent patches in memory (sync_server/core/recent.py): what a
resume and the history read back, and what the garbage collector sees."""

from __future__ import annotations

import gc

from sync_server.core.recent import RecentPatches


def test_after_gives_the_versions_after_since_while_memory_holds_the_next_one() -> None:
    recent: RecentPatches[dict] = RecentPatches(3, [(5, {"v": 5}), (6, {"v": 6})])
    for v in (7, 8):
        recent.append(v, {"v": v})
    assert (len(recent), recent.first_v, recent.last_v) == (3, 6, 8)  # 5 fell off the front
    assert recent.after(5) == [{"v": 6}, {"v": 7}, {"v": 8}]
    assert recent.after(7) == [{"v": 8}]
    assert recent.after(8) == []
    assert recent.after(4) is None  # version 5 is no longer in memory
    assert RecentPatches(3).after(0) is None
    assert [p["v"] for p in recent.newest_first()] == [8, 7, 6]


def test_what_goes_in_is_a_copy_read_back_whole() -> None:
    recent: RecentPatches[tuple] = RecentPatches(2)
    ops: list[list[object]] = [["set", ["name"], "A"]]
    patch = {"v": 1, "ops": ops}
    afford = {("player", "ann"): [["set", ["affordances"], {}]]}
    recent.append(1, (patch, None, afford))
    ops.append(["del", ["x"]])  # a later change is not seen
    assert recent.after(0) == [({"v": 1, "ops": [["set", ["name"], "A"]]}, None, afford)]


def test_past_a_hole_in_the_versions_only_what_follows_it_is_held() -> None:
    """A log loaded with a version missing before its snapshot: a resume
    from before the hole must get a snapshot, never patches that skip one."""
    recent: RecentPatches[dict] = RecentPatches(4, [(1, {"v": 1}), (2, {"v": 2})])
    recent.append(4, {"v": 4})
    assert (len(recent), recent.first_v, recent.last_v) == (1, 4, 4)
    assert recent.after(1) is None and recent.after(3) == [{"v": 4}]


def test_the_collector_walks_none_of_the_patches_held() -> None:
    """The reason for the blobs: a patch's lists and dicts would each be one
    more object of every collector pass (docs/performance.md)."""
    recent: RecentPatches[dict] = RecentPatches(500)
    before = len(gc.get_objects())
    for v in range(1, 501):
        recent.append(v, {"v": v, "ops": [["set", ["characters", "c1", "pv"], v]], "events": []})
    assert len(gc.get_objects()) - before < 50  # 500 patches of 4 containers each otherwise
