// Reading and editing the data paths of a Foundry update (nested objects or
// dotted keys, as Foundry accepts both), for the system adapters.

/** @typedef {Record<string, unknown>} Data an object of plain data (an update, a system's data) */

/** A path's spec for takeEdits: the path of the value itself, or [path of
 * an offset, base] (value = base + offset, as pf1 keeps HP).
 * @typedef {string | [string, number]} EditPath */

/** Is `v` a plain object (not null, not an array)?
 * @param {unknown} v @returns {v is Data} */
export function isRecord(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** The value at a dotted `path` of `obj` (undefined when absent).
 * @param {unknown} obj @param {string} path @returns {unknown} */
export function getProperty(obj, path) {
  /** @type {unknown} */
  let v = obj;
  for (const key of path.split(".")) {
    if (!isRecord(v)) return undefined;
    v = v[key];
  }
  return v;
}

/** Is there a value (even undefined) at `path`?
 * @param {unknown} obj @param {string} path */
export function hasProperty(obj, path) {
  /** @type {unknown} */
  let v = obj;
  for (const key of path.split(".")) {
    if (!isRecord(v) || !(key in v)) return false;
    v = v[key];
  }
  return true;
}

/** Read `path` from an update's `changed` (nested, or with dotted keys).
 * @param {Record<string, unknown>} changed @param {string} path
 * @returns {{found: true, value: unknown} | {found: false}} */
function changedValue(changed, path) {
  if (Object.prototype.hasOwnProperty.call(changed, path)) return { found: true, value: changed[path] };
  if (hasProperty(changed, path)) return { found: true, value: getProperty(changed, path) };
  return { found: false };
}

/** Remove `path` from `changed`, nested or dotted, leaving the rest.
 * @param {Record<string, unknown>} changed @param {string} path */
function strip(changed, path) {
  delete changed[path];
  const keys = path.split(".");
  /** @type {Record<string, unknown>[]} */
  const parents = [changed];
  let v = changed;
  for (const key of keys.slice(0, -1)) {
    const next = v[key];
    if (!isRecord(next)) return;
    v = next;
    parents.push(v);
  }
  delete v[keys[keys.length - 1]];
  // drop the objects the removal emptied
  for (let i = keys.length - 2; i >= 0; i--) {
    const parent = parents[i];
    const child = parent[keys[i]];
    if (isRecord(child) && !Object.keys(child).length) delete parent[keys[i]];
    else break;
  }
}

/** A number as an integer in [lo, hi], or `fallback` if it is none.
 * @param {unknown} v @param {number} lo @param {number} hi @param {number} fallback */
export function int(v, lo, hi, fallback) {
  const n = Number(v);
  if (!Number.isFinite(n)) return fallback;
  return Math.min(hi, Math.max(lo, Math.floor(n)));
}

/** Only the keys whose value differs from the document's data (an update
 * that changes nothing is not sent).
 * @param {object} doc @param {Data} update @returns {Data} */
export function onlyChanged(doc, update) {
  /** @type {Data} */
  const out = {};
  for (const [path, value] of Object.entries(update)) {
    if (getProperty(doc, path) !== value) out[path] = value;
  }
  return out;
}

/**
 * Find and remove the server-owned values in an update. `spec` maps pv/pe/pp
 * to the paths that hold them: a plain path (the value itself) or
 * [path, base] for an offset (value = base + offset).
 */
/** @param {Data} changed @param {Record<string, EditPath[]>} spec @returns {Record<string, number>} */
export function takeEdits(changed, spec) {
  /** @type {Record<string, number>} */
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
