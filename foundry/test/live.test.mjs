// The module against a real vtt-sync server, through the Foundry stand-in.
import assert from "node:assert/strict";
import { test } from "node:test";

import { serverForFile, sfrpgSheet, serverSeconds } from "./harness.mjs";

const table = serverForFile("r");

/** Aline (Paul's), Gorgol (the GM's) and an unlinked monster in a combat. */
async function combatTable(opts) {
  const t = await table(opts);
  const aline = await t.actor({
    name: "Aline",
    system: sfrpgSheet(),
    ownership: { default: 0, [t.playerUser]: 3 },
  });
  const gorgol = await t.actor({
    name: "Gorgol",
    type: "npc",
    system: sfrpgSheet({ hp: 7, hpMax: 7, sp: 4, spMax: 4, rp: 1, rpMax: 1, level: 1 }),
  });
  const monster = await t.actor({ name: "Monster", type: "npc", system: sfrpgSheet() });
  const gm = t.gm;
  await gm.mod.sheets.link(gm.client.actor(aline));
  await gm.mod.sheets.link(gm.client.actor(gorgol));
  const cid = t.world.addCombat({});
  await gm.client.combat(cid).createEmbeddedDocuments("Combatant", [
    { actorId: aline, initiative: 20 },
    { actorId: monster, initiative: 15 },
    { actorId: gorgol, initiative: 10 },
  ]);
  await t.settle();
  return { t, aline, gorgol, monster, cid, ca: `fvtt-${aline}`, cg: `fvtt-${gorgol}` };
}

for (const generation of [12, 13]) {
  test(`v${generation}: a turn change applies once although the GM and the player both receive the hook`, async () => {
    const { t, cid, ca, cg } = await combatTable({ generation });
    const heard = { gm: 0, player: 0 };
    t.gm.client.Hooks.on("combatTurnChange", () => (heard.gm += 1));
    t.player.client.Hooks.on("combatTurnChange", () => (heard.player += 1));
    const combat = t.gm.client.combat(cid);
    await combat.startCombat();
    await t.settle();
    assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 1 });
    await combat.nextTurn(); // Aline -> Monster: Aline's turn ends on the server
    await t.settle();
    assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 1, round: 1 });
    await t.player.client.combat(cid).nextTurn(); // Monster -> Gorgol, from the player's tab: nothing to send
    await t.settle();
    assert.equal(t.patches("turn").length, 1);
    await combat.nextTurn(); // Gorgol -> round 2, Aline
    await t.settle();
    assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 2 });
    // combatTurnChange: v12 on every client, v13 on the active GM only (after
    // its turn events); the module reads neither (see turns.mjs).
    assert.deepEqual(heard, { gm: 4, player: generation >= 13 ? 0 : 4 });
    assert.deepEqual(
      t.patches("turn").map((p) => p.events.filter((e) => e.kind === "turn").map((e) => e.char)),
      [[cg], [ca]],
    );
    // Time counted once: the server's round (6 s), mirrored into game.time on every client.
    assert.equal(t.state.clock, 6);
    for (const tab of t.all) assert.equal(serverSeconds(tab), 6);
    t.assertClean();
    t.close();
  });
}

// Foundry v13 keeps one `previous` object, updated in place, and fires
// combatTurnChange after the active GM's turn events (database work) were
// awaited: quick Next Turns overwrite it before the first hook runs. Read
// from that hook, one end_turn was never sent (issue 32, item 4).
test("v13: quick Next Turns end every turn once (the tracker's history is the module's own)", async () => {
  const { t, cid, ca, cg } = await combatTable({ generation: 13 });
  const combat = t.gm.client.combat(cid);
  await combat.startCombat();
  await t.settle();
  const priors = [];
  t.gm.client.Hooks.on("combatTurnChange", (c, prior) => priors.push(prior));
  await combat.nextTurn(); // Aline -> Monster: Aline's turn ends
  await combat.nextTurn(); // Monster -> Gorgol, before the first change's turn events are over
  await combat.nextTurn(); // Gorgol -> round 2: Gorgol's turn ends
  await t.settle();
  assert.equal(priors[0], priors[1]); // one live object: the first hook saw the last prior state
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 2 });
  // Each turn patch names the turn that starts: Gorgol's, then Aline's (round 2).
  assert.deepEqual(
    t.patches("turn").map((p) => p.events.filter((e) => e.kind === "turn").map((e) => e.char)),
    [[cg], [ca]],
  );
  assert.equal(t.state.clock, 6);
  t.assertClean();
  t.close();
});

