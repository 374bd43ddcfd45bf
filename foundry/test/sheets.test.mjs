// Sheets follow the server: values, conditions, edits, linking, players'
// actions (a real server, the Foundry stand-in).
import assert from "node:assert/strict";
import { test } from "node:test";

import { pf1Sheet, serverForFile, sfrpgSheet } from "./harness.mjs";
import { SfrpgActorSheet } from "./standin.mjs";

const table = serverForFile("s");

const hp = (tab, id) => tab.client.actor(id).system.attributes.hp.value;
const conditions = (tab, id) => tab.client.actor(id).conditionNames();
const taggedWrites = (t) => t.world.log.filter((l) => l.type === "Actor" && l.options?.vttSync);

test("sfrpg: a dying actor's sheet values and conditions follow the server; a player's first aid goes with their own token", async () => {
  const t = await table();
  const mine = { default: 0, [t.playerUser]: 3 };
  const aline = await t.actor({ name: "Aline", system: sfrpgSheet(), ownership: mine });
  const bastien = await t.actor({
    name: "Bastien",
    system: sfrpgSheet({ hp: 38, hpMax: 38, med: 9 }),
    ownership: mine,
  });
  const gorgol = await t.actor({
    name: "Gorgol",
    type: "npc",
    system: sfrpgSheet({ hp: 7, hpMax: 7, sp: 4, spMax: 4, rp: 2, rpMax: 2, level: 1 }),
  });
  for (const id of [aline, bastien, gorgol]) await t.gm.mod.sheets.link(t.gm.client.actor(id));
  await t.settle();
  const [ca, cb, cg] = [aline, bastien, gorgol].map((id) => `fvtt-${id}`);
  // Linked from the sheets; owners from Foundry's ownership (Paul's client told the GM its server user).
  assert.equal(t.state.characters[ca].owner, t.people.Paul.user);
  assert.equal(t.state.characters[cg].owner, null);
  assert.deepEqual(
    ["pv_max", "pe_max", "pp_max", "level", "medicine"].map((k) => t.state.characters[cb][k]),
    [38, 15, 6, 3, 9],
  );
  assert.equal(t.gm.client.actor(aline).flags["vtt-sync"].char, ca);

  // The GM drops Aline's Stamina and HP to 0 on her sheet: one damage (PE first, D1), dying (D2).
  await t.gm.client.actor(aline).update({ "system.attributes.sp.value": 0, "system.attributes.hp.value": 0 });
  await t.settle();
  const a = t.state.characters[ca];
  assert.deepEqual([a.pv, a.pe, a.pp, a.condition], [0, 0, 6, "dying"]);
  for (const tab of t.all) {
    const s = tab.client.actor(aline).system.attributes;
    assert.deepEqual([s.hp.value, s.sp.value, s.rp.value], [0, 0, 6]);
    assert.deepEqual(conditions(tab, aline), ["dying", "unconscious"]);
  }
  // Gorgol too, by the server (the tracker page, say): the sheet follows.
  await t.watcher.command("damage", { char: cg, amount: 11 });
  await t.settle();
  assert.deepEqual(conditions(t.player, gorgol), ["dying", "unconscious"]);
  // One round out of combat: both lose a PP (D5) in one command, shown in one batched write.
  const writes = taggedWrites(t).length;
  await t.watcher.command("advance_clock", { seconds: 6 });
  await t.settle();
  const batch = taggedWrites(t).slice(writes);
  assert.equal(batch.length, 1);
  assert.deepEqual(batch[0].ids.sort(), [aline, gorgol].sort());
  assert.equal(t.player.client.actor(aline).system.attributes.rp.value, 5);
  assert.equal(t.player.client.actor(gorgol).system.attributes.rp.value, 1);

  // Paul's first aid on Aline from Bastien's sheet, with his own token (the GM queued a natural 20).
  await t.watcher.command("queue_rolls", { rolls: [20] });
  await t.settle();
  const offered = t.player.mod.sheets.actionsFor(t.player.client.actor(bastien));
  const aid = offered.find((x) => x.op === "first_aid" && x.args.patient === ca);
  assert.ok(aid, JSON.stringify(offered));
  const ack = await t.player.mod.sheets.act(t.player.client.actor(bastien), aid.op, aid.args);
  assert.ok(ack?.v);
  await t.settle();
  const patch = t.seenPatches.find((p) => p.v === ack.v);
  assert.equal(patch.by, t.people.Paul.user);
  assert.deepEqual(
    patch.events.filter((e) => e.kind === "condition").map((e) => [e.char, e.to, e.cause]),
    [[ca, "stable", "first_aid"]],
  );
  for (const tab of t.all) assert.deepEqual(conditions(tab, aline), ["stable", "unconscious"]);

  // Paul edits Aline's HP on her sheet: the server keeps them; nothing is sent.
  const v = t.watcher.version;
  await t.player.client.actor(aline).update({ "system.attributes.hp.value": 20, name: "Aline the brave" });
  await t.settle();
  assert.equal(t.watcher.version, v + 1); // only the name (a sheet field) went to the server
  assert.equal(t.state.characters[ca].name, "Aline the brave");
  assert.equal(hp(t.gm, aline), 0);
  assert.match(t.player.client.notifications.at(-1).text, /server keeps Aline/);
  // Gorgol's PP run out: dead.
  await t.watcher.command("advance_clock", { seconds: 12 });
  await t.settle();
  assert.deepEqual(conditions(t.gm, gorgol), ["dead"]);
  t.assertClean();
  t.close();
});

