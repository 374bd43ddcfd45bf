"""Hypothesis against a live server (issue 5): random frames and random
command sequences from GM, player, observer and admin sessions.

Properties, for every example:
- the server never crashes and answers every frame it reads with a
  well-formed frame (`t` in the protocol's set; errors carry a known code,
  never `internal`, and a readable message);
- connections stay open unless the example did something that closes them
  by design (a second hello -> 4400; its own user removed or token rotated
  -> 4403; its room deleted by the admin -> 4404);
- the invariants of docs/rules.md, "Conditions", hold at every version (a watcher replays every
  patch and checks `rules.violations`), and every open client's mirror
  equals a fresh client's snapshot at the end.

One server per test function, in a thread with its own event loop; each
example gets a fresh table (a room), so destructive random commands
(remove_user, rotate_token, delete_room) cannot leak into the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import itertools
import json
import uuid
from collections.abc import Iterator
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from websockets.exceptions import ConnectionClosed

import rules
from rules import validate
from sync_server.wire.protocol import ERROR_ORDER
from tests.helpers.server import (
    WAIT,
    Client,
    Closed,
    Table,
    connect,
    connect_admin,
    create_table,
    server_thread,
)

pytestmark = pytest.mark.timeout(120)

SERVER_T = {"welcome", "patch", "ack", "error", "patches", "snapshot"}
ABILITIES = ("str", "dex", "con", "int", "wis", "cha")
ALL_OPS = sorted(set(rules.OPS) | set(rules.LOG_OPS) | set(rules.ADMIN_OPS))
# Bounded so that a whole test stays well under 30 s on 2 slow cores. No
# shrinking: it replays failing examples (each may wait up to WAIT s) for an
# unbounded time, and pytest-timeout cannot interrupt Hypothesis; a failure
# still prints its falsifying example.
FUZZ = settings(
    max_examples=60,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- checks ----------------------------------------------------------------


def check_frame(frame: Any, role: str) -> None:
    """A frame the server sent is one of the protocol's, well-formed."""
    assert isinstance(frame, dict), frame
    t = frame.get("t")
    assert t in SERVER_T, frame
    if t == "error":
        assert frame["code"] in ERROR_ORDER, frame
        assert frame["code"] != "internal", frame  # internal = a server or rules bug here
        assert isinstance(frame["message"], str) and frame["message"], frame
        assert frame.get("id") is None or isinstance(frame["id"], str), frame
    elif t == "ack":
        assert isinstance(frame["id"], str) and isinstance(frame["result"], dict), frame
        if role == "admin":
            assert "v" not in frame, frame
        else:
            assert type(frame["v"]) is int, frame
    elif t == "patch":
        assert type(frame["v"]) is int and isinstance(frame["ops"], list), frame
        assert isinstance(frame["events"], list) and isinstance(frame["by"], str), frame
        for op in frame["ops"]:
            assert op[0] in ("set", "del") and isinstance(op[1], list), op
        assert not _token_keys(frame["ops"]) and not _token_keys(frame["events"]), frame
    elif t == "patches":
        for p in frame["patches"]:
            check_frame(p, role)
    elif t == "snapshot":
        assert type(frame["v"]) is int and isinstance(frame["state"], dict), frame


def _token_keys(value: Any) -> list[str]:
    """Map keys naming a token anywhere in a value (patches never carry one).
    An op's name is no token: a viewer's affordances are keyed by op
    (`rotate_token` among the GM's), and a patch may set them whole (a
    resume or `sync` from before the viewer's class was kept current)."""
    if isinstance(value, dict):
        found = [k for k in value if "token" in k and k not in rules.OPS]
        return found + [k for v in value.values() for k in _token_keys(v)]
    if isinstance(value, list):
        return [k for v in value for k in _token_keys(v)]
    return []