test("two tabs of the GM: every turn, start and time advance applies once", async () => {
  const { t, cid, ca, cg } = await combatTable({ gmTabs: 2 });
  assert.ok(t.tabs.every((tab) => tab.mod.isAutomation())); // same user: both are the active GM
  const combat = t.gm.client.combat(cid);
  await combat.startCombat();
  await t.settle();
  for (let i = 0; i < 6; i++) {
    await t.tabs[i % 2].client.combat(cid).nextTurn(); // either tab clicks
    await t.settle();
  }
  // 6 steps through [Aline, Monster, Gorgol]: round 3, Aline; 4 server turns ended.
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 3 });
  assert.equal(t.patches("turn").length, 4);
  assert.equal(t.patches("combat").length, 1);
  await t.tabs[1].game.time.advance(600); // a GM's manual advance, seen by both tabs
  await t.settle();
  assert.equal(t.patches("clock").length, 1);
  assert.equal(t.state.clock, 12 + 600);
  for (const tab of t.all) assert.equal(serverSeconds(tab), 612);
  t.assertClean();
  t.close();
});

test("only the active GM automates; another GM takes over when it leaves", async () => {
  const { t, cid, ca, cg } = await combatTable();
  const second = t.world.addUser("Zoé (assistant GM)", 3);
  const ack = await t.watcher.command("add_user", { name: "Zoé", role: "gm" });
  const zoe = t.join(second, ack.result.token);
  t.tabs.push(zoe);
  await t.settle();
  assert.equal(t.gm.mod.isAutomation(), true);
  assert.equal(zoe.mod.isAutomation(), false); // Maya (role 4) is the active GM
  await zoe.client.combat(cid).startCombat();
  await t.settle();
  assert.equal(t.patches("combat")[0].by, t.people.gm.user); // sent by Maya's module, not Zoé's
  t.world.disconnect(t.gm.client);
  t.tabs.shift().mod.client.close();
  await t.settle();
  assert.equal(zoe.mod.isAutomation(), true);
  await zoe.client.combat(cid).nextTurn();
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 1, round: 1 });
  assert.equal(t.patches("turn")[0].by, ack.result.user);
  t.assertClean();
  t.close();
});

test("tracker edits mid-combat become set_order; the server's turn follows the tracker's", async () => {
  const { t, gorgol, cid, ca, cg } = await combatTable();
  const combat = t.gm.client.combat(cid);
  await combat.startCombat();
  await combat.nextTurn(); // Foundry: the monster's turn; the server: Gorgol's (next linked to act)
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 1, round: 1 });
  // A newcomer with the highest initiative acts from the next round.
  const bastien = await t.actor({ name: "Bastien", system: sfrpgSheet({ hp: 30, hpMax: 30 }) });
  await t.gm.mod.sheets.link(t.gm.client.actor(bastien));
  const cb = `fvtt-${bastien}`;
  await combat.createEmbeddedDocuments("Combatant", [{ actorId: bastien, initiative: 25 }]);
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [cb, ca, cg], turn: 2, round: 1 });
  // Gorgol's new initiative puts it before the monster's turn: in Foundry it
  // has passed its turn this round, so every linked combatant has: the
  // server's round ends (no end-of-turn rule for Gorgol), Bastien is next.
  const gc = combat.combatants.find((c) => c.actorId === gorgol);
  await gc.update({ initiative: 22 });
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [cb, cg, ca], turn: 0, round: 2 });
  assert.equal(t.state.clock, 6);
  assert.equal(serverSeconds(t.gm), 6);
  // The monster's turn ends: Foundry's round 2 starts with Bastien; nothing to send.
  await combat.nextTurn();
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [cb, cg, ca], turn: 0, round: 2 });
  // Bastien's turn ends, then Gorgol (now the current one) is removed. v12's
  // tracker goes back to the previous survivor, Bastien, who has played:
  // the server's turn goes to Aline, the next to act, and Next Turn in
  // Foundry walks into it without ending Bastien's turn a second time.
  await combat.nextTurn();
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [cb, cg, ca], turn: 1, round: 2 });
  await combat.deleteEmbeddedDocuments("Combatant", [gc.id]);
  await t.settle();
  assert.equal(combat.combatant.actorId, bastien);
  assert.deepEqual(t.state.combat, { order: [cb, ca], turn: 1, round: 2 });
  assert.equal(t.patches("turn").length, 2); // Aline's (round 1) and Bastien's: edits end no turn
  assert.equal(t.patches("order").length, 3);
  await combat.nextTurn(); // Foundry: Bastien -> Aline
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [cb, ca], turn: 1, round: 2 });
  assert.equal(t.patches("turn").length, 2);
  // End of the combat.
  await combat.endCombat();
  await t.settle();
  assert.equal(t.state.combat, null);
  t.assertClean();
  t.close();
});

