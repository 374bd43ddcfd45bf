"""The bus contract (sync_server/testing/contracts/bus.py: BUS_CHECKS), check
by check on the project's bus, and `check_bus` as a third-party bus would
call it, naming the check a bus fails."""

from __future__ import annotations

from typing import Any

import pytest

from sync_server.hosting.bus import LocalBus
from sync_server.testing.contracts import BUS_CHECKS, check_bus


@pytest.mark.parametrize("check", BUS_CHECKS, ids=lambda check: check.__name__)
def test_the_local_bus_keeps_the_contract(check: Any) -> None:
    check(LocalBus())


def test_check_bus_runs_every_check_on_a_fresh_bus() -> None:
    made: list[LocalBus] = []

    def fresh() -> LocalBus:
        made.append(LocalBus())
        return made[-1]

    check_bus(fresh)
    assert len(made) == len(BUS_CHECKS) and len(set(map(id, made))) == len(made)


class Unguarded(LocalBus):
    """A bus that renders in its loop and lets one sink's error escape (as
    the project's bus did before the bus carried bytes)."""

    def publish(self, room: str, frame: dict[str, Any], view: Any = None, **kw: Any) -> None:
        for sink in list(self._rooms.get(room, ())):
            key = None if view is None else view.key(sink.viewer)
            data = sink.codec.encode(frame if key is None else view.render(sink.viewer))
            sink.deliver(data.encode() if isinstance(data, str) else data, frame.get("v"))


def test_check_bus_names_the_check_a_bus_fails() -> None:
    with pytest.raises(AssertionError, match="bus contract, each_frame_is_encoded_once"):
        check_bus(Unguarded)
