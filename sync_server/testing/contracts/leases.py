"""The lease contract: what every cluster `Leases` backend must do
(cluster/leases.py: one node per room at a time, every claim a new epoch,
every commit under a lost claim refused whole), run on a shared database by
several nodes, each a storage and the leases fencing it, as the server
composes them. A backend offers a `LeaseWorld`: its nodes, and a way to
make a lease run out by the clock the leases are read by (the database's,
or the machine's); `check_leases` runs every check in a fresh world.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable
from typing import Protocol

import attrs

from sync_server.cluster.leases import (
    RENEWALS_PER_LEASE,
    Claim,
    LeaseKeeper,
    Leases,
    Owner,
)
from sync_server.core.auth import hash_token
from sync_server.storage import (
    AdminRecord,
    Fenced,
    RoomDeleted,
    Storage,
    VersionConflict,
)
from sync_server.testing.contracts.storage import load, raises, record


@attrs.frozen
class LeaseNode:
    """One node of a lease world: its storage and the leases fencing it."""

    name: str
    storage: Storage
    leases: Leases


class LeaseWorld(Protocol):
    """A shared database, fresh and empty, and the nodes on it."""

    def node(
        self, name: str, *, lease_seconds: float | None = None
    ) -> contextlib.AbstractAsyncContextManager[LeaseNode]:
        """A node `name` (its public URL its own), opened on entry; on exit
        its leases and storage close (releasing what it holds)."""
        ...

    async def expire(self, room: str) -> None:
        """The room's lease runs out now, by the clock the leases read."""
        ...


async def make_shared_room(n: LeaseNode, room: str = "r1", again: str = "") -> None:
    """A room created from `n`, not claimed (`again`: a new token and admin
    id, for a room created anew under the same id)."""
    await n.storage.create_room(
        room,
        {"clock": 0},
        "u1",
        hash_token(f"t-{room}{again}"),
        AdminRecord(f"mk-{room}{again}", "create_room", {}, {}, 0),
    )


async def stored_versions(n: LeaseNode, room: str = "r1") -> list[int]:
    """The versions stored of a room (read through the export)."""
    dump = await n.storage.export_room(room)
    return [] if dump is None else [r.v for r in dump.versions]


def _owner_of(n: LeaseNode) -> Owner:
    return Owner("r1", n.leases.node_id, n.leases.public_url)


async def one_winner_per_epoch_among_nodes_claiming_at_once(world: LeaseWorld) -> None:
    async with contextlib.AsyncExitStack() as stack:
        nodes = [await stack.enter_async_context(world.node(f"n{i}")) for i in range(8)]
        await make_shared_room(nodes[0])
        epochs: list[int] = []
        for round_ in range(4):
            results = await asyncio.gather(*(n.leases.claim("r1") for n in nodes))
            winners = [(n, r) for n, r in zip(nodes, results, strict=True) if isinstance(r, Claim)]
            assert len(winners) == 1, (round_, results)
            winner, claim = winners[0]
            assert [r for r in results if not isinstance(r, Claim)] == [_owner_of(winner)] * 7
            assert await nodes[3].leases.owner("r1") == _owner_of(winner)
            assert [n.name for n in nodes if n.leases.claim_of("r1")] == [winner.name]
            epochs.append(claim.epoch)
            if round_ % 2:
                await winner.leases.release(["r1"])
            else:
                await world.expire("r1")
                winner.leases.expired(math.inf)  # as its LeaseKeeper would, past its deadline
        assert epochs == sorted(set(epochs)), epochs


async def a_second_claim_before_expiry_gets_the_owners_url(world: LeaseWorld) -> None:
    async with world.node("a") as a, world.node("b") as b:
        await make_shared_room(a)
        first = await a.leases.claim("r1")
        assert isinstance(first, Claim)
        assert await b.leases.claim("r1") == _owner_of(a)
        assert b.leases.claim_of("r1") is None
        assert await b.leases.owner("r1") == _owner_of(a)
        assert await b.leases.claim("nope") is None and await b.leases.owner("nope") is None


