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

import {
  MAX_LEVEL,
  MAX_SKILL,
  MIN_LEVEL,
  abilityDamageSpec,
  abilityScores,
  flag,
  hasConditionApi,
  missingFlagMaxima,
  nameOf,
  number,
  pf1ConditionApi,
  pools,
  sfrpgConditionApi,
  writeAbilityDamage,
} from "./actor-data.mjs";
import { getProperty, hasProperty, int, onlyChanged, takeEdits } from "./data.mjs";
import { MODULE_ID } from "./names.mjs";

export { MODULE_ID };

/** The server's condition -> the system's conditions; `names`: all the
 * system conditions the module sets.
 * @typedef {{names: string[]} & Record<string, string[] | undefined>} ConditionMap */

/**
 * One system's mapping (README, "Actors, per system").
 * @typedef {object} Adapter
 * @property {string} id
 * @property {ConditionMap} conditions
 * @property {(actor: SheetActor, settings: SettingsReader) => import("./edits.mjs").Sheet} read
 * @property {(actor: SheetActor, char: VttSync.Character, settings: SettingsReader) => Data} write
 * @property {(actor: Actor.Implementation, name: string) => boolean} hasCondition
 * @property {(actor: Actor.Implementation, changes: Record<string, boolean>, options: object) => Promise<void>} applyConditions
 * @property {(actor: SheetActor, changed: Data, settings: SettingsReader) => Record<string, number>} edits
 * @property {(actor: SheetActor, settings: SettingsReader) => Maxima} [missingMaxima]
 * @property {(actor: SheetActor, settings: SettingsReader) => boolean} [holdsPe] PE held by the system's own field
 */

/** @typedef {import("./data.mjs").Data} Data */
/** @typedef {import("./data.mjs").EditPath} EditPath */
/** @typedef {import("./actor-data.mjs").Maxima} Maxima */
/** @typedef {import("./actor-data.mjs").SheetActor} SheetActor */
/** @typedef {import("./actor-data.mjs").SettingsReader} SettingsReader */

/** The server conditions (names.mjs CONDITIONS), as the system conditions
 * each one sets. `nonlethal`: stable after nonlethal damage (N1), knocked
 * out rather than dying: unconscious only. */
// sfrpg and pf1 both have dying, stable, unconscious and dead conditions.
/** @type {ConditionMap} */
const DYING_CONDITIONS = {
  names: ["dying", "stable", "unconscious", "dead"],
  conscious: [],
  dying: ["dying", "unconscious"],
  stable: ["stable", "unconscious"],
  nonlethal: ["unconscious"],
  dead: ["dead"],
};

/** @type {Record<"sfrpg" | "pf1" | "generic", ConditionMap>} */
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

// ---------------------------------------------------------------- Starfinder (sfrpg)

