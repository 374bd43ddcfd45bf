// What a player may do for one character, from the room's state: the
// buttons of the sheet's vtt-sync panel. The server decides (it refuses
// anything the rules forbid); this only hides buttons that would surely be
// refused, so a player sees what is possible now.

/** S3: a quarter of pp_max, at least 1, at most 3 (rules/stabilizing.py). */
export function stabilizeCost(char) {
  return Math.min(3, Math.max(1, Math.floor(char.pp_max / 4)));
}

function inCombat(state, id) {
  return Boolean(state.combat && state.combat.order.includes(id));
}

/**
 * The actions available to the character `id`: [{op, args, key, name?}],
 * `key` naming the button's label (lang/en.json, VTTSYNC.Action.<key>),
 * `name` the other character concerned, if any.
 */
export function availableActions(state, id) {
  const c = state?.characters?.[id];
  if (!c) return [];
  const out = [];
  const others = Object.entries(state.characters).filter(([oid]) => oid !== id);
  if (c.condition === "conscious") {
    for (const [pid, p] of others) {
      if (p.condition === "dying") {
        out.push({ op: "first_aid", args: { char: id, patient: pid }, key: "FirstAid", name: p.name });
      }
    }
    const tending = others.filter(([, p]) => p.healer === id);
    if (!c.activity) {
      for (const [pid, p] of others) {
        if (p.condition === "stable" && !p.healer) {
          out.push({ op: "tend", args: { char: id, patient: pid }, key: "Tend", name: p.name });
        }
      }
    }
    for (const [pid, p] of tending) {
      out.push({ op: "untend", args: { patient: pid }, key: "Untend", name: p.name });
    }
    if (c.activity) {
      out.push({ op: "stop_rest", args: { char: id }, key: "StopRest" });
    } else if (!inCombat(state, id) && !tending.length) {
      if (c.pp >= 1) out.push({ op: "rest", args: { char: id, kind: "short" }, key: "RestShort" });
      out.push({ op: "rest", args: { char: id, kind: "night" }, key: "RestNight" });
      out.push({ op: "rest", args: { char: id, kind: "bed" }, key: "RestBed" });
    }
  } else if (c.condition === "dying") {
    if (!c.regained_this_turn && c.pp >= stabilizeCost(c)) {
      out.push({ op: "stabilize", args: { char: id }, key: "Stabilize" });
    }
  } else if (c.condition === "stable") {
    if (!c.regained_this_turn && c.pp >= 1) {
      out.push({ op: "stay_in_fight", args: { char: id }, key: "StayInFight" });
    }
    if (c.healer) out.push({ op: "untend", args: { patient: id }, key: "Untend", name: c.name });
  }
  return out;
}
