"""Per-role views on the wire: every frame to a player or an observer is
their view (welcome, patch, resume, sync), a patch that touches nothing
restricted is encoded once per subprotocol for everyone, and no byte sent to
a non-GM carries what the GM keeps secret."""

from __future__ import annotations

import copy
import itertools
import random
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rules import SeededDice, Viewer
from sync_server.core.auth import RecentTokens
from sync_server.core.inputs import CommandIn
from sync_server.core.room import RoomCore
from sync_server.hosting.bus import Message
from sync_server.storage import LoadedRoom
from sync_server.wire.codec import Codec
from tests.helpers.server import SHEET, Table, create_table, on_both_transports, running_server
from tests.rules.test_views import (
    ACTORS,
    VIEW_COMMANDS,
    aim,
    all_viewers,
    assert_no_secret,
)
from tests.rules.test_views import secret_table as rules_secret_table

SECRET_NAME = "Secret-Liche-QWV"
STATUS_MAXIMA = (9973, 8861)  # the status NPC's pv_max, pe_max
HIDDEN_MAXIMA = (9887, 7757)

pytestmark = on_both_transports  # issue 22: the fast transport keeps the protocol


async def secret_table(url: str) -> tuple[Table, dict[str, str]]:
    t = await create_table(url)
    gm = await t.connect("gm")
    ids = {}
    ids["npc"] = (
        await gm.ok(
            "add_character",
            {**SHEET, "name": "Gob-Status", "pv_max": STATUS_MAXIMA[0], "pe_max": STATUS_MAXIMA[1]},
        )
    )["result"]["char"]
    ids["lich"] = (
        await gm.ok(
            "add_character",
            {
                **SHEET,
                "name": SECRET_NAME,
                "pv_max": HIDDEN_MAXIMA[0],
                "pe_max": HIDDEN_MAXIMA[1],
                "shown": "hidden",
            },
        )
    )["result"]["char"]
    await gm.close()
    return t, ids


def leaks(frames: list[bytes | str], secrets: list[Any]) -> list[Any]:
    """Secrets (strings, numbers) found in the raw frames a client received."""
    found = []
    for secret in secrets:
        for raw in frames:
            if isinstance(raw, bytes):
                needle = msgpack.packb(secret)
            else:
                needle = secret if isinstance(secret, str) else str(secret)
            if needle in raw:
                found.append(secret)
                break
    return found


class RawRecorder:
    """Keeps every raw message a raw client reads (bytes or text)."""

    def __init__(self, client: Any) -> None:
        self.raw: list[bytes | str] = []
        real = client.codec

        class Recording:
            name, binary = real.name, real.binary

            def decode(_self, message: bytes | str) -> dict[str, Any]:
                self.raw.append(message)
                return real.decode(message)

            def encode(_self, frame: dict[str, Any]) -> bytes | str:
                return real.encode(frame)

        client.codec = Recording()


