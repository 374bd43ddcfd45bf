// How a game system's actor maps to a server character, as pure functions
// of the actor's data (plus the few system methods that set conditions).
//
// The server owns the current values (PV, PE, PP) and the condition; the
// sheet owns the maxima, the level, the abilities and the Medicine bonus.
// Each adapter can:
//   read(actor)           the sheet as add_character / update_character values
//   write(actor, char)    the actor update (dotted keys) that shows the server's values
//   wanted(char)          the system conditions the server's condition means
//   applyConditions(actor, changes, options)  set them with the system's API
//   edits(actor, changed) the server-owned values a sheet update tries to change
//                         (removed from `changed`, returned as {pv, pe, pp})
//
// Data paths were checked against the systems' sources (foundry/README.md,
// "What was verified").

import { getProperty, hasProperty, int, onlyChanged, takeEdits } from "./data.mjs";
import { MODULE_ID } from "./names.mjs";

export { MODULE_ID };

// Server limits (rules/validate.py) the sheet's numbers are clamped to:
// a sheet can hold anything, a refused add_character helps nobody.
const MIN_SCORE = 1; // ability score
const MAX_SCORE = 100;
const MIN_LEVEL = 1;
const MAX_LEVEL = 100;
const MAX_POOL = 1_000_000;
const MAX_SKILL = 1_000;

export const ABILITIES = ["str", "dex", "con", "int", "wis", "cha"];

/** The server conditions (names.mjs CONDITIONS), as the system conditions
 * each one sets. `nonlethal`: stable after nonlethal damage (N1), knocked
 * out rather than dying: unconscious only. */
// sfrpg and pf1 both have dying, stable, unconscious and dead conditions.
const DYING_CONDITIONS = {
  names: ["dying", "stable", "unconscious", "dead"],
  conscious: [],
  dying: ["dying", "unconscious"],
  stable: ["stable", "unconscious"],
  nonlethal: ["unconscious"],
  dead: ["dead"],
};

export const CONDITION_MAP = {
  sfrpg: DYING_CONDITIONS,
  pf1: DYING_CONDITIONS,
  generic: {
    names: ["unconscious", "dead"],
    conscious: [],
    dying: ["unconscious"],
    stable: ["unconscious"],
    nonlethal: ["unconscious"],
    dead: ["dead"],
  },
};

/** The server's ability damage (A1) where sfrpg and pf1 keep their own,
 * `abilities.<a>.damage` (sfrpg: src/module/data/actor/base-actor.mjs,
 * _abilityFieldData; pf1: public/template.json): the update that shows it,
 * only where the system has the field or there is damage to show. */
function writeAbilityDamage(actor, char, update) {
  for (const a of ABILITIES) {
    const n = Number(char.ability_damage?.[a] ?? 0);
    if (n || hasProperty(actor.system || {}, `abilities.${a}.damage`)) update[`system.abilities.${a}.damage`] = n;
  }
  return update;
}

/** The edit spec of the ability damage fields (data.mjs `takeEdits`). */
function abilityDamageSpec() {
  return Object.fromEntries(ABILITIES.map((a) => [`damage.${a}`, [`system.abilities.${a}.damage`]]));
}

function abilityScores(system, field) {
  const out = {};
  for (const a of ABILITIES) {
    out[a] = int(getProperty(system, `abilities.${a}.${field}`), MIN_SCORE, MAX_SCORE, 10);
  }
  return out;
}

function flag(actor, key) {
  return getProperty(actor.flags || {}, `${MODULE_ID}.${key}`);
}

function pools(sheet) {
  for (const k of ["pv", "pe", "pp"]) {
    sheet[`${k}_max`] = int(sheet[`${k}_max`], k === "pv" ? 1 : 0, MAX_POOL, k === "pv" ? 1 : 0);
    sheet[k] = int(sheet[k], 0, sheet[`${k}_max`], sheet[`${k}_max`]);
  }
  return sheet;
}

/** An ability modifier from a score (d20 systems). */
function abilityMod(score) {
  const n = Number(score);
  return Number.isFinite(n) ? Math.floor((n - 10) / 2) : 0;
}

/**
 * PE/PP maxima proposed for a system that has none (pf1, others), modelled
 * on Starfinder's (the rules' PE and PP are its Stamina and Resolve): PE
 * `level x (6 + Con modifier)` (a class's 6 SP per level, the middle of
 * sfrpg's 5-7), PP `max(1, level / 2 + the better of Wis and Cha
 * modifiers)` (sfrpg: half level + the key ability's modifier, at least 1).
 * Only the maxima not set yet (undefined flags) are proposed; `pe` false
 * when the system holds PE itself (pf1's Wounds and Vigor: vigor).
 */