test("previous turn undoes the module's last end_turn, clock included; otherwise it is refused", async () => {
  const { t, cid, ca, cg } = await combatTable();
  const combat = t.gm.client.combat(cid);
  await combat.startCombat();
  for (let i = 0; i < 3; i++) await combat.nextTurn(); // round 2, Aline
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 2 });
  assert.equal(t.state.clock, 6);
  await combat.previousTurn(); // back to round 1, Gorgol: undo of Gorgol's end_turn (and its round's 6 s)
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 1, round: 1 });
  assert.equal(t.state.clock, 0);
  for (const tab of t.all) assert.equal(serverSeconds(tab), 0);
  assert.equal(t.seenPatches.at(-1).events[0].kind, "undo");
  await combat.previousTurn(); // back to the monster: no server turn to undo
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 1, round: 1 });
  await combat.previousTurn(); // back to Aline: undo of Aline's end_turn
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 1 });
  // Forward again: new end_turns (new ids: an undone id is not a duplicate).
  await combat.nextTurn();
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 1, round: 1 });
  // Something happens after the end_turn: stepping back would undo it, so it is refused.
  await t.watcher.command("damage", { char: cg, amount: 2 });
  await t.settle();
  const turnBefore = combat.turn;
  await combat.previousTurn();
  await t.settle();
  assert.equal(combat.turn, turnBefore); // Foundry's update was cancelled
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 1, round: 1 });
  assert.match(t.gm.client.notifications.at(-1).text, /going back is refused/);
  t.assertClean({ allow: [/going back is refused/] });
  t.close();
});

test("a step back of two turns is two undos, each sent when the server says undo reverts an end_turn", async () => {
  const { t, cid, ca, cg } = await combatTable();
  const combat = t.gm.client.combat(cid);
  await combat.startCombat();
  for (let i = 0; i < 3; i++) await combat.nextTurn(); // round 2, Aline (the monster is unlinked)
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 2 });
  assert.equal(t.gm.mod.client.state.affordances.undo.op, "end_turn");
  await combat.update({ round: 1, turn: 0 }); // back to the start: Gorgol's end_turn, then Aline's
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 1 });
  assert.equal(t.patches("undo").length, 2);
  assert.equal(t.gm.mod.client.state.affordances.undo.op, "combat_start"); // what undo reverts next
  t.assertClean();
  t.close();
});