def check_history(base: dict[str, Any], base_v: int, patches: list[dict[str, Any]]) -> None:
    """the invariants of docs/rules.md, "Conditions", at every version from base_v on."""
    state = copy.deepcopy(base)
    assert rules.violations(rules.Room.from_dict(state)) == []
    for i, p in enumerate(patches, start=1):
        assert p["v"] == base_v + i, "a gap in the watcher's patches"
        rules.apply_ops(state, p["ops"])
        broken = rules.violations(rules.Room.from_dict(state))
        assert broken == [], (p, broken)


# --- the example harness ---------------------------------------------------

_rooms = itertools.count(1)


class Example:
    """A fresh table, a watcher that sees every patch, and helpers."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.room = f"fz{next(_rooms)}"
        self.table: Table
        self.watcher: Client
        self.watcher_token = ""
        self.clients: dict[str, Client] = {}
        self.closing_ok: dict[str, set[int]] = {}  # session key -> close codes it may get
        self.deleted_room = False
        self.watcher_revoked = False  # a fuzzed remove_user / rotate_token hit it

    async def __aenter__(self) -> Example:
        self.table = await create_table(self.url, room=self.room)
        gm = await self.table.connect("gm")
        # A GM: it sees the whole room (per-role views), so its history
        # shows every invariant; every other client's mirror is checked
        # against its view of the watcher's state.
        res = (await gm.ok("add_user", {"name": "Watcher", "role": "gm"}))["result"]
        await gm.close()
        self.watcher_token = res["token"]
        self.watcher = await connect(self.url, self.watcher_token, self.room, "json")
        self.base, self.base_v = copy.deepcopy(self.watcher.state), self.watcher.v
        return self

    async def __aexit__(self, *exc: object) -> None:
        for c in (*self.clients.values(), self.watcher):
            with contextlib.suppress(Exception):
                await c.close()

    async def open(self, key: str, who: str, proto: str) -> Client:
        if who == "admin":
            c = await connect_admin(self.url, proto=proto)
        else:
            c = await self.table.connect(who, proto)
        self.clients[key] = c
        self.closing_ok[key] = set()
        return c

    def allow_close_after(self, reply: dict[str, Any], op: Any, args: Any) -> None:
        """Record closes the example caused by design (an accepted command)."""
        if reply.get("t") != "ack":
            return
        if op in ("remove_user", "rotate_token") and isinstance(args, dict):
            for key, c in self.clients.items():
                if c.user == args.get("user") and c.role != "admin":
                    self.closing_ok[key].add(4403)
            # The watcher's id (u5) is in no pool, but a hostile text value
            # may still spell it (rarely): then its token no longer opens
            # the fresh session that the end-state checks need.
            if args.get("user") == self.watcher.user:
                self.watcher_revoked = True
        if op == "reissue_gm_link" and isinstance(args, dict) and args.get("room") == self.room:
            gm = (reply.get("result") or {}).get("user")  # its token rotated: its sessions end
            for key, c in self.clients.items():
                if c.user == gm and c.role != "admin":
                    self.closing_ok[key].add(4403)
            if gm == self.watcher.user:
                self.watcher_revoked = True
        if op == "delete_room" and isinstance(args, dict) and args.get("room") == self.room:
            self.deleted_room = True
            for key, c in self.clients.items():
                if c.role != "admin":
                    self.closing_ok[key].add(4404)

    async def sentinel(self, key: str) -> dict[str, Any] | None:
        """A command that changes nothing, answered after everything sent
        before it on this session (unknown_op); None if the session closed."""
        c = self.clients[key]
        if c.ws.close_code is not None:
            return None
        sid = f"sentinel-{uuid.uuid4().hex}"
        try:
            reply = await c.cmd("no_such_op_sentinel", {}, id=sid)
        except (Closed, Exception) as exc:
            if c.ws.close_code is None and not isinstance(exc, Closed):
                raise
            return None
        assert reply["code"] == "unknown_op", reply
        return reply

    async def finish(self) -> None:
        """Every session: well-formed frames only, open unless closed by
        design; invariants at every version; mirrors equal a fresh state."""
        for key, c in self.clients.items():
            if c.ws.close_code is None:
                await self.sentinel(key)
        for key, c in self.clients.items():
            for f in c.frames:
                check_frame(f, c.role or "")
            if c.ws.close_code is not None:
                assert c.ws.close_code in self.closing_ok[key], (key, c.ws.close_code)
        if self.deleted_room:
            return
        if self.watcher_revoked:  # closed 4403: what it saw must still be sound
            assert not self.watcher.gaps
            check_history(self.base, self.base_v, self.watcher.patches)
            return
        # The watcher's user was not a target (its id is in no pool), so its
        # token opens a fresh session.
        fresh = await connect(self.url, self.watcher_token, self.room, "msgpack")
        try:
            await self.watcher.wait_v(fresh.v)
            assert not self.watcher.gaps
            check_history(self.base, self.base_v, self.watcher.patches)
            assert self.watcher.state == fresh.state
            assert rules.violations(rules.Room.from_dict(fresh.state)) == []
            for c in self.clients.values():
                if c.role != "admin" and c.ws.close_code is None:
                    await c.wait_v(fresh.v)
                    assert c.state == c.seen(fresh.state)
        finally:
            await fresh.close()


# --- strategies ------------------------------------------------------------

HOSTILE_SCALARS = [
    None,
    True,
    2**64 - 1,
    2**63,
    -(2**63),
    -1,
    0,
    1.5,
    -0.0,
    1e308,
    "",
    "x" * 300,
    "\x00",
    "é🎲",
    [],
    {},
    [1, 2],
    {"a": 1},
]


def nested(depth: int) -> Any:
    value: Any = 1
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


hostile = st.one_of(
    st.sampled_from(HOSTILE_SCALARS),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
    st.integers(min_value=1, max_value=40).map(nested),
)


def plausible_values(users: list[str], chars: list[str]) -> dict[str, st.SearchStrategy[Any]]:
    char = st.sampled_from([*chars, *chars, *chars, "c999"])
    user = st.sampled_from([*users, *users, "u999"])
    name = st.one_of(
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz éÉ-'", min_size=1, max_size=12),
        st.text(min_size=1, max_size=12),
    )
    small = st.integers(min_value=0, max_value=30)
    scores = st.fixed_dictionaries({a: st.integers(min_value=1, max_value=20) for a in ABILITIES})

    def edge(values: st.SearchStrategy[int], bound: int) -> st.SearchStrategy[int]:
        """Mostly ordinary values, sometimes a bound of the rules and just past it."""
        return st.one_of(values, values, values, st.sampled_from([bound, bound + 1]))

    field_values = {
        "pv": edge(small, validate.MAX_PV),
        "pe": small,
        "pp": st.integers(min_value=0, max_value=8),
        "pv_max": edge(st.integers(min_value=1, max_value=40), validate.MAX_PV),
        "pe_max": edge(small, validate.MAX_PE),
        "pp_max": edge(st.integers(min_value=0, max_value=8), validate.MAX_PP),
        "level": edge(st.integers(min_value=1, max_value=20), validate.MAX_LEVEL),
        "medicine": st.integers(min_value=0, max_value=10),
        "name": name,
        "owner": st.one_of(st.none(), user),
        "condition": st.sampled_from(["conscious", "dying", "stable", "dead"]),
        "abilities": scores,
        "ability_damage": st.fixed_dictionaries(
            {a: st.integers(min_value=0, max_value=5) for a in ABILITIES}
        ),
    }
    corrections = st.lists(
        st.sampled_from(sorted(field_values)), min_size=1, max_size=2, unique=True
    ).flatmap(lambda keys: st.fixed_dictionaries({k: field_values[k] for k in keys}))
    return {
        "char": char,
        "patient": char,
        "user": user,
        "owner": st.one_of(st.none(), user),
        "amount": st.one_of(st.integers(min_value=1, max_value=60), st.integers(-2, 0)),
        "seconds": st.one_of(
            st.integers(min_value=-5, max_value=9 * 3600),
            st.sampled_from([validate.MAX_ADVANCE, validate.MAX_ADVANCE + 1]),
        ),
        "from": st.integers(min_value=-1, max_value=9 * 3600),
        "turn": st.integers(min_value=-1, max_value=4),
        "kind": st.sampled_from(["short", "night", "bed", "nap"]),
        "ability": st.sampled_from([*ABILITIES, "luck"]),
        "rolls": st.lists(st.integers(min_value=0, max_value=21), max_size=4),
        "roll": st.integers(min_value=0, max_value=21),
        "order": st.lists(char, min_size=1, max_size=3),
        "chars": st.lists(char, min_size=1, max_size=3),
        "bonus": st.dictionaries(char, st.integers(min_value=-3, max_value=3), max_size=2),
        "skip_dead": st.booleans(),
        "round": st.integers(min_value=0, max_value=3),
        "name": name,
        "gm_name": name,
        "role": st.sampled_from(["gm", "player", "observer", "admin"]),
        "room": st.sampled_from(["fz-new", "x y", "", "fz1"]),
        "upload": st.text(min_size=0, max_size=6),
        "part": st.integers(min_value=-1, max_value=3),
        "parts": st.integers(min_value=0, max_value=3),
        "data": st.text(max_size=12),
        "replace": st.booleans(),
        "round_seconds": st.integers(min_value=0, max_value=60),
        "nonlethal": st.booleans(),
        "pv_only": st.booleans(),
        "stabilize": st.booleans(),
        "set": corrections,
        "id": st.text(min_size=1, max_size=6),
        "abilities": scores,
        **{k: v for k, v in field_values.items() if k not in ("name", "owner", "abilities")},
    }


# The arguments each op takes (required, optional), from docs/operations.md.
ARGS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "create_room": (("room", "name"), ("gm_name",)),
    "delete_room": (("room",), ()),
    "reissue_gm_link": (("room",), ("user",)),
    "import_room": (("room", "upload", "part", "parts", "data"), ("replace",)),
    "update_room": ((), ("name", "round_seconds", "skip_dead")),
    "add_user": (("name", "role"), ()),
    "remove_user": (("user",), ()),
    "rotate_token": (("user",), ()),
    "add_character": (
        ("name", "level", "pv_max", "pe_max", "pp_max", "abilities", "medicine"),
        ("owner", "id", "pv", "pe", "pp"),
    ),
    "update_character": (("char", "set"), ()),
    "remove_character": (("char",), ()),
    "combat_start": (("order",), ()),
    "combat_end": ((), ()),
    "end_turn": (("char",), ("round",)),
    "set_order": (("order",), ("turn",)),
    "roll_initiative": ((), ("chars", "bonus")),
    "advance_clock": (("seconds",), ("from",)),
    "damage": (("char", "amount"), ("nonlethal", "pv_only")),
    "heal": (("char", "amount"), ("stabilize",)),
    "first_aid": (("char", "patient"), ("roll",)),
    "stabilize": (("char",), ()),
    "stay_in_fight": (("char",), ()),
    "tend": (("char", "patient"), ()),
    "untend": (("patient",), ()),
    "rest": (("char", "kind"), ()),
    "stop_rest": (("char",), ()),
    "ability_damage": (("char", "ability", "amount"), ()),
    "ability_restore": (("char", "ability", "amount"), ()),
    "queue_rolls": (("rolls",), ()),
    "undo": ((), ()),
}


COMBAT_OPS = (
    "damage",
    "damage",
    "heal",
    "first_aid",
    "stabilize",
    "stay_in_fight",
    "advance_clock",
    "end_turn",
    "combat_start",
    "roll_initiative",
    "rest",
    "tend",
)


def test_the_fuzz_knows_every_op() -> None:
    assert set(ARGS) == set(ALL_OPS)


def commands(users: list[str], chars: list[str], hostile_odds: int) -> st.SearchStrategy[Any]:
    """(op, args): plausible arguments, each replaced by a hostile value
    one time in `hostile_odds` (0: never), sometimes a missing or extra key."""
    pool = plausible_values(users, chars)

    def value(key: str) -> st.SearchStrategy[Any]:
        good = pool[key]
        if not hostile_odds:
            return good
        return st.integers(min_value=1, max_value=hostile_odds).flatmap(
            lambda n: hostile if n == 1 else good
        )

    def for_op(op: str) -> st.SearchStrategy[tuple[str, Any]]:
        required, optional = ARGS[op]
        args = st.fixed_dictionaries(
            {k: value(k) for k in required}, optional={k: value(k) for k in optional}
        )
        if hostile_odds:
            args = st.one_of(
                args,
                args.map(lambda a: {**a, "bogus": 1}),
                args.map(lambda a: dict(list(a.items())[1:])),
                hostile,
            )
        return args.map(lambda a: (op, a))

    # The ops that move characters through dying, stable and dead (where
    # the invariants bite) come up more often than the bookkeeping ones.
    return st.sampled_from([*ALL_OPS, *COMBAT_OPS, *COMBAT_OPS]).flatmap(for_op)


def json_values() -> st.SearchStrategy[Any]:
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**70), max_value=2**70)
        | st.floats()  # NaN and infinities included: json.dumps writes them
        | st.text(max_size=10),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner),
        max_leaves=12,
    )


def msgpack_values() -> st.SearchStrategy[Any]:
    return st.recursive(
        st.none()
        | st.booleans()
        | st.integers(min_value=-(2**63), max_value=2**64 - 1)
        | st.floats()
        | st.text(max_size=10)
        | st.binary(max_size=6),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.one_of(st.text(max_size=6), st.integers(0, 9)), inner, max_size=4)
        ),
        max_leaves=12,
    )


def frames_for(proto: str, users: list[str], chars: list[str]) -> st.SearchStrategy[Any]:
    """One message on the wire: raw bytes/text, a random value, a map with a
    random `t`, a cmd with random (hostile or plausible) parts."""
    values = json_values() if proto == "json" else msgpack_values()
    t_values = st.sampled_from(
        ["cmd", "cmd", "cmd", "sync", "hello", "welcome", "ack", "patch", "", "CMD"]
    ) | st.text(max_size=5)
    cmd = st.tuples(
        commands(users, chars, hostile_odds=3),
        st.one_of(st.text(min_size=1, max_size=8), hostile),
        st.one_of(st.none(), st.integers(min_value=-1, max_value=40), hostile),
    ).map(
        lambda x: (
            {"t": "cmd", "id": x[1], "op": x[0][0], "args": x[0][1]}
            | ({} if x[2] is None else {"expect": x[2]})
        )
    )
    maps = st.builds(
        lambda t, extra: {**extra, "t": t},
        t_values,
        st.dictionaries(st.sampled_from(["id", "op", "args", "since", "x"]), values, max_size=3),
    )
    sync = st.one_of(st.integers(min_value=0, max_value=20), hostile).map(
        lambda s: {"t": "sync", "since": s}
    )
    encoded = st.one_of(cmd, cmd, maps, sync, values).map(lambda v: ("value", v))
    raw = st.one_of(st.binary(max_size=40), st.text(max_size=40)).map(lambda r: ("raw", r))
    return st.one_of(encoded, encoded, encoded, raw)


def encode(proto: str, item: tuple[str, Any]) -> bytes | str | None:
    kind, value = item
    if kind == "raw":
        return value
    try:
        if proto == "json":
            return json.dumps(value)  # NaN / Infinity written as such: must be refused
        return msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError):
        return None


def sent_hello(item: tuple[str, Any], proto: str) -> bool:
    """Does this message decode to a map with t == hello (a second hello)?"""
    data = encode(proto, item)
    if data is None:
        return False
    from sync_server.wire.codec import CODECS, JSON, MSGPACK, BadFrame

    try:
        frame = CODECS[JSON if proto == "json" else MSGPACK].decode(data)
    except BadFrame:
        return False
    return frame.get("t") == "hello"


# --- the tests -----------------------------------------------------------


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One server for the module, and the ids every fresh table gets."""
    with server_thread(tmp_path_factory.mktemp("fuzz"), rate=None) as srv:
        t = asyncio.run(create_table(srv.url, room="fz0"))
        yield {
            "srv": srv,
            "url": srv.url,
            "users": [t.users[k] for k in ("gm", "p1", "p2", "obs")],
            "chars": list(t.chars.values()),
        }