test("sfrpg: the sheet owns the maxima: a GM's edit of max HP goes to the server, current values follow", async () => {
  const t = await table();
  const aline = await t.actor({ name: "Aline", system: sfrpgSheet() });
  await t.gm.mod.sheets.link(t.gm.client.actor(aline));
  const ca = `fvtt-${aline}`;
  await t.gm.client.actor(aline).update({ "system.attributes.hp.max": 25, "system.attributes.rp.max": 4 });
  await t.settle();
  const c = t.state.characters[ca];
  assert.deepEqual([c.pv, c.pv_max, c.pp, c.pp_max], [20, 25, 4, 4]); // PP brought down to the new maximum
  assert.equal(t.gm.client.actor(aline).system.attributes.rp.value, 4);
  // The ownership moves to Paul: so does the server's owner.
  await t.gm.client.actor(aline).update({ ownership: { [t.playerUser]: 3 } });
  await t.settle();
  assert.equal(t.state.characters[ca].owner, t.people.Paul.user);
  // A heal on the sheet by the GM is a heal on the server (S2), capped by pv_max.
  await t.gm.client.actor(aline).update({ "system.attributes.hp.value": 30 });
  await t.settle();
  assert.equal(t.state.characters[ca].pv, 25);
  assert.equal(hp(t.player, aline), 25);
  t.assertClean();
  t.close();
});

test("pf1: HP kept as pf1's offset, PE and PP in the module's flags, conditions through setConditions", async () => {
  const t = await table({ system: "pf1" });
  const valeros = await t.actor({
    name: "Valeros",
    system: pf1Sheet({ hpMax: 24, hpOffset: -4 }),
    flags: { "vtt-sync": { pe_max: 5, pp_max: 4 } },
  });
  await t.gm.mod.sheets.link(t.gm.client.actor(valeros));
  const cv = `fvtt-${valeros}`;
  let c = t.state.characters[cv];
  assert.deepEqual([c.pv, c.pv_max, c.pe, c.pe_max, c.pp, c.pp_max, c.medicine], [20, 24, 5, 5, 4, 4, 6]);
  // The GM sets HP to 0 on the sheet (pf1 turns it into an offset): damage to PV only, dying.
  await t.gm.client.actor(valeros).update({ "system.attributes.hp.value": 0 });
  await t.settle();
  c = t.state.characters[cv];
  assert.deepEqual([c.pv, c.pe, c.condition], [0, 5, "dying"]);
  for (const tab of t.all) {
    const actor = tab.client.actor(valeros);
    assert.equal(actor.system.attributes.hp.offset, -24);
    assert.equal(actor.system.attributes.hp.value, 0);
    assert.deepEqual([actor.flags["vtt-sync"].pe, actor.flags["vtt-sync"].pp], [5, 4]);
    assert.deepEqual(conditions(tab, valeros), ["dying", "unconscious"]);
  }
  // The condition write went through pf1's setConditions with the module's tag.
  const condWrite = t.world.log.filter(
    (l) => l.type === "Actor" && l.options?.vttSync && l.ids.includes(valeros),
  );
  assert.ok(condWrite.length >= 2);
  // Healed by the server: conscious, no condition.
  await t.watcher.command("heal", { char: cv, amount: 10 });
  await t.settle();
  assert.equal(t.player.client.actor(valeros).system.attributes.hp.value, 10);
  assert.deepEqual(conditions(t.player, valeros), []);
  t.assertClean();
  t.close();
});