async def test_each_viewer_gets_their_view_and_no_secret(tmp_path) -> None:
    async with running_server(tmp_path) as srv:
        t, ids = await secret_table(srv.url)
        gm = await t.connect("gm")
        p1, p2j, obs = await t.connect("p1"), await t.connect("p2", "json"), await t.connect("obs")
        viewers = [p1, p2j, obs]
        recorders = [RawRecorder(c) for c in viewers]
        for c in viewers:  # the welcome is a view too
            assert ids["lich"] not in c.state["characters"]
            assert set(c.state["characters"][ids["npc"]]) == {
                "name", "owner", "shown", "level", "condition"
            }  # fmt: skip
            assert "queued_rolls" not in c.state
        steps = [
            ("queue_rolls", {"rolls": [17, 3]}),
            ("damage", {"char": ids["npc"], "amount": sum(STATUS_MAXIMA)}),  # dying
            ("damage", {"char": ids["lich"], "amount": sum(HIDDEN_MAXIMA)}),
            ("first_aid", {"char": t.chars["c_p1"], "patient": ids["npc"], "roll": 4}),
            ("combat_start", {"order": [ids["lich"], t.chars["c_p1"], ids["npc"]]}),
            ("end_turn", {"char": ids["lich"]}),
            ("damage", {"char": t.chars["c_p1"], "amount": 3}),  # nothing secret
            ("undo", {}),
            ("advance_clock", {"seconds": 12}),
        ]
        for op, args in steps:
            ack = await gm.ok(op, args)
            for c in viewers:
                await c.wait_v(ack["v"])
                assert c.state == c.seen(gm.state), (op, c.role)
                assert not c.gaps
        secrets = [SECRET_NAME, ids["lich"], *STATUS_MAXIMA, *HIDDEN_MAXIMA]
        for c, rec in zip(viewers, recorders, strict=True):
            assert leaks(rec.raw, secrets) == [], c.user
        # The search finds them where they are: in what the GM got.
        gm_raw = [msgpack.packb(gm.welcome), *(msgpack.packb(f) for f in gm.frames)]
        assert leaks(gm_raw, secrets) == secrets
        for c in viewers:  # a fresh welcome equals the mirror built from patches
            fresh = await t.connect("p1" if c is p1 else "p2" if c is p2j else "obs")
            assert fresh.state == c.state and fresh.v == c.v
            await fresh.close()
        for c in (gm, *viewers):
            await c.close()


async def test_changing_shown_adds_or_removes_what_each_viewer_sees(tmp_path) -> None:
    async with running_server(tmp_path) as srv:
        t, ids = await secret_table(srv.url)
        gm, obs = await t.connect("gm"), await t.connect("obs")
        lich = ids["lich"]
        ack = await gm.ok("update_character", {"char": lich, "set": {"shown": "status"}})
        await obs.wait_v(ack["v"])
        assert obs.state["characters"][lich] == {
            "name": SECRET_NAME, "owner": None, "shown": "status", "level": 3,
            "condition": "conscious",
        }  # fmt: skip
        ack = await gm.ok("update_character", {"char": lich, "set": {"shown": "full"}})
        await obs.wait_v(ack["v"])
        assert obs.state["characters"][lich]["pv_max"] == HIDDEN_MAXIMA[0]
        ack = await gm.ok("update_character", {"char": lich, "set": {"shown": "hidden"}})
        await obs.wait_v(ack["v"])
        assert lich not in obs.state["characters"]
        assert obs.state == obs.seen(gm.state)
        await gm.close()
        await obs.close()


async def test_a_player_sees_their_own_character_whatever_shown_says(tmp_path) -> None:
    async with running_server(tmp_path) as srv:
        t, _ = await secret_table(srv.url)
        gm, p1, p2 = await t.connect("gm"), await t.connect("p1"), await t.connect("p2")
        mine = t.chars["c_p1"]
        ack = await gm.ok("update_character", {"char": mine, "set": {"shown": "hidden"}})
        await p1.wait_v(ack["v"])
        await p2.wait_v(ack["v"])
        assert p1.state["characters"][mine] == gm.state["characters"][mine]
        assert mine not in p2.state["characters"]
        ack = await p1.ok("rest", {"char": mine, "kind": "short"})  # acts as before
        await p2.wait_v(ack["v"])
        assert p2.patches[-1]["events"] == [] and p2.patches[-1]["ops"] == []  # v still comes
        for c in (gm, p1, p2):
            await c.close()


async def test_resume_and_sync_replies_are_views(tmp_path) -> None:
    async with running_server(tmp_path) as srv:
        t, ids = await secret_table(srv.url)
        obs = await t.connect("obs")
        held_v, held = obs.v, copy.deepcopy(obs.state)
        await obs.close()
        gm = await t.connect("gm")
        await gm.ok("damage", {"char": ids["npc"], "amount": 5})
        await gm.ok("damage", {"char": ids["lich"], "amount": 5})
        await gm.ok("damage", {"char": t.chars["c_p1"], "amount": 5})
        back = await t.connect("obs", since=held_v, base=held)
        assert [p["v"] for p in back.welcome["patches"]] == [held_v + 1, held_v + 2, held_v + 3]
        assert back.state == back.seen(gm.state)
        reply = await back.sync(held_v)
        text = repr(reply)
        assert SECRET_NAME not in text and str(STATUS_MAXIMA[0]) not in text
        assert reply["patches"][1]["ops"] == [] and reply["patches"][1]["events"] == []
        snap = await back.sync(10**6)  # ahead: a snapshot, of the view
        assert snap["t"] == "snapshot" and snap["state"] == back.state
        await gm.close()
        await back.close()