PROTOS = ("msgpack", "json")
WHO = st.sampled_from(["gm", "p1", "obs", "admin"])
PROTO = st.sampled_from(["msgpack", "json"])


def test_random_frames_never_break_the_server(live: dict[str, Any]) -> None:
    users, chars = live["users"], live["chars"]
    per_proto = {p: st.lists(frames_for(p, users, chars), min_size=1, max_size=12) for p in PROTOS}

    @FUZZ
    @given(data=st.data(), who=WHO, proto=PROTO)
    def run(data: st.DataObject, who: str, proto: str) -> None:
        items = data.draw(per_proto[proto], label="frames")
        asyncio.run(_random_frames(live["url"], who, proto, items))

    run()
    assert live["srv"].health()["status"] == "ok"


async def _random_frames(url: str, who: str, proto: str, items: list[tuple[str, Any]]) -> None:
    async with Example(url) as ex:
        c = await ex.open("s", who, proto)
        for item in items:
            data = encode(proto, item)
            if data is None:
                continue
            if c.ws.close_code is not None:
                break
            if sent_hello(item, proto):
                ex.closing_ok["s"].add(4400)
            with contextlib.suppress(Exception):
                await c.send_raw(data)
        # Commands this session sent that were accepted and close sessions
        # (remove_user, rotate_token, delete_room) are allowed their closes.
        await ex.sentinel("s")
        for f in c.frames:
            if f.get("t") == "ack":
                _allow_from_ack(ex, f, items, proto)
        await ex.finish()