test("a combat already running when the module is set up: 'link combatants' starts the server's at the tracker's turn", async () => {
  const t = await table();
  const mk = (name) => t.actor({ name, type: "npc", system: sfrpgSheet() });
  const [aline, monster, gorgol] = [await mk("Aline"), await mk("Monster"), await mk("Gorgol")];
  const cid = t.world.addCombat({
    round: 3,
    turn: 1, // the monster's turn, in round 3
    combatants: [
      { _id: "B1", actorId: aline, initiative: 20 },
      { _id: "B2", actorId: monster, initiative: 15 },
      { _id: "B3", actorId: gorgol, initiative: 10 },
    ],
  });
  const combat = t.gm.client.combat(cid);
  await t.gm.mod.tracker.linkCombat(combat);
  await t.settle();
  const [ca, cm, cg] = [`fvtt-${aline}`, `fvtt-${monster}`, `fvtt-${gorgol}`];
  assert.equal(combat.getFlag("vtt-sync", "room"), t.room);
  assert.deepEqual(t.state.combat.order, [ca, cm, cg]);
  assert.equal(t.state.combat.order[t.state.combat.turn], cm);
  // The GM decides the monster stays Foundry's only: the server's order drops it,
  // and the turn goes to the next linked combatant to act.
  await t.gm.mod.sheets.unlink(t.gm.client.actor(monster));
  await t.settle();
  assert.deepEqual(t.state.combat.order, [ca, cg]);
  assert.equal(t.state.combat.order[t.state.combat.turn], cg); // next linked to act in Foundry's round 3
  await combat.nextTurn(); // Gorgol's turn
  await combat.nextTurn(); // round 4, Aline: Gorgol's turn ended on the server
  await t.settle();
  assert.deepEqual([t.state.combat.order[t.state.combat.turn], t.state.clock], [ca, 6]);
  assert.equal(t.patches("turn").length, 1);
  t.assertClean();
  t.close();
});

test("a dead character is left out of the server's combat, as the server's combat_start and set_order choices say (D6)", async () => {
  const t = await table();
  const aline = await t.actor({ name: "Aline", system: sfrpgSheet() });
  const gorgol = await t.actor({ name: "Gorgol", type: "npc", system: sfrpgSheet({ rp: 1, rpMax: 1 }) });
  await t.gm.mod.sheets.link(t.gm.client.actor(aline));
  await t.gm.mod.sheets.link(t.gm.client.actor(gorgol));
  const [ca, cg] = [`fvtt-${aline}`, `fvtt-${gorgol}`];
  await t.watcher.command("damage", { char: cg, amount: 40 });
  await t.watcher.command("advance_clock", { seconds: 12 }); // PP run out: dead
  await t.settle();
  assert.equal(t.state.characters[cg].condition, "dead");
  const combat = await t.startCombat([
    { actorId: aline, initiative: 20 },
    { actorId: gorgol, initiative: 10 },
  ]);
  assert.deepEqual(t.state.combat.order, [ca]);
  await combat.nextTurn(); // Gorgol's turn in Foundry: nothing for the server
  await combat.nextTurn(); // round 2
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [ca], turn: 0, round: 2 });
  t.assertClean();
  t.close();
});

test("one combat at a time: a leftover server combat is replaced, a second running one is refused", async () => {
  const { t, cid, ca, cg } = await combatTable();
  await t.watcher.command("combat_start", { order: [cg] }); // a leftover, started from the tracker page
  await t.settle();
  const combat = t.gm.client.combat(cid);
  await combat.startCombat();
  await t.settle();
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 1 });
  // A second encounter starts while the first runs: it stays Foundry's only.
  const other = t.world.addCombat({ name: "Ambush" });
  const second = t.gm.client.combat(other);
  await second.createEmbeddedDocuments("Combatant", [{ actorId: t.gm.client.combat(cid).turns[0].actorId }]);
  await second.startCombat();
  await t.settle();
  assert.equal(second.getFlag("vtt-sync", "room"), null);
  assert.deepEqual(t.state.combat, { order: [ca, cg], turn: 0, round: 1 });
  assert.match(t.gm.client.notifications.at(-1).text, /one combat at a time; Ambush/);
  await second.nextTurn(); // not the room's: nothing sent
  await t.settle();
  assert.equal(t.patches("turn").length, 0);
  t.assertClean({ allow: [/one combat at a time/] });
  t.close();
});
