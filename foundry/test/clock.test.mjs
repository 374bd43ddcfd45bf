// World time: Foundry's game.time and the server's clock end equal.
import assert from "node:assert/strict";
import { test } from "node:test";

import { serverForFile, sfrpgSheet, serverSeconds } from "./harness.mjs";

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
    await t.gm.mod.link(t.gm.client.actor(aline));
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
    await t.gm.mod.link(t.gm.client.actor(aline));
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
