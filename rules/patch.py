"""Patches: the change vocabulary of the state dict (docs/protocol.md, "cmd -> patch").

`diff(old, new)` gives the ops that turn `old` into `new`; `invert(ops, old)`
the ops that turn it back; `apply_ops(state, ops)` replays either. Pure
functions over plain dicts: the server diffs and stores both directions, the
clients mirror, and undo applies inverse ops, all with these three.
Maps are diffed key by key; lists and scalars are replaced whole.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Mapping
from typing import Any

Op = list[Any]

# Path parts no op may name: in JavaScript, `obj["__proto__"] = ...` (and
# `constructor.prototype`) reach every object's prototype, so a crafted op
# would pollute a browser client's whole page. No state has such keys (ids
# refuse them, rules/validate.py); every client's apply_ops refuses them.
FORBIDDEN_KEYS = frozenset({"__proto__", "constructor", "prototype"})


def diff(
    old: dict[str, Any],
    new: dict[str, Any],
    path: tuple[str, ...] = (),
    touched: Mapping[str, Collection[str]] | None = None,
) -> list[Op]:
    """Ops turning `old` into `new` (maps recurse, everything else is set whole).

    `touched` names, for some keys of `new`, the only entries of that map
    that may differ from `old`'s (every other entry being the very same
    object): only those are compared, so the cost follows the change, not
    the map's size (a command touching 2 characters of 200). The ops are
    the same as without it, in another order within that map (sorted by
    key), which changes nothing: they touch disjoint paths."""
    ops: list[Op] = []
    _diff(old, new, list(path), ops, touched)
    return ops


def _diff(
    old: dict[str, Any],
    new: dict[str, Any],
    path: list[str],
    ops: list[Op],
    touched: Mapping[str, Collection[str]] | None = None,
) -> None:
    for key, value in new.items():
        if key not in old:
            ops.append(["set", [*path, key], value])
            continue
        before = old[key]
        if before is value:
            continue
        if isinstance(value, dict) and isinstance(before, dict):
            some = None if touched is None else touched.get(key)
            if some is not None:  # only those entries: the two maps cut down to them
                keys = sorted(some)
                before = {k: before[k] for k in keys if k in before}
                value = {k: value[k] for k in keys if k in value}
            _diff(before, value, [*path, key], ops)
        elif before != value or type(before) is not type(value):
            ops.append(["set", [*path, key], value])
    for key in old:
        if key not in new:
            ops.append(["del", [*path, key]])


def invert(ops: list[Op], old: dict[str, Any]) -> list[Op]:
    """The ops that turn the new state back into `old`: the same as
    `diff(new, old)`, but in time proportional to the change, not to the
    state (the ops of `diff` touch disjoint paths whose parents exist in
    `old`, so each one is undone by restoring or removing its own path)."""
    inverse: list[Op] = []
    for op in reversed(ops):
        path = op[1]
        node: Any = old
        for key in path:
            if isinstance(node, dict) and key in node:
                node = node[key]
            else:
                inverse.append(["del", list(path)])
                break
        else:
            inverse.append(["set", list(path), node])
    return inverse


def applied(state: dict[str, Any], ops: list[Op]) -> dict[str, Any]:
    """`apply_ops(copy.deepcopy(state), ops)`, copy-on-write: a new state
    that shares with `state` every part the ops do not touch (each dict on
    an op's path is copied once, shallow), so its cost follows the ops, not
    the state (an undo copied a 98-character room whole; an import's views,
    each of 2,000 versions of a 200-character one). Neither state may then
    be changed in place where they share: callers read it, or copy first.
    `state` itself is never changed; the errors are apply_ops's."""
    root = dict(state)
    return _apply(root, ops, {id(root)})


def apply_ops(state: dict[str, Any], ops: list[Op]) -> dict[str, Any]:
    """Apply `ops` to `state` in place and return it. Values are copied in,
    so the caller's ops never alias the state."""
    return _apply(state, ops, None)


def _apply(root: dict[str, Any], ops: list[Op], copied: set[int] | None) -> dict[str, Any]:
    """Both of the above: `copied` None changes `root` in place; a set (the
    ids of the dicts already copied) copies each dict on an op's path once
    before changing it (copy-on-write)."""
    for op in ops:
        kind, path = op[0], op[1]
        if not path:
            raise ValueError("an op needs a non-empty path")
        for key in path:
            if type(key) is not str or key in FORBIDDEN_KEYS:
                raise ValueError(f"an op's path may not hold {key!r}")
        target = root
        for key in path[:-1]:
            child = target[key]
            if copied is not None and type(child) is dict and id(child) not in copied:
                child = target[key] = dict(child)
                copied.add(id(child))
            target = child
        if kind == "set":
            target[path[-1]] = copy.deepcopy(op[2])
        elif kind == "del":
            del target[path[-1]]
        else:
            raise ValueError(f"unknown patch op {kind!r}")
    return root