test("pf1 with Wounds and Vigor: vigor is PE, wounds are PV", async () => {
  const t = await table({ system: "pf1" });
  for (const tab of t.all) {
    tab.client.registered.set("pf1.healthConfig", {
      scope: "world",
      default: { variants: { pc: { useWoundsAndVigor: true }, npc: { useWoundsAndVigor: false } } },
    });
  }
  const seelah = await t.actor({ name: "Seelah", system: pf1Sheet(), flags: { "vtt-sync": { pp_max: 3 } } });
  await t.gm.mod.sheets.link(t.gm.client.actor(seelah));
  const cs = `fvtt-${seelah}`;
  let c = t.state.characters[cs];
  assert.deepEqual([c.pv, c.pv_max, c.pe, c.pe_max, c.pp_max], [12, 12, 9, 9, 3]);
  // Vigor and wounds both down to 0 on the sheet: one damage of 21 (vigor first), dying.
  await t.gm.client
    .actor(seelah)
    .update({ "system.attributes.vigor.value": 0, "system.attributes.wounds.value": 0 });
  await t.settle();
  c = t.state.characters[cs];
  assert.deepEqual([c.pv, c.pe, c.condition], [0, 0, "dying"]);
  const edits = t.patches("edit");
  assert.equal(edits.length, 1);
  assert.equal(edits[0].events.find((e) => e.kind === "damage").amount, 21);
  const s = t.player.client.actor(seelah).system.attributes;
  assert.deepEqual([s.wounds.value, s.vigor.value], [0, 0]);
  t.assertClean();
  t.close();
});

test("another system: HP where the system keeps them, PE/PP in flags, Foundry's status effects", async () => {
  const t = await table({ system: "dnd5e" });
  const id = await t.actor({
    name: "Lae'zel",
    system: {
      attributes: { hp: { value: 30, max: 30 } },
      details: { level: 5 },
      abilities: { con: { value: 16 } },
    },
    flags: { "vtt-sync": { pe_max: 10, pp_max: 2 } },
  });
  await t.gm.mod.sheets.link(t.gm.client.actor(id));
  const cid = `fvtt-${id}`;
  const c = t.state.characters[cid];
  assert.deepEqual([c.pv, c.pe, c.pp, c.level, c.abilities.con], [30, 10, 2, 5, 16]);
  await t.watcher.command("damage", { char: cid, amount: 40 });
  await t.settle();
  assert.deepEqual(conditions(t.player, id), ["unconscious"]);
  assert.equal(hp(t.player, id), 0);
  await t.watcher.command("advance_clock", { seconds: 60 });
  await t.settle();
  assert.equal(t.state.characters[cid].condition, "dead");
  assert.deepEqual(conditions(t.player, id), ["dead"]);
  t.assertClean();
  t.close();
});