async def a_claim_fences_the_previous_one_even_of_the_same_node(world: LeaseWorld) -> None:
    """A node restarted under the same id takes its rooms back at once; the
    old process, if it still ran (paused), is fenced by the new epoch."""
    async with world.node("a") as a:
        await make_shared_room(a)
        old = await a.leases.claim("r1")
        assert isinstance(old, Claim)
        await a.storage.commit("r1", [record(1)], None, 0)
        # (a short lease: a backend that watches the old process's heartbeat
        # before it takes the id over watches for less)
        async with world.node("a", lease_seconds=1.0) as restarted:
            new = await restarted.leases.claim("r1")
            assert isinstance(new, Claim) and new.epoch > old.epoch
            with raises(Fenced):
                await a.storage.commit("r1", [record(2)], None, 1)
            assert a.leases.claim_of("r1") is None
            await restarted.storage.commit("r1", [record(2)], None, 1)
            assert await stored_versions(restarted) == [1, 2]


async def after_another_node_claims_the_old_owners_commit_stores_nothing(
    world: LeaseWorld,
) -> None:
    async with world.node("a") as a, world.node("b") as b:
        await make_shared_room(a)
        await a.leases.claim("r1")
        await a.storage.commit("r1", [record(1)], None, 0)
        await world.expire("r1")  # a paused past its lease...
        assert isinstance(await b.leases.claim("r1"), Claim)  # ...and b took the room
        with raises(Fenced, match="lost its claim"):
            change = record(2, token_set=(("u9", hash_token("x")),))
            await a.storage.commit("r1", [change], (2, {"clock": 2}), 1)
        assert await stored_versions(b) == [1]
        assert await b.storage.find_token(hash_token("x")) is None
        assert a.leases.claim_of("r1") is None
        with raises(Fenced):  # refused from now on
            await a.storage.commit("r1", [record(2)], None, 1)
        await b.storage.commit("r1", [record(2)], None, 1)
        assert (await load(b.storage)).v == 2


async def an_expired_lease_nobody_took_still_refuses_the_commit(world: LeaseWorld) -> None:
    async with world.node("a") as a:
        await make_shared_room(a)
        first = await a.leases.claim("r1")
        assert isinstance(first, Claim)
        await world.expire("r1")
        with raises(Fenced):
            await a.storage.commit("r1", [record(1)], None, 0)
        assert await stored_versions(a) == []
        assert await a.leases.owner("r1") == Owner("r1", None, None)
        again = await a.leases.claim("r1")
        assert isinstance(again, Claim) and again.epoch > first.epoch
        await a.storage.commit("r1", [record(1)], None, 0)


async def a_commit_without_a_claim_is_fenced(world: LeaseWorld) -> None:
    async with world.node("a") as a:
        await make_shared_room(a)
        with raises(Fenced, match="claim it first"):
            await a.storage.commit("r1", [record(1)], None, 0)
        assert await stored_versions(a) == []


async def a_stale_head_under_a_valid_claim_is_a_plain_conflict(world: LeaseWorld) -> None:
    async with world.node("a") as a:
        await make_shared_room(a)
        await a.leases.claim("r1")
        await a.storage.commit("r1", [record(1)], None, 0)
        try:
            await a.storage.commit("r1", [record(1, "again")], None, 0)
        except VersionConflict as exc:
            assert not isinstance(exc, Fenced), exc
        else:
            raise AssertionError("a commit on a stale head was stored")
        assert a.leases.claim_of("r1") is not None  # still the owner