/** @type {Adapter} */
const sfrpg = {
  id: "sfrpg",
  conditions: CONDITION_MAP.sfrpg,

  read(actor) {
    const s = actor.system;
    const level = getProperty(s, "details.level.value") ?? getProperty(s, "details.cr") ?? 1;
    return pools({
      name: nameOf(actor),
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
    /** @type {Data} */
    const update = {
      "system.attributes.hp.value": char.pv,
      "system.attributes.rp.value": char.pp,
    };
    if (hasProperty(actor.system, "attributes.sp")) update["system.attributes.sp.value"] = char.pe;
    return onlyChanged(actor, writeAbilityDamage(actor, char, update));
  },

  hasCondition(actor, name) {
    return hasConditionApi(actor) && Boolean(actor.hasCondition(name));
  },

  async applyConditions(actor, changes) {
    // sfrpg's setCondition adds or removes the condition item, one at a time.
    if (!sfrpgConditionApi(actor)) return;
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

/** pf1's healthConfig setting, as far as the module reads it. */
/** @typedef {{variants?: Record<string, {useWoundsAndVigor?: boolean} | undefined>}} Pf1HealthConfig */

/** @param {SheetActor} actor @param {SettingsReader} settings */
function pf1WoundsAndVigor(actor, settings) {
  const kind = String(actor.type) === "npc" ? "npc" : "pc";
  return getProperty(settings("pf1", "healthConfig"), `variants.${kind}.useWoundsAndVigor`) === true;
}

/** PV/PE live in hp (PE in the module's flags), or wounds/vigor under the
 * Wounds and Vigor variant (vigor absorbs damage first, as PE do). PP live
 * in the module's flags: pf1 has no resolve.
 * @param {SheetActor} actor @param {SettingsReader} settings @returns {{pv: string, pe: string | null}} */
export function pf1Paths(actor, settings) {
  return pf1WoundsAndVigor(actor, settings)
    ? { pv: "attributes.wounds", pe: "attributes.vigor" }
    : { pv: "attributes.hp", pe: null };
}

/** @param {SheetActor} actor @param {string} path the pool's path under system: its maximum */
function maxOf(actor, path) {
  return number(getProperty(actor.system, `${path}.max`), 0);
}

/** @type {Adapter} */
const pf1 = {
  id: "pf1",
  conditions: CONDITION_MAP.pf1,

  holdsPe(actor, settings) {
    return pf1Paths(actor, settings).pe !== null;
  },

  /** The maxima pf1 lacks, proposed (PE unless Wounds and Vigor holds it). */
  missingMaxima(actor, settings) {
    return missingFlagMaxima(actor, { pe: !pf1Paths(actor, settings).pe });
  },

  read(actor, settings) {
    const s = actor.system;
    const p = pf1Paths(actor, settings);
    const peMax = p.pe ? getProperty(s, `${p.pe}.max`) : (flag(actor, "pe_max") ?? 0);
    const ppMax = flag(actor, "pp_max") ?? 0;
    return pools({
      name: nameOf(actor),
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
    const p = pf1Paths(actor, settings);
    // pf1 stores these as an offset from the (derived) maximum: value = max + offset.
    /** @type {Data} */
    const update = {
      [`system.${p.pv}.offset`]: char.pv - maxOf(actor, p.pv),
      [`flags.${MODULE_ID}.pp`]: char.pp,
    };
    if (p.pe) update[`system.${p.pe}.offset`] = char.pe - maxOf(actor, p.pe);
    else update[`flags.${MODULE_ID}.pe`] = char.pe;
    return onlyChanged(actor, writeAbilityDamage(actor, char, update));
  },

  hasCondition(actor, name) {
    return hasConditionApi(actor) && Boolean(actor.hasCondition(name));
  },

  async applyConditions(actor, changes, options) {
    // pf1 sets several conditions (and their tracks) in one call.
    if (pf1ConditionApi(actor)) await actor.setConditions(changes, options);
  },

  edits(actor, changed, settings) {
    const p = pf1Paths(actor, settings);
    /** @type {EditPath[]} */
    const pe = p.pe ? [`system.${p.pe}.value`, [`system.${p.pe}.offset`, maxOf(actor, p.pe)]] : [`flags.${MODULE_ID}.pe`];
    return takeEdits(changed, {
      pv: [`system.${p.pv}.value`, [`system.${p.pv}.offset`, maxOf(actor, p.pv)]],
      pe,
      pp: [`flags.${MODULE_ID}.pp`],
      ...abilityDamageSpec(),
    });
  },
};

// ---------------------------------------------------------------- any other system

/** HP where most systems keep them (system.attributes.hp), else in flags.
 * @param {SheetActor} actor */
function hpPath(actor) {
  return hasProperty(actor.system, "attributes.hp.value") ? "system.attributes.hp" : null;
}

/** @type {Adapter} */
const generic = {
  id: "generic",
  conditions: CONDITION_MAP.generic,

  missingMaxima(actor) {
    return missingFlagMaxima(actor);
  },

  read(actor) {
    const hp = hpPath(actor);
    const pvMax = hp ? getProperty(actor, `${hp}.max`) : flag(actor, "pv_max");
    const peMax = flag(actor, "pe_max") ?? 0;
    const ppMax = flag(actor, "pp_max") ?? 0;
    const s = actor.system;
    return pools({
      name: nameOf(actor),
      level: int(getProperty(s, "details.level.value") ?? getProperty(s, "details.level") ?? 1, MIN_LEVEL, MAX_LEVEL, 1),
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
    const hp = hpPath(actor);
    /** @type {Data} */
    const update = {
      [`flags.${MODULE_ID}.pe`]: char.pe,
      [`flags.${MODULE_ID}.pp`]: char.pp,
    };
    update[hp ? `${hp}.value` : `flags.${MODULE_ID}.pv`] = char.pv;
    return onlyChanged(actor, update);
  },

  hasCondition(actor, name) {
    return actor.statuses.has(name);
  },

  async applyConditions(actor, changes) {
    // Foundry's own status effects (Actor#toggleStatusEffect, v12+).
    for (const [name, on] of Object.entries(changes)) await actor.toggleStatusEffect(name, { active: on });
  },

  edits(actor, changed) {
    const hp = hpPath(actor);
    return takeEdits(changed, {
      pv: [hp ? `${hp}.value` : `flags.${MODULE_ID}.pv`],
      pe: [`flags.${MODULE_ID}.pe`],
      pp: [`flags.${MODULE_ID}.pp`],
    });
  },
};

/** @type {Record<string, Adapter | undefined>} */
export const ADAPTERS = { sfrpg, pf1, generic };

/** The adapter for a system id (game.system.id); any other system is generic.
 * @param {string | undefined} systemId @returns {Adapter} */
export function adapterFor(systemId) {
  return ADAPTERS[systemId ?? ""] ?? generic;
}

/** The system conditions to change so that the actor shows the server's
 * `condition` (`nonlethal`: stable after nonlethal damage, N1):
 * {name: true|false} for those that differ, {} when it already does.
 * @param {Adapter} adapter @param {Actor.Implementation} actor @param {string} condition @param {boolean} [nonlethal]
 * @returns {Record<string, boolean>} */
export function conditionChanges(adapter, actor, condition, nonlethal = false) {
  const map = adapter.conditions;
  const on = new Set(map[condition === "stable" && nonlethal ? "nonlethal" : condition] ?? []);
  /** @type {Record<string, boolean>} */
  const out = {};
  for (const name of map.names) {
    const want = on.has(name);
    if (adapter.hasCondition(actor, name) !== want) out[name] = want;
  }
  return out;
}
