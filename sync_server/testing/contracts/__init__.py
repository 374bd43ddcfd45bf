"""The storage, lease and bus contracts, shipped with the product (as trio
ships `trio.testing.check_two_way_stream`): what every `Storage` backend,
every cluster `Leases` backend and every `RoomBus` must do. A third-party
backend runs them on itself:

    from sync_server.testing.contracts import check_bus, check_leases, check_storage
    await check_storage(lambda: MyStorage(...))   # a fresh, empty store each time
    await check_leases(my_world)                  # a fresh LeaseWorld each time
    check_bus(lambda: MyBus(...))                 # a fresh bus each time

  storage   the storage contract (`check_storage`, `STORAGE_CHECKS`) and the
            helpers its checks and the project's tests share
  leases    the lease contract (`check_leases`, `LEASE_CHECKS`, on a
            `LeaseWorld` of `LeaseNode`s sharing a database)
  bus       the bus contract (`check_bus`, `BUS_CHECKS`)

The project's own suite runs each check on every backend
(tests/server/test_storage_contract.py, tests/server/test_lease_contract.py
on SQLite's workers leases and PostgreSQL's, tests/server/test_bus_contract.py).
"""

from sync_server.testing.contracts.bus import BUS_CHECKS, check_bus
from sync_server.testing.contracts.leases import (
    LEASE_CHECKS,
    LeaseNode,
    LeaseWorld,
    check_leases,
)
from sync_server.testing.contracts.storage import (
    STORAGE_CHECKS,
    check_storage,
    load,
    make_room,
    raises,
    record,
    stored_patches,
)

__all__ = [
    "BUS_CHECKS",
    "LEASE_CHECKS",
    "STORAGE_CHECKS",
    "LeaseNode",
    "LeaseWorld",
    "check_bus",
    "check_leases",
    "check_storage",
    "load",
    "make_room",
    "raises",
    "record",
    "stored_patches",
]