async def a_fenced_commit_among_concurrent_ones_is_refused_alone(world: LeaseWorld) -> None:
    """Commits of several rooms may be written together (a group commit):
    the fenced one is refused alone, the others land."""
    async with world.node("a") as a, world.node("b") as b:
        for room in ("r1", "r2"):
            await make_shared_room(a, room)
            await a.leases.claim(room)
        await world.expire("r1")
        await b.leases.claim("r1")
        results = await asyncio.gather(
            a.storage.commit("r1", [record(1)], None, 0),
            a.storage.commit("r2", [record(1, room="r2")], None, 0),
            return_exceptions=True,
        )
        assert isinstance(results[0], Fenced) and results[1] is None, results
        assert await stored_versions(a) == [] and await stored_versions(a, "r2") == [1]


async def every_acknowledged_commit_survives_a_takeover_under_load(world: LeaseWorld) -> None:
    """a commits as fast as it can; meanwhile its lease runs out and b
    claims. Every commit a saw succeed is in what b loads, b's head is
    exactly a's last success, and a succeeds no more once fenced."""
    async with world.node("a") as a, world.node("b") as b:
        await make_shared_room(a)
        await a.leases.claim("r1")
        acked: list[int] = []
        twenty = asyncio.Event()

        async def writer() -> None:
            v = 0
            while True:
                try:
                    await a.storage.commit("r1", [record(v + 1)], None, v)
                except Fenced:
                    return
                v += 1
                acked.append(v)
                if v == 20:
                    twenty.set()

        task = asyncio.get_running_loop().create_task(writer())
        try:
            await twenty.wait()
            await world.expire("r1")
            assert isinstance(await b.leases.claim("r1"), Claim)
            loaded = await load(b.storage)
        finally:
            await task  # ends when fenced
        assert loaded.v == acked[-1] and loaded.state["clock"] == acked[-1]
        assert await stored_versions(b) == acked == list(range(1, len(acked) + 1))


async def renewal_keeps_only_what_is_still_held(world: LeaseWorld) -> None:
    async with world.node("a") as a, world.node("b") as b:
        rooms = [f"r{i}" for i in range(1, 6)]
        for room in rooms:
            await make_shared_room(a, room)
            await a.leases.claim(room)
        await world.expire("r2")  # expired, nobody took it
        await world.expire("r3")
        assert isinstance(await b.leases.claim("r3"), Claim)  # taken
        await b.storage.delete_room("r4", AdminRecord("del-r4", "delete_room", {}, {}, 0))
        before = a.leases.claim_of("r1")
        assert before is not None
        assert await a.leases.renew(rooms) == {"r1", "r5"}
        assert set(a.leases.held()) == {"r1", "r5"}
        after = a.leases.claim_of("r1")
        assert after is not None and after.deadline >= before.deadline
        assert after.epoch == before.epoch  # a renewal is no new claim
        assert await a.leases.owner("r3") == Owner("r3", "b", b.leases.public_url)
        assert await a.leases.renew(["r2", "never-held"]) == set()


async def a_released_room_is_claimable_at_once_and_fences_its_old_owner(
    world: LeaseWorld,
) -> None:
    async with world.node("a") as a, world.node("b") as b:
        for room in ("r1", "r2"):
            await make_shared_room(a, room)
            await a.leases.claim(room)
        await a.leases.release(["r1"])
        assert a.leases.claim_of("r1") is None and a.leases.claim_of("r2") is not None
        assert await b.leases.owner("r1") == Owner("r1", None, None)
        assert isinstance(await b.leases.claim("r1"), Claim)
        with raises(Fenced):
            await a.storage.commit("r1", [record(1)], None, 0)
        assert await b.leases.owner("r2") == Owner("r2", "a", a.leases.public_url)


async def a_release_by_a_fenced_node_does_not_free_the_new_owners_room(
    world: LeaseWorld,
) -> None:
    async with world.node("a") as a, world.node("b") as b:
        await make_shared_room(a)
        await a.leases.claim("r1")
        await world.expire("r1")
        await b.leases.claim("r1")
        await a.leases.release(["r1"])  # a still believes it holds r1, at its old epoch
        assert await b.leases.owner("r1") == _owner_of(b)


