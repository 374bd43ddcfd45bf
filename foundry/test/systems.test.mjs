// The actor <-> character mapping, on data shaped like the systems' actors:
// sfrpg's template (attributes.hp/sp/rp {value, max}, details.level.value or
// an NPC's details.cr, abilities.*.value, skills.med.mod) and pf1's prepared
// actors (attributes.hp/wounds/vigor with a stored `offset` and derived
// value/max, abilities.*.value as the base score, skills.hea.mod).
import assert from "node:assert/strict";
import { test } from "node:test";

import { editCommands, sheetCorrections } from "../scripts/edits.mjs";
import { CONDITION_MAP, adapterFor, conditionChanges } from "../scripts/systems.mjs";

const ABILITIES = ["str", "dex", "con", "int", "wis", "cha"];

function actor({ name = "Hero", type = "character", system, flags = {}, conditions = [] }) {
  return {
    name,
    type,
    system,
    flags,
    hasCondition: (c) => conditions.includes(c),
    statuses: new Set(conditions),
  };
}

/** An sfrpg character as prepared (values as the sheet shows them). */
function sfrpgCharacter() {
  const abilities = {};
  for (const a of ABILITIES) abilities[a] = { value: 10, min: 3, misc: 0, mod: 0, base: 10 };
  abilities.con.value = 14;
  abilities.dex.value = 16;
  return {
    abilities,
    attributes: {
      hp: { min: 0, max: 27, value: 19, temp: null, tempmax: null, tooltip: [] },
      sp: { min: 0, max: 18, value: 11, tooltip: [] },
      rp: { min: 0, max: 5, value: 4, tooltip: [] },
      eac: { min: 0, value: 15, tooltip: [] },
    },
    details: { level: { value: 4, min: 1, max: 20 }, race: "", class: "" },
    skills: {
      med: {
        ability: "int",
        min: 0,
        ranks: 4,
        value: 0,
        misc: 0,
        mod: 7,
        enabled: true,
        isTrainedOnly: true,
      },
    },
    conditions: {},
  };
}

/** An sfrpg NPC (npc2): no Stamina, a CR instead of a level. */
function sfrpgNpc() {
  const s = sfrpgCharacter();
  delete s.attributes.sp;
  s.attributes.rp = { min: 0, max: 0, value: 0, tooltip: [] };
  s.details = { cr: 2, xp: { value: 600 } };
  return s;
}

/** A pf1 (v10+) character as prepared: value = max + offset. */
function pf1Character({ hpOffset = -5 } = {}) {
  const abilities = {};
  for (const a of ABILITIES)
    abilities[a] = { value: 12, damage: 0, drain: 0, userPenalty: 0, total: 12, mod: 1 };
  abilities.dex = { value: 14, damage: 0, drain: 0, userPenalty: 0, total: 0, mod: -5 }; // dying: pf1 sets Dex to 0
  return {
    abilities,
    attributes: {
      hp: { base: 0, temp: 0, nonlethal: 0, offset: hpOffset, max: 31, value: 31 + hpOffset },
      wounds: { base: 0, offset: -2, max: 14, value: 12 },
      vigor: { temp: 0, base: 0, offset: 0, max: 10, value: 10 },
    },
    details: { level: { value: 5 } },
    skills: { hea: { ability: "wis", rt: false, acp: false, rank: 5, mod: 9 } },
  };
}

const woundsAndVigor = (on) => (ns, key) =>
  ns === "pf1" && key === "healthConfig"
    ? { variants: { pc: { useWoundsAndVigor: on }, npc: { useWoundsAndVigor: false } } }
    : undefined;

test("sfrpg: a character's sheet reads as add_character values", () => {
  const sheet = adapterFor("sfrpg").read(actor({ name: "Obozaya", system: sfrpgCharacter() }));
  assert.deepEqual(sheet, {
    name: "Obozaya",
    level: 4,
    pv: 19,
    pv_max: 27,
    pe: 11,
    pe_max: 18,
    pp: 4,
    pp_max: 5,
    abilities: { str: 10, dex: 16, con: 14, int: 10, wis: 10, cha: 10 },
    medicine: 7,
  });
});

test("sfrpg: an NPC has no Stamina (PE 0) and its CR stands for the level", () => {
  const sheet = adapterFor("sfrpg").read(actor({ type: "npc2", system: sfrpgNpc() }));
  assert.deepEqual([sheet.level, sheet.pe, sheet.pe_max, sheet.pp_max], [2, 0, 0, 0]);
  const write = adapterFor("sfrpg").write(actor({ system: sfrpgNpc() }), { pv: 3, pe: 0, pp: 0 });
  assert.deepEqual(write, { "system.attributes.hp.value": 3 }); // no sp path written on an NPC
});