def _allow_from_ack(
    ex: Example, ack: dict[str, Any], items: list[tuple[str, Any]], proto: str
) -> None:
    for kind, value in items:
        if kind == "value" and isinstance(value, dict) and value.get("id") == ack["id"]:
            ex.allow_close_after(ack, value.get("op"), value.get("args"))


def test_random_command_sequences_keep_the_rules_invariants(live: dict[str, Any]) -> None:
    users, chars = live["users"], live["chars"]
    plausible = commands(users, chars, hostile_odds=0)
    mixed = commands(users, chars, hostile_odds=6)
    seq = st.lists(st.one_of(plausible, plausible, plausible, mixed), min_size=1, max_size=25)

    @FUZZ
    @given(gm=seq, p1=seq, obs=st.lists(mixed, max_size=4), proto=PROTO)
    def run(gm: list[Any], p1: list[Any], obs: list[Any], proto: str) -> None:
        asyncio.run(_sequences(live["url"], {"gm": gm, "p1": p1, "obs": obs}, proto))

    run()
    assert live["srv"].health()["status"] == "ok"


async def _sequences(url: str, plan: dict[str, list[tuple[str, Any]]], proto: str) -> None:
    async with Example(url) as ex:
        for who in plan:
            await ex.open(who, who, proto)

        async def play(who: str) -> None:
            c = ex.clients[who]
            for i, (op, args) in enumerate(plan[who]):
                if c.ws.close_code is not None:
                    return
                try:
                    reply = await _reply(c, op, args, f"{who}-{i}")
                except (Closed, ConnectionClosed):
                    return
                check_frame(reply, c.role or "")
                ex.allow_close_after(reply, op, args)

        await asyncio.gather(*(play(who) for who in plan))
        await ex.finish()


async def _reply(c: Client, op: str, args: Any, cmd_id: str) -> dict[str, Any]:
    """The answer to one cmd: its ack or error, or, for a frame refused as a
    whole (nested too deep to be read, so its id is unknown), a bad_frame
    error without an id."""
    fut = await c.submit(op, args, id=cmd_id)
    loose = asyncio.ensure_future(c.loose_errors.get())
    try:
        async with asyncio.timeout(WAIT):
            done, _ = await asyncio.wait({fut, loose}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        loose.cancel()
    if fut in done:
        return fut.result()
    reply = loose.result()
    assert reply["code"] == "bad_frame", reply
    return reply