export function proposeMaxima(system, level, { pe = true } = {}) {
  const lvl = Math.max(1, Math.floor(Number(level) || 1));
  const mod = (a) => abilityMod(getProperty(system || {}, `abilities.${a}.value`));
  const out = {};
  if (pe) out.pe_max = Math.max(0, lvl * Math.max(1, 6 + mod("con")));
  out.pp_max = Math.min(100, Math.max(1, Math.floor(lvl / 2) + Math.max(mod("wis"), mod("cha"))));
  return out;
}

function missingFlagMaxima(actor, { pe = true } = {}) {
  const proposal = proposeMaxima(actor.system, getProperty(actor.system || {}, "details.level.value") ?? 1, { pe });
  const out = {};
  if (pe && flag(actor, "pe_max") === undefined) out.pe_max = proposal.pe_max;
  if (flag(actor, "pp_max") === undefined) out.pp_max = proposal.pp_max;
  return out;
}

// ---------------------------------------------------------------- Starfinder (sfrpg)

const sfrpg = {
  id: "sfrpg",
  conditions: CONDITION_MAP.sfrpg,

  read(actor) {
    const s = actor.system || {};
    const level = getProperty(s, "details.level.value") ?? getProperty(s, "details.cr") ?? 1;
    return pools({
      name: String(actor.name || "?").slice(0, 100),
      level: int(Math.max(1, Number(level) || 1), MIN_LEVEL, MAX_LEVEL, 1),
      pv: getProperty(s, "attributes.hp.value"),
      pv_max: getProperty(s, "attributes.hp.max"),
      // NPCs have no Stamina: PE 0, damage goes to HP at once (as in the system).
      pe: getProperty(s, "attributes.sp.value") ?? 0,
      pe_max: getProperty(s, "attributes.sp.max") ?? 0,
      pp: getProperty(s, "attributes.rp.value"),
      pp_max: getProperty(s, "attributes.rp.max") ?? 0,
      abilities: abilityScores(s, "value"),
      medicine: int(getProperty(s, "skills.med.mod"), -MAX_SKILL, MAX_SKILL, 0),
    });
  },

  write(actor, char) {
    const update = {
      "system.attributes.hp.value": char.pv,
      "system.attributes.rp.value": char.pp,
    };
    if (hasProperty(actor.system || {}, "attributes.sp")) update["system.attributes.sp.value"] = char.pe;
    return onlyChanged(actor, writeAbilityDamage(actor, char, update));
  },

  hasCondition(actor, name) {
    return Boolean(actor.hasCondition?.(name));
  },

  async applyConditions(actor, changes) {
    // sfrpg's setCondition adds or removes the condition item, one at a time.
    for (const [name, on] of Object.entries(changes)) await actor.setCondition(name, on);
  },

  edits(actor, changed) {
    return takeEdits(changed, {
      pv: ["system.attributes.hp.value"],
      pe: ["system.attributes.sp.value"],
      pp: ["system.attributes.rp.value"],
      ...abilityDamageSpec(),
    });
  },
};

// ---------------------------------------------------------------- Pathfinder 1 (pf1)

function pf1WoundsAndVigor(actor, settings) {
  const kind = actor.type === "npc" ? "npc" : "pc";
  const config = settings?.("pf1", "healthConfig");
  return Boolean(config?.variants?.[kind]?.useWoundsAndVigor);
}

const pf1 = {
  id: "pf1",
  conditions: CONDITION_MAP.pf1,

  /** PV/PE live in hp (PE in the module's flags), or wounds/vigor under the
   * Wounds and Vigor variant (vigor absorbs damage first, as PE do). PP
   * live in the module's flags: pf1 has no resolve. */
  paths(actor, settings) {
    return pf1WoundsAndVigor(actor, settings)
      ? { pv: "attributes.wounds", pe: "attributes.vigor" }
      : { pv: "attributes.hp", pe: null };
  },

  /** The maxima pf1 lacks, proposed (PE unless Wounds and Vigor holds it). */
  missingMaxima(actor, settings) {
    return missingFlagMaxima(actor, { pe: !this.paths(actor, settings).pe });
  },

  read(actor, settings) {
    const s = actor.system || {};
    const p = this.paths(actor, settings);
    const peMax = p.pe ? getProperty(s, `${p.pe}.max`) : (flag(actor, "pe_max") ?? 0);
    const ppMax = flag(actor, "pp_max") ?? 0;
    return pools({
      name: String(actor.name || "?").slice(0, 100),
      level: int(getProperty(s, "details.level.value") ?? 1, MIN_LEVEL, MAX_LEVEL, 1),
      pv: getProperty(s, `${p.pv}.value`),
      pv_max: getProperty(s, `${p.pv}.max`),
      pe: p.pe ? getProperty(s, `${p.pe}.value`) : (flag(actor, "pe") ?? peMax),
      pe_max: peMax,
      pp: flag(actor, "pp") ?? ppMax,
      pp_max: ppMax,
      // the base scores: pf1's totals carry condition effects (dying sets Dex to 0)
      abilities: abilityScores(s, "value"),
      medicine: int(getProperty(s, "skills.hea.mod"), -MAX_SKILL, MAX_SKILL, 0),
    });
  },

  write(actor, char, settings) {
    const s = actor.system || {};
    const p = this.paths(actor, settings);
    // pf1 stores these as an offset from the (derived) maximum: value = max + offset.
    const update = {
      [`system.${p.pv}.offset`]: char.pv - (getProperty(s, `${p.pv}.max`) ?? 0),
      [`flags.${MODULE_ID}.pp`]: char.pp,
    };
    if (p.pe) update[`system.${p.pe}.offset`] = char.pe - (getProperty(s, `${p.pe}.max`) ?? 0);
    else update[`flags.${MODULE_ID}.pe`] = char.pe;
    return onlyChanged(actor, writeAbilityDamage(actor, char, update));
  },

  hasCondition(actor, name) {
    return Boolean(actor.hasCondition?.(name));
  },

  async applyConditions(actor, changes, options) {
    // pf1 sets several conditions (and their tracks) in one call.
    await actor.setConditions(changes, options);
  },

  edits(actor, changed, settings) {
    const s = actor.system || {};
    const p = this.paths(actor, settings);
    const pe = p.pe
      ? [`system.${p.pe}.value`, [`system.${p.pe}.offset`, getProperty(s, `${p.pe}.max`) ?? 0]]
      : [`flags.${MODULE_ID}.pe`];
    return takeEdits(changed, {
      pv: [`system.${p.pv}.value`, [`system.${p.pv}.offset`, getProperty(s, `${p.pv}.max`) ?? 0]],
      pe,
      pp: [`flags.${MODULE_ID}.pp`],
      ...abilityDamageSpec(),
    });
  },
};