test("sfrpg: the server's values as an actor update, only what differs", () => {
  const a = actor({ system: sfrpgCharacter() });
  const sfrpg = adapterFor("sfrpg");
  assert.deepEqual(sfrpg.write(a, { pv: 19, pe: 11, pp: 4 }), {});
  assert.deepEqual(sfrpg.write(a, { pv: 0, pe: 0, pp: 3 }), {
    "system.attributes.hp.value": 0,
    "system.attributes.sp.value": 0,
    "system.attributes.rp.value": 3,
  });
});

test("sfrpg: an edit of current values is taken out of the update, the rest stays", () => {
  const changed = {
    name: "Renamed",
    system: { attributes: { hp: { value: 5 }, sp: { value: 0, max: 20 } } },
    "system.attributes.rp.value": 1,
  };
  const edits = adapterFor("sfrpg").edits(actor({ system: sfrpgCharacter() }), changed);
  assert.deepEqual(edits, { pv: 5, pe: 0, pp: 1 });
  assert.deepEqual(changed, { name: "Renamed", system: { attributes: { sp: { max: 20 } } } });
});

test("pf1: HP from the derived value, PE/PP from the module's flags, Heal as Medicine, base ability scores", () => {
  const a = actor({ system: pf1Character(), flags: { "vtt-sync": { pe_max: 6, pe: 2, pp_max: 3 } } });
  const sheet = adapterFor("pf1").read(a, woundsAndVigor(false));
  assert.deepEqual(
    [sheet.pv, sheet.pv_max, sheet.pe, sheet.pe_max, sheet.pp, sheet.pp_max, sheet.level, sheet.medicine],
    [26, 31, 2, 6, 3, 3, 5, 9],
  );
  assert.equal(sheet.abilities.dex, 14); // the base score, not the dying total of 0
});

test("pf1: writes are offsets from the maximum (pf1 derives value = max + offset) and flags", () => {
  const a = actor({ system: pf1Character(), flags: { "vtt-sync": { pe_max: 6, pe: 2, pp: 3, pp_max: 3 } } });
  assert.deepEqual(adapterFor("pf1").write(a, { pv: 0, pe: 0, pp: 3 }, woundsAndVigor(false)), {
    "system.attributes.hp.offset": -31,
    "flags.vtt-sync.pe": 0,
  });
});

test("pf1 with Wounds and Vigor: wounds are PV, vigor is PE", () => {
  const a = actor({ system: pf1Character(), flags: { "vtt-sync": { pp_max: 2 } } });
  const get = woundsAndVigor(true);
  const sheet = adapterFor("pf1").read(a, get);
  assert.deepEqual([sheet.pv, sheet.pv_max, sheet.pe, sheet.pe_max], [12, 14, 10, 10]);
  assert.deepEqual(adapterFor("pf1").write(a, { pv: 14, pe: 4, pp: 2 }, get), {
    "system.attributes.wounds.offset": 0,
    "system.attributes.vigor.offset": -6,
    "flags.vtt-sync.pp": 2,
  });
  // An edit arrives as pf1's _preUpdate left it: offsets.
  const changed = { system: { attributes: { vigor: { offset: -10 }, wounds: { offset: -9 } } } };
  assert.deepEqual(adapterFor("pf1").edits(a, changed, get), { pv: 5, pe: 0 });
  assert.deepEqual(changed, {});
});

test("pf1: an edit written as hp.value or as hp.offset gives the same new HP", () => {
  const a = actor({ system: pf1Character() });
  const get = woundsAndVigor(false);
  assert.deepEqual(adapterFor("pf1").edits(a, { "system.attributes.hp.value": 7 }, get), { pv: 7 });
  assert.deepEqual(adapterFor("pf1").edits(a, { system: { attributes: { hp: { offset: -24 } } } }, get), {
    pv: 7,
  });
});

