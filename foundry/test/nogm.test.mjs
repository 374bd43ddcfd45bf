// No GM client sends automation (none online, or none with a GM token the
// server accepts): the users who move a turn are told, once, plainly;
// Foundry's time moves as Foundry moves it; a GM back with a GM token sends
// the turns played meanwhile, and says so (issue 32, item 3).
import assert from "node:assert/strict";
import { test } from "node:test";

import { serverForFile, serverSeconds, sfrpgSheet } from "./harness.mjs";
import { waitFor } from "./server.mjs";

const table = serverForFile("n");

/** Aline (Paul's) and Gorgol (dying: 1 RP lost at the end of each of his
 * turns) linked, in a combat the GM started. */
async function dyingGorgol(opts) {
  const t = await table(opts);
  const aline = await t.actor({ name: "Aline", system: sfrpgSheet(), ownership: { default: 0, [t.playerUser]: 3 } });
  const gorgol = await t.actor({ name: "Gorgol", type: "npc", system: sfrpgSheet({ rp: 4, rpMax: 4 }) });
  await t.gm.mod.sheets.link(t.gm.client.actor(aline));
  await t.gm.mod.sheets.link(t.gm.client.actor(gorgol));
  const [ca, cg] = [`fvtt-${aline}`, `fvtt-${gorgol}`];
  await t.watcher.command("damage", { char: cg, amount: 35 });
  const combat = await t.startCombat([
    { actorId: aline, initiative: 20 },
    { actorId: gorgol, initiative: 10 },
  ]);
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 1 });
  return { t, cid: combat.id, ca, cg };
}

const texts = (tab) => tab.client.notifications.map((n) => n.text);

test("no GM online: a player's End Turn is told once and Foundry's time moves; the GM back sends the turns and says so", async () => {
  const { t, cid, ca, cg } = await dyingGorgol();
  const storage = t.gm.client.storage;
  t.world.disconnect(t.gm.client);
  t.gm.mod.client.close();
  t.tabs.shift();
  await t.settle();
  const combat = t.player.client.combat(cid);
  await combat.nextTurn(); // Aline -> Gorgol
  await combat.nextTurn(); // Gorgol -> round 2 (Paul may move the tracker: BaseCombat#canUpdate)
  await t.settle();
  const told = texts(t.player).filter((x) => /no GM is running vtt-sync/.test(x));
  assert.equal(told.length, 1);
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 1 }); // nothing reached the server
  assert.equal(t.player.game.time.worldTime, 6); // Foundry's round was not set to 0
  assert.equal(t.state.clock, 0);
  // Maya is back, in the same browser.
  const back = t.join(t.gmUser, t.people.gm.token, { storage });
  t.tabs.push(back);
  await waitFor(() => back.mod.status === "connected", { what: "GM back" });
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 2 });
  assert.equal(t.state.characters[cg].pp, 3); // Gorgol's end of turn: 1 RP lost
  assert.equal(t.state.clock, 6); // the round, once
  for (const tab of t.all) assert.equal(serverSeconds(tab), 6);
  assert.match(texts(back).join("\n"), /2 turns were played while no GM ran vtt-sync/);
  assert.equal(texts(back).filter((x) => /differ/.test(x)).length, 0); // no "out of step"
  assert.doesNotMatch(texts(back).join("\n"), /world time passed/); // the round came with the turns
  t.assertClean({ allow: [/no GM is running vtt-sync/, /turns were played while no GM/] });
  t.close();
});

test("a GM whose token is refused sends no automation: the player is told; an assistant GM with a GM token takes over", async () => {
  const { t, cid, ca, cg } = await dyingGorgol();
  // Maya's token is refused (say, rotated): her login is withdrawn.
  await t.gm.mod.settings.setToken("not-a-token");
  await waitFor(() => t.gm.mod.status === "failed", { what: "refused" });
  await t.settle();
  assert.equal(t.world.users.get(t.gmUser).flags["vtt-sync"].login, null);
  assert.equal(t.player.mod.users.present(), false);
  await t.player.client.combat(cid).nextTurn(); // Aline -> Gorgol
  await t.gm.game.time.advance(600); // Maya moves the calendar on: nothing reaches the server
  await t.settle();
  assert.match(texts(t.player).join("\n"), /no GM is running vtt-sync/);
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 1 });
  assert.equal(t.state.clock, 0);
  // Zoé, an assistant GM with her own GM token, joins: she sends automation.
  const ack = await t.watcher.command("add_user", { name: "Zoé", role: "gm" });
  const zoe = t.join(t.world.addUser("Zoé", 3), ack.result.token);
  t.tabs.push(zoe);
  await waitFor(() => zoe.mod.isAutomation(), { what: "Zoé automates" });
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 1, round: 1 }); // Aline's turn, sent on Zoé's arrival
  assert.equal(t.state.clock, 600); // and Maya's 600 s, counted, not rewound
  assert.match(texts(zoe).join("\n"), /600 s of world time passed in Foundry while no GM ran vtt-sync/);
  await t.player.client.combat(cid).nextTurn(); // Gorgol -> round 2, now with automation
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 2 });
  assert.equal(t.state.characters[cg].pp, 3);
  assert.equal(t.player.game.time.worldTime, t.world.settings.get("vtt-sync.clock").offset + 606);
  assert.equal(t.state.clock, 606);
  t.assertClean({ allow: [/no GM is running vtt-sync/, /while no GM ran vtt-sync/, /refused/i] });
  t.close();
});
