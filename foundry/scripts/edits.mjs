// What a change of a sheet means on the server, as pure functions: the
// corrections of the sheet-owned fields (update_character) and the commands
// a GM's edit of server-owned values stands for.

/** A sheet as the server's character fields (systems.mjs `read`): what
 * add_character takes, and the sheet-owned fields update_character corrects.
 * @typedef {{name: string, level: number, pv: number, pv_max: number, pe: number, pe_max: number,
 *   pp: number, pp_max: number, abilities: Record<string, number>, medicine: number}} Sheet */

/** An update_character `set`.
 * @typedef {{name?: string, level?: number, owner?: string | null, pv?: number, pv_max?: number,
 *   pe?: number, pe_max?: number, pp?: number, pp_max?: number}} Correction */

/** A command: its op and its arguments. @typedef {[string, Record<string, unknown>]} Command */

/**
 * The update_character `set` that brings the server's sheet-owned fields to
 * the sheet: maxima, level, name (and owner when given). Current values above
 * a lowered maximum come down with it (a correction never breaks an invariant).
 * @param {Sheet} sheet @param {VttSync.Character} char @param {string | null | undefined} owner
 * @returns {Correction}
 */
export function sheetCorrections(sheet, char, owner) {
  /** @type {Correction} */
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
 * raising PE and any change of PP are GM corrections; ability damage
 * (`damage.<ability>`) raised or lowered is ability_damage or ability_restore.
 * @param {string} id @param {VttSync.Character} char @param {Record<string, number>} edits
 * @returns {Command[]} [op, args] pairs, in order
 */
export function editCommands(id, char, edits) {
  /** @type {Command[]} */
  const cmds = [];
  /** How far each pool moves (0: not edited, or no change). @param {"pv" | "pe" | "pp"} k */
  const delta = (k) => {
    const edit = edits[k];
    if (edit === undefined) return 0;
    return Math.max(0, Math.min(edit, char[`${k}_max`])) - char[k];
  };
  const d = { pv: delta("pv"), pe: delta("pe"), pp: delta("pp") };
  if (d.pe < 0 && d.pv < 0 && char.pe + d.pe === 0) {
    cmds.push(["damage", { char: id, amount: -(d.pe + d.pv) }]);
  } else {
    if (d.pe < 0) cmds.push(["damage", { char: id, amount: -d.pe }]);
    if (d.pv < 0) cmds.push(["damage", { char: id, amount: -d.pv, pv_only: true }]);
  }
  if (d.pv > 0) cmds.push(["heal", { char: id, amount: d.pv }]);
  /** @type {Correction} */
  const set = {};
  if (d.pe > 0) set.pe = char.pe + d.pe;
  if (d.pp !== 0) set.pp = char.pp + d.pp;
  if (Object.keys(set).length) cmds.push(["update_character", { char: id, set }]);
  // Ability damage (A1) on the sheet: more is ability_damage, less is ability_restore.
  for (const [key, value] of Object.entries(edits)) {
    if (!key.startsWith("damage.")) continue;
    const ability = key.slice("damage.".length);
    const d = Math.max(0, value) - (char.ability_damage?.[ability] ?? 0);
    if (d > 0) cmds.push(["ability_damage", { char: id, ability, amount: d }]);
    if (d < 0) cmds.push(["ability_restore", { char: id, ability, amount: -d }]);
  }
  return cmds;
}
