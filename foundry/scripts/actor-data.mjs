// Reading a system's actor as the server's character fields: the values
// clamped to the server's ranges, ability scores and damage, the PE/PP
// maxima proposed where a system has none, the systems' own condition APIs
// (found on the actor before use). The adapters (systems.mjs) use these.

import { getProperty, hasProperty, int } from "./data.mjs";
import { MODULE_ID } from "./names.mjs";

/** @typedef {import("./data.mjs").Data} Data */
/** @typedef {import("./data.mjs").EditPath} EditPath */
/** The maxima a system lacks, proposed. @typedef {{pe_max?: number, pp_max?: number}} Maxima */

// Server limits (rules/validate.py) the sheet's numbers are clamped to:
// a sheet can hold anything, a refused add_character helps nobody.
const MIN_SCORE = 1; // ability score
const MAX_SCORE = 100;
export const MIN_LEVEL = 1;
export const MAX_LEVEL = 100;
const MAX_POOL = 1_000_000;
export const MAX_SKILL = 1_000;

export const ABILITIES = Object.freeze(["str", "dex", "con", "int", "wis", "cha"]);

/** What an adapter reads of a Foundry actor (foundry-vtt-types' Actor): a
 * plain object of that shape does too (the tests').
 * @typedef {Pick<Actor.Implementation, "name" | "type" | "system" | "flags">} SheetActor */

/** The settings an adapter reads (pf1's healthConfig), or undefined.
 * @typedef {(ns: string, key: string) => unknown} SettingsReader */

// The systems' own condition APIs (not in Foundry's types): sfrpg's
// ActorConditionsMixin (foundryvtt-starfinder src/module/actor/mixins/
// actor-conditions.js: setCondition, hasCondition) and pf1's ActorPF
// (setConditions, hasCondition), found on the actor before use.

/** @typedef {{hasCondition(name: string): boolean}} HasCondition */
/** @typedef {{setCondition(name: string, enabled: boolean): Promise<unknown>}} SfrpgConditions */
/** @typedef {{setConditions(conditions: Record<string, boolean>, context?: object): Promise<unknown>}} Pf1Conditions */

/** @param {object} actor @returns {actor is HasCondition} */
export function hasConditionApi(actor) {
  return "hasCondition" in actor && typeof actor.hasCondition === "function";
}

/** @param {object} actor @returns {actor is SfrpgConditions} */
export function sfrpgConditionApi(actor) {
  return "setCondition" in actor && typeof actor.setCondition === "function";
}

/** @param {object} actor @returns {actor is Pf1Conditions} */
export function pf1ConditionApi(actor) {
  return "setConditions" in actor && typeof actor.setConditions === "function";
}

/** The server's ability damage (A1) where sfrpg and pf1 keep their own,
 * `abilities.<a>.damage` (sfrpg: src/module/data/actor/base-actor.mjs,
 * _abilityFieldData; pf1: public/template.json): the update that shows it,
 * only where the system has the field or there is damage to show.
 * @param {SheetActor} actor @param {VttSync.Character} char @param {Data} update */
export function writeAbilityDamage(actor, char, update) {
  for (const a of ABILITIES) {
    const n = Number(char.ability_damage?.[a] ?? 0);
    if (n || hasProperty(actor.system, `abilities.${a}.damage`)) update[`system.abilities.${a}.damage`] = n;
  }
  return update;
}

/** The edit spec of the ability damage fields (data.mjs `takeEdits`).
 * @returns {Record<string, EditPath[]>} */
export function abilityDamageSpec() {
  return Object.fromEntries(ABILITIES.map((a) => [`damage.${a}`, [`system.abilities.${a}.damage`]]));
}

/** @param {unknown} system @param {string} field @returns {Record<string, number>} */
export function abilityScores(system, field) {
  /** @type {Record<string, number>} */
  const out = {};
  for (const a of ABILITIES) {
    out[a] = int(getProperty(system, `abilities.${a}.${field}`), MIN_SCORE, MAX_SCORE, 10);
  }
  return out;
}

/** One of the module's flags on an actor.
 * @param {SheetActor} actor @param {string} key @returns {unknown} */
export function flag(actor, key) {
  return getProperty(actor.flags, `${MODULE_ID}.${key}`);
}

/** A number, or `fallback` for anything else. @param {unknown} v @param {number} fallback */
export function number(v, fallback) {
  return typeof v === "number" && Number.isFinite(v) ? v : fallback;
}

/** The sheet's values, clamped to the server's ranges: a maximum of at
 * least 1 PV (0 PE, 0 PP), a current value within [0, maximum].
 * @param {{name: string, level: number, abilities: Record<string, number>, medicine: number,
 *   pv: unknown, pv_max: unknown, pe: unknown, pe_max: unknown, pp: unknown, pp_max: unknown}} raw
 * @returns {import("./edits.mjs").Sheet} */
export function pools(raw) {
  const pv_max = int(raw.pv_max, 1, MAX_POOL, 1);
  const pe_max = int(raw.pe_max, 0, MAX_POOL, 0);
  const pp_max = int(raw.pp_max, 0, MAX_POOL, 0);
  return {
    ...raw,
    pv_max,
    pv: int(raw.pv, 0, pv_max, pv_max),
    pe_max,
    pe: int(raw.pe, 0, pe_max, pe_max),
    pp_max,
    pp: int(raw.pp, 0, pp_max, pp_max),
  };
}

/** An ability modifier from a score (d20 systems). @param {unknown} score */
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
 * @param {unknown} system @param {unknown} level @param {{pe?: boolean}} [opts] @returns {Maxima}
 */
export function proposeMaxima(system, level, { pe = true } = {}) {
  const lvl = Math.max(1, Math.floor(Number(level) || 1));
  /** @param {string} a */
  const mod = (a) => abilityMod(getProperty(system, `abilities.${a}.value`));
  /** @type {Maxima} */
  const out = {};
  if (pe) out.pe_max = Math.max(0, lvl * Math.max(1, 6 + mod("con")));
  out.pp_max = Math.min(100, Math.max(1, Math.floor(lvl / 2) + Math.max(mod("wis"), mod("cha"))));
  return out;
}

/** @param {SheetActor} actor @param {{pe?: boolean}} [opts] @returns {Maxima} */
export function missingFlagMaxima(actor, { pe = true } = {}) {
  const proposal = proposeMaxima(actor.system, getProperty(actor.system, "details.level.value") ?? 1, { pe });
  /** @type {Maxima} */
  const out = {};
  if (pe && flag(actor, "pe_max") === undefined) out.pe_max = proposal.pe_max;
  if (flag(actor, "pp_max") === undefined) out.pp_max = proposal.pp_max;
  return out;
}

/** A name as the server takes it. @param {SheetActor} actor */
export function nameOf(actor) {
  return String(actor.name || "?").slice(0, 100);
}