test("generic: HP at system.attributes.hp when the system has them, else in flags", () => {
  const withHp = actor({
    system: { attributes: { hp: { value: 8, max: 10 } }, details: { level: 2 } },
    flags: { "vtt-sync": { pp_max: 1, pp: 1, pe: 0 } },
  });
  const generic = adapterFor("dnd5e");
  assert.equal(generic.id, "generic");
  assert.deepEqual(
    [generic.read(withHp).pv, generic.read(withHp).pv_max, generic.read(withHp).level],
    [8, 10, 2],
  );
  assert.deepEqual(generic.write(withHp, { pv: 0, pe: 0, pp: 1 }), { "system.attributes.hp.value": 0 });
  const bare = actor({ system: {}, flags: { "vtt-sync": { pv_max: 12, pv: 12 } } });
  assert.deepEqual(generic.write(bare, { pv: 4, pe: 0, pp: 0 }), {
    "flags.vtt-sync.pv": 4,
    "flags.vtt-sync.pe": 0, // not in the flags yet
    "flags.vtt-sync.pp": 0,
  });
});

test("conditions: each server condition as the system's, only the changes", () => {
  for (const system of ["sfrpg", "pf1"]) {
    const adapter = adapterFor(system);
    const dying = actor({ system: {}, conditions: ["dying", "unconscious"] });
    assert.deepEqual(conditionChanges(adapter, dying, "dying"), {});
    assert.deepEqual(conditionChanges(adapter, dying, "stable"), { dying: false, stable: true });
    assert.deepEqual(conditionChanges(adapter, dying, "dead"), {
      dying: false,
      unconscious: false,
      dead: true,
    });
    assert.deepEqual(conditionChanges(adapter, dying, "conscious"), { dying: false, unconscious: false });
  }
  const generic = adapterFor("other");
  assert.deepEqual(conditionChanges(generic, actor({ system: {} }), "stable"), { unconscious: true });
  assert.deepEqual(CONDITION_MAP.generic.dead, ["dead"]);
});

test("sheet values out of the server's range are clamped, never sent as a refusal", () => {
  const s = sfrpgCharacter();
  s.attributes.hp = { value: 40, max: 30 };
  s.abilities.str.value = 0;
  s.details.level.value = 0;
  const sheet = adapterFor("sfrpg").read(actor({ system: s }));
  assert.deepEqual([sheet.pv, sheet.abilities.str, sheet.level], [30, 1, 1]);
});

test("editCommands: sheet edits become the server's commands", () => {
  const c = { pv: 20, pv_max: 20, pe: 15, pe_max: 15, pp: 6, pp_max: 6 };
  assert.deepEqual(editCommands("c1", c, { pv: 0, pe: 0 }), [["damage", { char: "c1", amount: 35 }]]);
  assert.deepEqual(editCommands("c1", c, { pe: 10 }), [["damage", { char: "c1", amount: 5 }]]);
  assert.deepEqual(editCommands("c1", c, { pv: 12 }), [["damage", { char: "c1", amount: 8, pv_only: true }]]);
  assert.deepEqual(editCommands("c1", c, { pv: 12, pe: 5 }), [
    ["damage", { char: "c1", amount: 10 }],
    ["damage", { char: "c1", amount: 8, pv_only: true }],
  ]);
  const hurt = { ...c, pv: 5, pe: 0 };
  assert.deepEqual(editCommands("c1", hurt, { pv: 50, pe: 3, pp: 2 }), [
    ["heal", { char: "c1", amount: 15 }],
    ["update_character", { char: "c1", set: { pe: 3, pp: 2 } }],
  ]);
  assert.deepEqual(editCommands("c1", c, { pv: 20 }), []);
});

test("sheetCorrections: maxima, level and owner from the sheet; current values come down with a maximum", () => {
  const c = {
    name: "A",
    level: 3,
    pv: 20,
    pv_max: 20,
    pe: 15,
    pe_max: 15,
    pe_max_base: 15,
    pp: 6,
    pp_max: 6,
    owner: null,
    ability_damage: { con: 4 },
  };
  const sheet = { name: "A", level: 3, pv_max: 20, pe_max: 15, pp_max: 6 };
  assert.deepEqual(sheetCorrections(sheet, c, null), {});
  assert.deepEqual(sheetCorrections(sheet, c, undefined), {}); // owner unknown: left alone
  assert.deepEqual(sheetCorrections({ ...sheet, pv_max: 12, pp_max: 4 }, c, "u2"), {
    pv_max: 12,
    pp_max: 4,
    owner: "u2",
    pv: 12,
    pp: 4,
  });
  // A2: with 4 Con damage (2 modifier points lost) at level 3, pe_max 12 is effectively 6.
  assert.deepEqual(sheetCorrections({ ...sheet, pe_max: 12 }, { ...c, pe: 9, pe_max: 9 }, null), {
    pe_max: 12,
    pe: 6,
  });
});