async def closing_a_node_releases_its_rooms(world: LeaseWorld) -> None:
    async with world.node("b") as b:
        async with world.node("c") as c:
            await make_shared_room(c)
            assert isinstance(await c.leases.claim("r1"), Claim)
        assert isinstance(await b.leases.claim("r1"), Claim)


async def a_room_deleted_elsewhere_fences_its_owner_with_room_deleted(world: LeaseWorld) -> None:
    async with world.node("a") as a, world.node("b") as b:
        await make_shared_room(b)
        first = await a.leases.claim("r1")
        assert isinstance(first, Claim)
        await a.storage.commit("r1", [record(1)], None, 0)
        await b.storage.delete_room("r1", AdminRecord("del", "delete_room", {}, {}, 0))
        with raises(RoomDeleted):
            await a.storage.commit("r1", [record(2)], None, 1)
        assert a.leases.claim_of("r1") is None and await a.leases.owner("r1") is None
        # Created again under the same id: a new room, and epochs never reused.
        await make_shared_room(b, again="2")
        again = await b.leases.claim("r1")
        assert isinstance(again, Claim) and again.epoch > first.epoch
        assert await stored_versions(b) == []


async def a_room_recreated_under_an_old_claim_fences_it(world: LeaseWorld) -> None:
    """The old owner's claim names a room that no longer exists."""
    async with world.node("a") as a, world.node("b") as b:
        await make_shared_room(a)
        await a.leases.claim("r1")
        await b.storage.delete_room("r1", AdminRecord("del", "delete_room", {}, {}, 0))
        await make_shared_room(b, again="2")
        with raises(Fenced):
            await a.storage.commit("r1", [record(1)], None, 0)


async def the_keeper_renews_and_reports_rooms_lost(world: LeaseWorld) -> None:
    async with world.node("a") as a, world.node("b") as b:
        lost: list[set[str]] = []
        keeper = LeaseKeeper(a.leases, lost.append)
        assert keeper.interval == a.leases.lease_seconds / RENEWALS_PER_LEASE
        for room in ("r1", "r2"):
            await make_shared_room(a, room)
            await a.leases.claim(room)
        assert await keeper.tick() == set() and lost == []
        await world.expire("r2")
        await b.leases.claim("r2")
        assert await keeper.tick() == {"r2"} and lost == [{"r2"}]
        assert set(a.leases.held()) == {"r1"}


# Every check of the lease contract, in order: each takes a fresh world.
LEASE_CHECKS: list[Callable[[LeaseWorld], Awaitable[None]]] = [
    one_winner_per_epoch_among_nodes_claiming_at_once,
    a_second_claim_before_expiry_gets_the_owners_url,
    a_claim_fences_the_previous_one_even_of_the_same_node,
    after_another_node_claims_the_old_owners_commit_stores_nothing,
    an_expired_lease_nobody_took_still_refuses_the_commit,
    a_commit_without_a_claim_is_fenced,
    a_stale_head_under_a_valid_claim_is_a_plain_conflict,
    a_fenced_commit_among_concurrent_ones_is_refused_alone,
    every_acknowledged_commit_survives_a_takeover_under_load,
    renewal_keeps_only_what_is_still_held,
    a_released_room_is_claimable_at_once_and_fences_its_old_owner,
    a_release_by_a_fenced_node_does_not_free_the_new_owners_room,
    closing_a_node_releases_its_rooms,
    a_room_deleted_elsewhere_fences_its_owner_with_room_deleted,
    a_room_recreated_under_an_old_claim_fences_it,
    the_keeper_renews_and_reports_rooms_lost,
]


async def check_leases(
    open_world: Callable[[], contextlib.AbstractAsyncContextManager[LeaseWorld]],
) -> None:
    """Run every check of the lease contract, each in a fresh world from
    `open_world()` (an async context manager: a new empty database, say).
    Raises AssertionError naming the first check that fails."""
    for check in LEASE_CHECKS:
        async with open_world() as world:
            try:
                await check(world)
            except AssertionError as exc:
                raise AssertionError(f"lease contract, {check.__name__}: {exc}") from exc