// ---------------------------------------------------------------- any other system

const generic = {
  id: "generic",
  conditions: CONDITION_MAP.generic,

  /** HP where most systems keep them (system.attributes.hp), else in flags. */
  hpPath(actor) {
    return hasProperty(actor.system || {}, "attributes.hp.value") ? "system.attributes.hp" : null;
  },

  missingMaxima(actor) {
    return missingFlagMaxima(actor);
  },

  read(actor) {
    const hp = this.hpPath(actor);
    const pvMax = hp ? getProperty(actor, `${hp}.max`) : flag(actor, "pv_max");
    const peMax = flag(actor, "pe_max") ?? 0;
    const ppMax = flag(actor, "pp_max") ?? 0;
    const s = actor.system || {};
    return pools({
      name: String(actor.name || "?").slice(0, 100),
      level: int(
        getProperty(s, "details.level.value") ?? getProperty(s, "details.level") ?? 1,
        MIN_LEVEL,
        MAX_LEVEL,
        1,
      ),
      pv: hp ? getProperty(actor, `${hp}.value`) : flag(actor, "pv"),
      pv_max: pvMax,
      pe: flag(actor, "pe") ?? peMax,
      pe_max: peMax,
      pp: flag(actor, "pp") ?? ppMax,
      pp_max: ppMax,
      abilities: abilityScores(s, "value"),
      medicine: int(flag(actor, "medicine"), -MAX_SKILL, MAX_SKILL, 0),
    });
  },

  write(actor, char) {
    const hp = this.hpPath(actor);
    const update = {
      [`flags.${MODULE_ID}.pe`]: char.pe,
      [`flags.${MODULE_ID}.pp`]: char.pp,
    };
    update[hp ? `${hp}.value` : `flags.${MODULE_ID}.pv`] = char.pv;
    return onlyChanged(actor, update);
  },

  hasCondition(actor, name) {
    return Boolean(actor.statuses?.has?.(name));
  },

  async applyConditions(actor, changes) {
    // Foundry's own status effects (Actor#toggleStatusEffect, v12+).
    for (const [name, on] of Object.entries(changes)) await actor.toggleStatusEffect(name, { active: on });
  },

  edits(actor, changed) {
    const hp = this.hpPath(actor);
    return takeEdits(changed, {
      pv: [hp ? `${hp}.value` : `flags.${MODULE_ID}.pv`],
      pe: [`flags.${MODULE_ID}.pe`],
      pp: [`flags.${MODULE_ID}.pp`],
    });
  },
};

export const ADAPTERS = { sfrpg, pf1, generic };

/** The adapter for a system id (game.system.id); any other system is generic. */
export function adapterFor(systemId) {
  return ADAPTERS[systemId] || generic;
}

/** The system conditions to change so that the actor shows the server's
 * `condition` (`nonlethal`: stable after nonlethal damage, N1):
 * {name: true|false} for those that differ, {} when it already does. */
export function conditionChanges(adapter, actor, condition, nonlethal = false) {
  const map = adapter.conditions;
  const on = new Set(map[condition === "stable" && nonlethal ? "nonlethal" : condition] || []);
  const out = {};
  for (const name of map.names) {
    const want = on.has(name);
    if (adapter.hasCondition(actor, name) !== want) out[name] = want;
  }
  return out;
}