@pytest.mark.parametrize("restricted", [False, True])
async def test_a_patch_is_encoded_once_per_view_class_and_subprotocol(
    tmp_path, monkeypatch, restricted: bool
) -> None:
    async with running_server(tmp_path) as srv:
        t, ids = await secret_table(srv.url)
        gm, gm_json = await t.connect("gm"), await t.connect("gm", "json")
        players = [await t.connect("p1"), await t.connect("p2"), await t.connect("obs")]
        encoded: list[tuple[str, int]] = []
        real = Codec.encode

        def counting(self: Codec, frame: dict[str, Any]) -> bytes | str:
            if frame.get("t") == "patch":
                encoded.append((self.name, len(frame["ops"])))
            return real(self, frame)

        monkeypatch.setattr(Codec, "encode", counting)
        target = ids["npc"] if restricted else t.chars["c_p1"]
        ack = await gm.ok("damage", {"char": target, "amount": 2})
        for c in (gm_json, *players):
            await c.wait_v(ack["v"])
        # The GM class (msgpack, json: its own, since what its undo would
        # revert moved), and one more: the public view (p1, p2 and the
        # observer, all msgpack), without the GM's command id, and when
        # restricted, its ops emptied.
        assert len(encoded) == 3, encoded
        assert encoded[-1] == ("vtt-sync.msgpack.v1", 0 if restricted else 1), encoded
        assert gm.patches[-1]["id"] == ack["id"]
        assert [c.patches[-1]["id"] for c in players] == [None, None, None]
        for c in (gm, gm_json, *players):
            await c.close()


async def test_a_command_id_reaches_only_its_sender_and_the_gm(tmp_path) -> None:
    """Issue 19: the Foundry module's ids name the actor a command is about
    (`edit:fvtt-<actor>:0.damage@4`); a player or observer gets a patch's
    `id` only for their own commands (null otherwise), on the live stream
    and in resume and sync replies; the sender still gets it (and its ack)."""
    async with running_server(tmp_path) as srv:
        t, ids = await secret_table(srv.url)
        gm, gm2 = await t.connect("gm"), await t.connect("gm", "json")
        p1, p2, obs = await t.connect("p1"), await t.connect("p2", "json"), await t.connect("obs")
        held = obs.v
        secret_id = f"edit:fvtt-{ids['lich']}:{SECRET_NAME}.damage@4"
        for target in (ids["lich"], t.chars["c_p1"]):  # restricted, then not
            ack = await gm.ok("damage", {"char": target, "amount": 1}, id=f"{secret_id}/{target}")
            for c in (gm2, p1, p2, obs):
                await c.wait_v(ack["v"])
            assert gm.patches[-1]["id"] == gm2.patches[-1]["id"] == ack["id"]
            assert [c.patches[-1]["id"] for c in (p1, p2, obs)] == [None, None, None]
        mine = await p1.ok("rest", {"char": t.chars["c_p1"], "kind": "short"}, id="p1-own-1")
        for c in (gm, p2, obs):
            await c.wait_v(mine["v"])
        assert p1.patches[-1]["id"] == "p1-own-1" and gm.patches[-1]["id"] == "p1-own-1"
        assert p2.patches[-1]["id"] is None and obs.patches[-1]["id"] is None
        reply = await p1.sync(held)
        assert [p["id"] for p in reply["patches"]] == [None, None, "p1-own-1"]
        assert SECRET_NAME not in repr(await obs.sync(held))
        back = await t.connect("obs", since=held, base=copy.deepcopy(obs.state))
        assert secret_id not in repr(back.welcome) and ids["lich"] not in repr(back.welcome)
        for c in (gm, gm2, p1, p2, obs, back):
            await c.close()


