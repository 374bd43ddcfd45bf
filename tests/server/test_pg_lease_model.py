"""Leases against a model: random sequences of claims, commits, renewals,
releases and lease expiries by two nodes on one room, each step's
outcome checked against what a simple model of the rules predicts, and
after every step the stored log equals exactly the commits acknowledged
(hypothesis; real PostgreSQL)."""

from __future__ import annotations

import asyncio
import contextlib

import asyncpg
import attrs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sync_server.cluster.leases import Claim, Owner
from sync_server.cluster.pg_leases import PgLeases
from sync_server.core.auth import hash_token
from sync_server.storage import AdminRecord, Fenced
from sync_server.storage.postgres import PgStorage
from sync_server.testing.contracts import record
from sync_server.testing.postgres import empty_tables
from tests.server.test_pg_leases import PgNode

NODES = ("a", "b")
ROOM = "r1"

actions = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["claim", "commit", "renew", "release"]), st.sampled_from(NODES)),
        st.just(("expire", None)),
    ),
    min_size=8,
    max_size=30,
)


@attrs.define
class Model:
    owner: str | None = None
    epoch: int = 0
    expired: bool = False
    log: list[str] = attrs.Factory(list)
    claims: dict[str, int] = attrs.Factory(dict)  # node -> epoch of its local claim
    heads: dict[str, int] = attrs.Factory(dict)  # node -> head it loaded on claiming

    def live(self, node: str) -> bool:
        return self.owner == node and self.claims.get(node) == self.epoch and not self.expired


async def scenario(dsn: str, steps: list[tuple[str, str | None]]) -> None:
    await empty_tables(dsn)
    async with contextlib.AsyncExitStack() as stack:
        nodes: dict[str, PgNode] = {}
        for name in NODES:
            store = PgStorage(dsn, pool_min=1, pool_max=1)
            leases = PgLeases(store, node_id=name, public_url=f"ws://{name}")
            await store.open()
            stack.push_async_callback(store._terminate)  # no release at the end
            await leases.open()
            nodes[name] = PgNode(store, leases)
        await nodes["a"].create_room(
            ROOM, {"clock": 0}, "u1", hash_token("t"), AdminRecord("mk", "c", {}, {}, 0)
        )
        admin = await asyncpg.connect(dsn)
        stack.push_async_callback(admin.close)
        m = Model()
        for i, (action, name) in enumerate(steps):
            where = (i, action, name, m)
            if action == "expire":
                await admin.execute(
                    "UPDATE rooms SET lease_until = clock_timestamp() - interval '1 second'"
                    " WHERE lease_until IS NOT NULL"
                )
                if m.owner is not None:
                    m.expired = True
                continue
            assert name is not None
            node = nodes[name]
            if action == "claim":
                got = await node.claim(ROOM)
                if m.owner is None or m.expired or m.owner == name:
                    assert isinstance(got, Claim) and got.epoch > m.epoch, where
                    m.owner, m.epoch, m.expired = name, got.epoch, False
                    m.claims[name] = got.epoch
                    m.heads[name] = len(m.log)  # it loads the room now
                else:
                    assert got == Owner(ROOM, m.owner, f"ws://{m.owner}"), where
                    m.claims.pop(name, None)
            elif action == "commit":
                head = m.heads.get(name, 0)
                cmd = f"{name}-{i}"
                try:
                    await node.commit(ROOM, [record(head + 1, cmd)], None, head)
                except Fenced:
                    assert not m.live(name), where
                    m.claims.pop(name, None)
                else:
                    assert m.live(name) and head == len(m.log), where
                    m.log.append(cmd)
                    m.heads[name] = head + 1
            elif action == "renew":
                kept = await node.renew([ROOM])
                assert kept == ({ROOM} if m.live(name) else set()), where
                if not kept:
                    m.claims.pop(name, None)
            elif action == "release":
                await node.release([ROOM])
                if m.owner == name and m.claims.get(name) == m.epoch:
                    m.owner = None  # its own claim, expired or not, is cleared
                    m.expired = False
                m.claims.pop(name, None)
            for other, store in nodes.items():  # the local views match the model
                held = store.claim_of(ROOM)
                assert (held.epoch if held else None) == m.claims.get(other), (where, other)
            stored = await admin.fetch(
                "SELECT cmd_id FROM versions WHERE room = $1 ORDER BY v", ROOM
            )
            assert [r[0] for r in stored] == m.log, where
            owner = await nodes["a"].owner(ROOM)
            expect = None if m.owner is None or m.expired else m.owner
            assert owner.node_id == expect, where


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=actions)
def test_leases_and_commits_follow_the_model(pg_dsn: str, steps) -> None:
    asyncio.run(scenario(pg_dsn, steps))