// Issue 32, item 2: sfrpg's AppV1 sheets submit the whole form (every input,
// HP/SP/RP included, changed or not) and Foundry runs preUpdateActor on that
// before diffing. A player's edit of any field raised "the server keeps..."
// and a GM's sheet drawn before a PP loss put the older PP back.
test("sfrpg: a whole-form submit changes only what the user changed; a sheet drawn before a PP loss does not put it back", async () => {
  const t = await table();
  const aline = await t.actor({ name: "Aline", system: sfrpgSheet(), ownership: { default: 0, [t.playerUser]: 3 } });
  await t.gm.mod.sheets.link(t.gm.client.actor(aline));
  const ca = `fvtt-${aline}`;
  await t.settle();
  // Paul renames his character on his sheet: the name goes to the server, no word about HP.
  const paulSheet = new SfrpgActorSheet(t.player.client.actor(aline), t.player.client.Hooks);
  await paulSheet.render();
  await paulSheet.submit({ name: "Aline the brave" });
  await t.settle();
  assert.equal(t.state.characters[ca].name, "Aline the brave");
  assert.deepEqual(t.player.client.notifications, []);
  // Dying (the GM's damage), the GM's sheet drawn; then a round passes: 1 RP lost.
  await t.watcher.command("damage", { char: ca, amount: 35 });
  await t.settle();
  const sheet = new SfrpgActorSheet(t.gm.client.actor(aline), t.gm.client.Hooks);
  await sheet.render();
  assert.equal(sheet.inputs["system.attributes.rp.value"], 6);
  // The GM edits the level while the PP loss is being written: the sheet,
  // not drawn again yet, submits RP 6.
  let submitted = null;
  t.gm.client.Hooks.on("updateActor", (actor, changed) => {
    if (submitted || changed.system?.attributes?.rp?.value !== 5) return;
    submitted = sheet.submit({ "system.details.level.value": 4 });
  });
  await t.watcher.command("advance_clock", { seconds: 6 });
  await t.settle();
  await submitted;
  await t.settle();
  assert.equal(sheet.inputs["system.attributes.rp.value"], 5); // drawn again since
  const c = t.state.characters[ca];
  assert.deepEqual([c.pp, c.level], [5, 4]);
  for (const tab of t.all) assert.equal(tab.client.actor(aline).system.attributes.rp.value, 5);
  // A real edit on the sheet drawn now: HP 0 -> 3 is a heal.
  await sheet.submit({ "system.attributes.hp.value": 3 });
  await t.settle();
  assert.equal(t.state.characters[ca].pv, 3);
  t.assertClean();
  t.close();
});

// Issue 32, item 7: nonlethal and ability damage never showed on sheets.
for (const system of ["sfrpg", "pf1"]) {
  test(`${system}: the server's ability damage and a nonlethal knock-out show on the sheets; a GM's edit of ability damage is sent`, async () => {
    const t = await table({ system });
    const sheet = system === "sfrpg" ? sfrpgSheet() : pf1Sheet();
    const flags = system === "pf1" ? { "vtt-sync": { pe_max: 5, pp_max: 3 } } : {};
    const id = await t.actor({ name: "Kira", system: sheet, flags });
    await t.gm.mod.sheets.link(t.gm.client.actor(id));
    const cid = `fvtt-${id}`;
    await t.watcher.command("ability_damage", { char: cid, ability: "con", amount: 4 });
    await t.settle();
    for (const tab of t.all) assert.equal(tab.client.actor(id).system.abilities.con.damage, 4);
    // The GM lowers it on the sheet: an ability_restore of 2.
    await t.gm.client.actor(id).update({ "system.abilities.con.damage": 2 });
    await t.settle();
    assert.equal(t.state.characters[cid].ability_damage.con, 2);
    for (const tab of t.all) assert.equal(tab.client.actor(id).system.abilities.con.damage, 2);
    // Knocked out by nonlethal damage (N1): unconscious, neither dying nor stabilised.
    await t.watcher.command("damage", { char: cid, amount: 200, nonlethal: true });
    await t.settle();
    assert.deepEqual([t.state.characters[cid].condition, t.state.characters[cid].nonlethal], ["stable", true]);
    for (const tab of t.all) assert.deepEqual(tab.client.actor(id).conditionNames(), ["unconscious"]);
    t.assertClean();
    t.close();
  });
}