async def test_set_order_events_do_not_name_hidden_characters(tmp_path) -> None:
    """Issue 19 (and its item 6): set_order's `joined` and `left` lose the
    hidden ids, as `order` does."""
    async with running_server(tmp_path) as srv:
        t, ids = await secret_table(srv.url)
        gm, p2, obs = await t.connect("gm"), await t.connect("p2"), await t.connect("obs")
        mine = t.chars["c_p1"]
        await gm.ok("combat_start", {"order": [mine, ids["npc"]]})
        ack = await gm.ok("set_order", {"order": [mine, ids["lich"]]})
        await gm.ok("set_order", {"order": [mine]})
        last = (await gm.ok("set_order", {"order": [mine, ids["npc"]]}))["v"]
        for c in (p2, obs):
            await c.wait_v(last)
            combat = [e for p in c.patches if p["v"] >= ack["v"] for e in p["events"]]
            assert ids["lich"] not in repr(combat), c.user
            assert combat[0]["joined"] == [] and combat[0]["left"] == [ids["npc"]]
        assert gm.patches[-3]["events"][0]["joined"] == [ids["lich"]]
        for c in (gm, p2, obs):
            await c.close()


# ----------------------------------------------------- the core, property test


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(VIEW_COMMANDS, ACTORS, st.booleans()), min_size=10, max_size=40),
    st.booleans(),
    st.integers(0, 2**32),
)
def test_no_frame_names_what_its_view_hides_command_ids_included(commands, tended, seed):
    """Issue 19, through the room core and the bus's `Message` (what a
    socket gets): random commands of every op, by the GM (whose ids name
    their target, its name included, as the Foundry module's do), players
    and an observer. Every patch a viewer gets, every ack and error its
    sender gets, and every resume, carries no hidden name, id or number,
    and a command id only for its sender and the GM."""
    t = rules_secret_table(tended)
    tokens = itertools.count(1)
    core = RoomCore(
        LoadedRoom("r1", 0, t.room.to_dict(), [], []),
        dice=SeededDice(seed),
        wall_clock=lambda: 0.0,
        new_token=lambda: f"token-{next(tokens)}",
        recent_tokens=RecentTokens(600.0, lambda: 0.0),
    )
    rng = random.Random(seed)
    actor_of = {"gm": t.gm, "p1": t.p1, "p2": t.p2, "obs": t.obs}
    vs = all_viewers(t)

    def pick(items: list[str]) -> str:
        return rng.choice(items) if items else "c9"

    for n, ((op, args), who, aimed) in enumerate(commands):
        if op == "undo":
            continue  # the log walk: tests/rules/test_views.py covers what undo shows
        if aimed:
            args = aim(op, args, core.room, pick)
            if op == "set_order" and core.room.combat is None:
                op = "combat_start"
        if op == "add_character":
            args = {**SHEET, **args, "name": f"Secret-Nouveau-{n}"}
        actor = actor_of[who]
        if actor.is_gm:
            target = args.get("char") or args.get("patient") or "-"
            name = core.state["characters"].get(target, {}).get("name", "nobody")
            cmd_id = f"edit:fvtt-{target}:{name}.{op}@{n}"
        else:
            cmd_id = f"{who}-{n}"
        before = core.state
        decision = core.evaluate(CommandIn(actor, 0, cmd_id, op, args))
        core.commit()
        after = core.state
        sender = Viewer(actor.user, actor.role)
        if not sender.sees_all:  # the ack's result, an error's message
            assert_no_secret(decision.reply, before, after, sender)
        if decision.patch is None:
            continue
        message = Message(decision.patch, decision.view)
        for k, v in vs.items():
            frame = message.frame_for(message.key(v), v)
            own = v.user == actor.user
            assert frame["id"] == (cmd_id if own or v.sees_all else None), (k, op)
            if not v.sees_all:
                assert_no_secret(frame, before, after, v)
    for v in vs.values():  # resume and sync replies
        for p in core.patches_after(0, v) or []:
            assert v.sees_all or p["id"] is None or p["by"] == v.user
