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

/** The server conditions, as the system conditions each one sets. */
// sfrpg and pf1 both have dying, stable, unconscious and dead conditions.
const DYING_CONDITIONS = {
  names: ["dying", "stable", "unconscious", "dead"],
  conscious: [],
  dying: ["dying", "unconscious"],
  stable: ["stable", "unconscious"],
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
    dead: ["dead"],
  },
};

export function getProperty(obj, path) {
  let v = obj;
  for (const key of path.split(".")) {
    if (v === null || v === undefined) return undefined;
    v = v[key];
  }
  return v;
}

export function hasProperty(obj, path) {
  let v = obj;
  for (const key of path.split(".")) {
    if (v === null || typeof v !== "object" || !(key in v)) return false;
    v = v[key];
  }
  return true;
}

/** Read `path` from an update's `changed` (nested, or with dotted keys). */
function changedValue(changed, path) {
  if (Object.prototype.hasOwnProperty.call(changed, path)) return { found: true, value: changed[path] };
  if (hasProperty(changed, path)) return { found: true, value: getProperty(changed, path) };
  return { found: false };
}

/** Remove `path` from `changed`, nested or dotted, leaving the rest. */
function strip(changed, path) {
  delete changed[path];
  const keys = path.split(".");
  const parents = [changed];
  let v = changed;
  for (const key of keys.slice(0, -1)) {
    if (v === null || typeof v !== "object" || !(key in v)) return;
    v = v[key];
    parents.push(v);
  }
  if (v && typeof v === "object") delete v[keys[keys.length - 1]];
  // drop the objects the removal emptied
  for (let i = keys.length - 2; i >= 0; i--) {
    const parent = parents[i];
    const child = parent[keys[i]];
    if (child && typeof child === "object" && !Object.keys(child).length) delete parent[keys[i]];
    else break;
  }
}

function int(v, lo, hi, fallback) {
  const n = Number(v);
  if (!Number.isFinite(n)) return fallback;
  return Math.min(hi, Math.max(lo, Math.floor(n)));
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

/** Only the keys whose value differs from the actor's data (an update that
 * changes nothing is not sent). */
function onlyChanged(actor, update) {
  const out = {};
  for (const [path, value] of Object.entries(update)) {
    if (getProperty(actor, path) !== value) out[path] = value;
  }
  return out;
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
    return onlyChanged(actor, update);
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
    return onlyChanged(actor, update);
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
    const spec = {
      pv: [`system.${p.pv}.value`, [`system.${p.pv}.offset`, getProperty(s, `${p.pv}.max`) ?? 0]],
      pp: [`flags.${MODULE_ID}.pp`],
    };
    spec.pe = p.pe
      ? [`system.${p.pe}.value`, [`system.${p.pe}.offset`, getProperty(s, `${p.pe}.max`) ?? 0]]
      : [`flags.${MODULE_ID}.pe`];
    return takeEdits(changed, spec);
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

/**
 * Find and remove the server-owned values in an update. `spec` maps pv/pe/pp
 * to the paths that hold them: a plain path (the value itself) or
 * [path, base] for an offset (value = base + offset).
 */
function takeEdits(changed, spec) {
  const out = {};
  for (const [key, paths] of Object.entries(spec)) {
    for (const p of paths) {
      const [path, base] = Array.isArray(p) ? p : [p, null];
      const got = changedValue(changed, path);
      if (!got.found) continue;
      strip(changed, path);
      const n = Number(got.value);
      if (!Number.isFinite(n)) continue;
      out[key] = Math.floor(base === null ? n : base + n);
    }
  }
  return out;
}

export const ADAPTERS = { sfrpg, pf1, generic };

/** The adapter for a system id (game.system.id); any other system is generic. */
export function adapterFor(systemId) {
  return ADAPTERS[systemId] || generic;
}

/** The system conditions to change so that the actor shows `condition`:
 * {name: true|false} for those that differ, {} when it already does. */
export function conditionChanges(adapter, actor, condition) {
  const map = adapter.conditions;
  const on = new Set(map[condition] || []);
  const out = {};
  for (const name of map.names) {
    const want = on.has(name);
    if (adapter.hasCondition(actor, name) !== want) out[name] = want;
  }
  return out;
}

/**
 * The update_character `set` that brings the server's sheet-owned fields to
 * the sheet: maxima, level, name (and owner when given). Current values above
 * a lowered maximum come down with it (a correction never breaks an invariant).
 */
export function sheetCorrections(sheet, char, owner) {
  const set = {};
  if (sheet.name !== char.name) set.name = sheet.name;
  if (sheet.level !== char.level) set.level = sheet.level;
  if (sheet.pv_max !== char.pv_max) set.pv_max = sheet.pv_max;
  if (sheet.pe_max !== (char.pe_max_base ?? char.pe_max)) set.pe_max = sheet.pe_max;
  if (sheet.pp_max !== char.pp_max) set.pp_max = sheet.pp_max;
  if (owner !== undefined && owner !== char.owner) set.owner = owner;
  if (set.pv_max !== undefined && char.pv > set.pv_max) set.pv = set.pv_max;
  if (set.pe_max !== undefined || set.level !== undefined) {
    // A2: the effective maximum is the sheet's less `level` per point of Con modifier lost.
    const level = set.level ?? char.level;
    const lost = Math.floor((char.ability_damage?.con ?? 0) / 2);
    const effective = Math.max(0, (set.pe_max ?? char.pe_max_base ?? char.pe_max) - level * lost);
    if (char.pe > effective) set.pe = effective;
  }
  if (set.pp_max !== undefined && char.pp > set.pp_max) set.pp = set.pp_max;
  return set;
}

/**
 * The commands a GM's edit of current values on a sheet stands for:
 * lowering PE and PV together down to PE 0 is one damage (PE first, D1);
 * lowering PV alone is damage that skips PE; raising PV is a heal (S2);
 * raising PE and any change of PP are GM corrections.
 * @returns {Array<[string, object]>} [op, args] pairs, in order
 */
export function editCommands(id, char, edits) {
  /** @type {Array<[string, object]>} */
  const cmds = [];
  const d = {};
  for (const k of ["pv", "pe", "pp"]) {
    if (edits[k] === undefined) continue;
    const target = Math.max(0, Math.min(edits[k], char[`${k}_max`]));
    d[k] = target - char[k];
  }
  if ((d.pe ?? 0) < 0 && (d.pv ?? 0) < 0 && char.pe + d.pe === 0) {
    cmds.push(["damage", { char: id, amount: -(d.pe + d.pv) }]);
  } else {
    if ((d.pe ?? 0) < 0) cmds.push(["damage", { char: id, amount: -d.pe }]);
    if ((d.pv ?? 0) < 0) cmds.push(["damage", { char: id, amount: -d.pv, pv_only: true }]);
  }
  if ((d.pv ?? 0) > 0) cmds.push(["heal", { char: id, amount: d.pv }]);
  const set = {};
  if ((d.pe ?? 0) > 0) set.pe = char.pe + d.pe;
  if ((d.pp ?? 0) !== 0) set.pp = char.pp + d.pp;
  if (Object.keys(set).length) cmds.push(["update_character", { char: id, set }]);
  return cmds;
}
