// World time: Foundry's game.time and the server's clock end equal.
import assert from "node:assert/strict";
import { test } from "node:test";

import { serverForFile, sfrpgSheet, serverSeconds } from "./harness.mjs";
import { waitFor } from "./server.mjs";

const table = serverForFile("k");

const CALENDAR = 1_000_000; // a world whose calendar is well past second 0

function assertEqualClocks(t) {
  for (const tab of t.all) {
    assert.equal(tab.game.time.worldTime, CALENDAR + t.state.clock);
    assert.equal(serverSeconds(tab), t.state.clock);
  }
}

for (const generation of [12, 13]) {
  test(`v${generation}: a GM's time advance becomes advance_clock; a rewind is refused; game.time follows the server`, async () => {
    const t = await table({ generation, time: CALENDAR });
    assert.deepEqual(t.world.settings.get("vtt-sync.clock"), { room: t.room, offset: CALENDAR }); // the calendar keeps its date
    await t.gm.game.time.advance(3600);
    await t.settle();
    assert.equal(t.state.clock, 3600);
    assert.deepEqual(
      t.patches("clock").map((p) => p.id.split("@")[0]),
      ["clock:0->3600"],
    );
    assertEqualClocks(t);
    // Back in time: refused, and the world clock is put back.
    await t.gm.game.time.advance(-600);
    await t.settle();
    assert.equal(t.state.clock, 3600);
    assertEqualClocks(t);
    assert.match(t.gm.client.notifications.at(-1).text, /cannot go back \(600 s refused\)/);
    // Less than a second is not sent; the next half second makes one.
    await t.gm.game.time.advance(0.5);
    await t.settle();
    assert.equal(t.state.clock, 3600);
    await t.gm.game.time.advance(0.5);
    await t.settle();
    assert.equal(t.state.clock, 3601);
    // The server's own clock changes (another client, a rest completing...) reach game.time.
    const aline = await t.actor({ name: "Aline", system: sfrpgSheet() });
    await t.gm.mod.sheets.link(t.gm.client.actor(aline));
    await t.watcher.command("rest", { char: `fvtt-${aline}`, kind: "short" });
    await t.watcher.command("advance_clock", { seconds: 600 });
    await t.settle();
    assert.equal(t.state.characters[`fvtt-${aline}`].activity, null); // the rest completed at +10 min
    assertEqualClocks(t);
    // An undo of that advance takes the clock back: game.time follows, no warning.
    const warnings = t.gm.client.notifications.length;
    await t.watcher.command("undo");
    await t.settle();
    assert.equal(t.state.clock, 3601);
    assertEqualClocks(t);
    assert.equal(t.gm.client.notifications.length, warnings);
    t.assertClean({ allow: [/cannot go back/] });
    t.close();
  });

  test(`v${generation}: Foundry's own combat time is turned off; the server's rounds are the only time in combat`, async () => {
    const t = await table({ generation, time: CALENDAR });
    const aline = await t.actor({ name: "Aline", system: sfrpgSheet() });
    await t.gm.mod.sheets.link(t.gm.client.actor(aline));
    for (const tab of t.all) tab.env.CONFIG.time.turnTime = 3; // a world that also counts turn time
    const cid = t.world.addCombat({});
    const combat = t.gm.client.combat(cid);
    await combat.createEmbeddedDocuments("Combatant", [{ actorId: aline, initiative: 10 }]);
    const options = [];
    t.gm.client.Hooks.on("combatRound", (c, data, opts) => options.push(opts));
    await combat.startCombat();
    for (let i = 0; i < 3; i++) await combat.nextTurn();
    await t.settle();
    assert.deepEqual(t.state.combat.round, 4);
    assert.equal(t.state.clock, 18);
    assertEqualClocks(t);
    const delta = (o) => (generation >= 13 ? o.worldTime.delta : o.advanceTime);
    assert.deepEqual(options.map(delta), [0, 0, 0]);
    t.assertClean();
    t.close();
  });
}

// sfrpg's CombatSFRPG (foundryvtt-starfinder src/module/combat/combat.js):
// its own next/previous turn and round update with `advanceTime` and fire no
// combatTurn/combatRound; its start adds a round (`advanceTime`), its
// delete() calls game.time.advance(roundTime). Measured before the fix:
// three rounds moved the server's clock 36 s instead of 18.
for (const generation of [12, 13]) {
  test(`v${generation}: a system Combat class that advances time itself (sfrpg) counts time once, start and end included`, async () => {
    const t = await table({ generation, time: CALENDAR, combatClass: "sfrpg" });
    const aline = await t.actor({ name: "Aline", system: sfrpgSheet() });
    const gorgol = await t.actor({ name: "Gorgol", type: "npc", system: sfrpgSheet() });
    await t.gm.mod.sheets.link(t.gm.client.actor(aline));
    await t.gm.mod.sheets.link(t.gm.client.actor(gorgol));
    const fired = [];
    for (const hook of ["combatTurn", "combatRound"]) t.gm.client.Hooks.on(hook, () => fired.push(hook));
    const combat = await t.startCombat([
      { actorId: aline, initiative: 20 },
      { actorId: gorgol, initiative: 10 },
    ]);
    // The start keeps sfrpg's own flags beside the module's.
    assert.deepEqual(t.world.combats.get(combat.id).flags.sfrpg, { startTime: CALENDAR, combatType: "normal", phase: 0 });
    assert.equal(t.world.combats.get(combat.id).flags["vtt-sync"].room, t.room);
    assert.equal(t.state.clock, 0);
    for (let i = 0; i < 6; i++) {
      await combat.nextTurn();
      await t.settle();
    }
    assert.deepEqual(fired, []); // the system's class fires none of core's turn hooks
    assert.equal(t.state.combat.round, 4);
    assert.equal(t.state.clock, 18); // three rounds of 6 s, not 36
    assertEqualClocks(t);
    assert.deepEqual(t.patches("clock"), []);
    await combat.endCombat();
    await t.settle();
    assert.equal(t.state.combat, null);
    assert.equal(t.state.clock, 18); // the system's end-of-combat round is not added
    assertEqualClocks(t);
    t.assertClean();
    t.close();
  });
}

