// The trace format of the recorder (foundry/tools/recorder, README there):
// what a hook was called with, as shapes, never values (no names, tokens or
// world data leave the maintainer's Foundry).
//
//   { "format": "vtt-sync-hook-trace/1",
//     "foundry": "13.345", "system": "sfrpg 0.30.0", "module": "0.2.0",
//     "clients": { "<client label>": [ <entry>, ... ] } }
//   entry: { "hook": "combatTurn", "args": [<shape>, ...], "options": ["advanceTime", ...] | null }
//
// A shape: "null", "undefined", "boolean", "number", "string", "function",
// "array", {"doc": "Combat"} for a Foundry document (by its documentName),
// or {"keys": ["a", "b.c", ...]} for a plain object: its key paths, dotted,
// sorted, two levels deep. `options` repeats the keys of an argument named
// options (the update options of pre/update hooks, the third argument of
// combatTurn/combatRound), the part the module depends on most.

const DEPTH = 2;

function keyPaths(obj, depth, prefix = "") {
  const out = [];
  for (const [k, v] of Object.entries(obj)) {
    const path = `${prefix}${k}`;
    if (v && typeof v === "object" && !Array.isArray(v) && depth > 1 && !v.documentName) {
      const inner = keyPaths(v, depth - 1, `${path}.`);
      out.push(...(inner.length ? inner : [path]));
    } else {
      out.push(path);
    }
  }
  return out.sort();
}

/** The shape of one value (see above). */
export function shapeOf(v) {
  if (v === null) return "null";
  if (v === undefined) return "undefined";
  if (Array.isArray(v)) return "array";
  if (typeof v === "object") {
    const name = v.documentName ?? v.constructor?.documentName;
    if (typeof name === "string") return { doc: name };
    if (typeof v.jquery === "string" || typeof v.querySelector === "function") return "html";
    return { keys: keyPaths(v, DEPTH) };
  }
  return typeof v;
}

/** Which argument of a hook is its options object (null: none). */
export function optionsIndex(hook) {
  if (hook === "combatTurn" || hook === "combatRound") return 2;
  if (/^preUpdate/.test(hook)) return 2;
  if (/^update/.test(hook) && hook !== "updateWorldTime") return 2;
  if (hook === "updateWorldTime") return 2;
  return null;
}

/** One trace entry for a hook call. */
export function entry(hook, args) {
  const i = optionsIndex(hook);
  const opts = i === null ? null : args[i];
  return {
    hook,
    args: args.map(shapeOf),
    options: opts && typeof opts === "object" ? Object.keys(opts).sort() : null,
  };
}

/** The hooks the module listens to (module.mjs, ui.mjs): what a trace records. */
export const HOOKS = [
  "combatStart", "combatTurn", "combatRound", "preUpdateCombat", "updateCombat", "combatTurnChange",
  "createCombat", "deleteCombat", "createCombatant", "deleteCombatant", "updateCombatant",
  "updateWorldTime", "preUpdateActor", "updateActor", "userConnected", "updateUser",
  "renderActorSheet", "renderActorSheetV2", "renderCombatTracker", "renderPlayerList", "renderPlayers",
  "renderSettingsConfig",
];
