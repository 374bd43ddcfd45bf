// Reading and editing the data paths of a Foundry update (nested objects or
// dotted keys, as Foundry accepts both), for the system adapters.

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

export function int(v, lo, hi, fallback) {
  const n = Number(v);
  if (!Number.isFinite(n)) return fallback;
  return Math.min(hi, Math.max(lo, Math.floor(n)));
}

/** Only the keys whose value differs from the actor's data (an update that
 * changes nothing is not sent). */
export function onlyChanged(actor, update) {
  const out = {};
  for (const [path, value] of Object.entries(update)) {
    if (getProperty(actor, path) !== value) out[path] = value;
  }
  return out;
}

/**
 * Find and remove the server-owned values in an update. `spec` maps pv/pe/pp
 * to the paths that hold them: a plain path (the value itself) or
 * [path, base] for an offset (value = base + offset).
 */
export function takeEdits(changed, spec) {
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