// Issue 32, item 7: sfrpg's end-of-combat round was caught by a 3-second
// window, which also dropped a GM's real one-round advance made then.
test("sfrpg: a GM's own one-round advance just before or after a room combat's end counts; the system's does not", async () => {
  const t = await table({ time: CALENDAR, combatClass: "sfrpg" });
  const aline = await t.actor({ name: "Aline", system: sfrpgSheet() });
  await t.gm.mod.sheets.link(t.gm.client.actor(aline));
  for (const round of [0, 1]) {
    const cid = t.world.addCombat({});
    const combat = t.gm.client.combat(cid);
    await combat.createEmbeddedDocuments("Combatant", [{ actorId: aline, initiative: 20 }]);
    await combat.startCombat();
    await combat.nextTurn(); // round 2: 6 s on the server
    await t.settle();
    const before = t.state.clock;
    if (round === 0) {
      await t.gm.game.time.advance(6); // "a round passes" from the GM, then End Combat at once
      await combat.endCombat();
    } else {
      await combat.endCombat();
      await t.gm.game.time.advance(6); // End Combat, then a round from the GM at once
    }
    await t.settle();
    assert.equal(t.state.combat, null);
    assert.equal(t.state.clock, before + 6); // the GM's round; sfrpg's end-of-combat round is not added
    assertEqualClocks(t);
  }
  t.assertClean();
  t.close();
});

// A calendar module's real-time clock (Simple Calendar: a world-time write
// every 10 s of real time) must not fill the server's undo history.
test("small world-time advances are coalesced into one advance_clock per minute of world time, none lost", async () => {
  const t = await table({ time: CALENDAR, moduleOptions: { clockWindowMs: 60_000 } });
  for (let i = 0; i < 13; i++) {
    await t.gm.game.time.advance(10);
    await t.world.flush();
  }
  await t.settle();
  // 130 s: two commands of 60 s sent, 10 s still held (the window is a minute).
  assert.deepEqual(
    t.patches("clock").map((p) => p.id.split("@")[0]),
    ["clock:0->60", "clock:60->120"],
  );
  assert.equal(t.state.clock, 120);
  assert.equal(t.gm.game.time.worldTime, CALENDAR + 130); // Foundry keeps its time meanwhile
  // Any other command of the module sends the held time first: a linked turn.
  const aline = await t.actor({ name: "Aline", system: sfrpgSheet() });
  await t.gm.mod.sheets.link(t.gm.client.actor(aline));
  await t.settle();
  assert.equal(t.state.clock, 130);
  assertEqualClocks(t);
  t.assertClean();
  t.close();
});

test("world time held when the GM's tab closes is sent when the GM is back (nothing lost)", async () => {
  const t = await table({ time: CALENDAR, moduleOptions: { clockWindowMs: 60_000 } });
  const storage = t.gm.client.storage;
  await t.gm.game.time.advance(20);
  await t.world.flush();
  await t.settle();
  assert.equal(t.state.clock, 0);
  // The tab closes before the minute is over; the GM comes back in the same browser.
  t.gm.mod.client.close();
  clearTimeout(t.gm.mod.clock.timer);
  t.gm.mod.clock.timer = null;
  t.world.disconnect(t.gm.client);
  const back = t.join(t.gmUser, t.people.gm.token, { storage });
  t.tabs[0] = back;
  await waitFor(() => back.mod.status === "connected", { what: "GM back" });
  await t.settle();
  assert.equal(t.state.clock, 20);
  assertEqualClocks(t);
  t.close();
});

// Issue 32, item 5: every GM combat had its time set to 0, even one without
// a linked combatant, whose rounds the server never counts: time froze.
test("a combat the server does not hold (no linked combatant) keeps Foundry's time, which reaches the server as world time", async () => {
  const t = await table({ time: CALENDAR });
  const monsters = [await t.actor({ name: "Ghoul", type: "npc", system: sfrpgSheet() })];
  monsters.push(await t.actor({ name: "Ghast", type: "npc", system: sfrpgSheet() }));
  const cid = t.world.addCombat({});
  const combat = t.gm.client.combat(cid);
  await combat.createEmbeddedDocuments(
    "Combatant",
    monsters.map((actorId, i) => ({ actorId, initiative: 10 - i })),
  );
  await combat.startCombat();
  for (let i = 0; i < 4; i++) await combat.nextTurn(); // two rounds
  await t.settle();
  assert.equal(t.state.combat, null); // the server holds no combat
  assert.equal(t.gm.game.time.worldTime, CALENDAR + 12); // Foundry's two rounds
  assert.equal(t.state.clock, 12); // sent as world time (advance_clock)
  assertEqualClocks(t);
  t.assertClean({ allow: [/no combatant of this combat is linked/] });
  t.close();
});
