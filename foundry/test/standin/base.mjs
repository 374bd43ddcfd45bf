// The stand-in's small pieces: Foundry's data helpers (expandObject,
// mergeObject, diffObject), its Collection, and Hooks.

export const clone = (v) => (v === undefined ? undefined : structuredClone(v));
export const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** {"a.b": 1} -> {a: {b: 1}} (Foundry's update data accepts both), as
 * Foundry's `foundry.utils.expandObject` does it: each key in order is set
 * with setProperty, so a later key naming a whole object (`flags`) replaces
 * what earlier dotted keys (`flags.sfrpg.phase`) put there (foundry-vtt-types
 * v12.331.5 common/utils/helpers.d.mts, expandObject and setProperty). */
export function expand(data) {
  const out = {};
  for (const [key, value] of Object.entries(data || {})) {
    const parts = key.split(".");
    let target = out;
    for (const p of parts.slice(0, -1)) {
      if (!isObject(target[p])) target[p] = {};
      target = target[p];
    }
    target[parts[parts.length - 1]] = isObject(value) ? expand(value) : value;
  }
  return out;
}

/** Merge `changes` into `target` recursively (objects merge, the rest
 * replaces), as mergeObject does for an update. */
export function merge(target, changes) {
  for (const [k, v] of Object.entries(changes)) {
    if (isObject(v) && isObject(target[k])) merge(target[k], v);
    else target[k] = clone(v);
  }
  return target;
}

/** The part of `changes` that differs from `source`: what Foundry writes
 * (and what the update hooks receive) after the preUpdate hooks ran
 * (diffObject). */
export function diff(source, changes) {
  const out = {};
  for (const [k, v] of Object.entries(changes)) {
    if (isObject(v) && isObject(source?.[k])) {
      const d = diff(source[k], v);
      if (Object.keys(d).length) out[k] = d;
    } else if (JSON.stringify(source?.[k]) !== JSON.stringify(v)) {
      out[k] = clone(v);
    }
  }
  return out;
}

export function getPath(obj, path) {
  return path.split(".").reduce((v, k) => (v == null ? undefined : v[k]), obj);
}

/** The key paths of an update, dotted (the keys a permission rule reads). */
export function topKeys(changes) {
  return Object.keys(expand(changes));
}

/** Foundry's Collection: a Map iterated by value, with array helpers. */
export class Collection extends Map {
  [Symbol.iterator]() {
    return this.values();
  }
  get contents() {
    return [...this.values()];
  }
  find(fn) {
    return this.contents.find(fn);
  }
  filter(fn) {
    return this.contents.filter(fn);
  }
  map(fn) {
    return this.contents.map(fn);
  }
  some(fn) {
    return this.contents.some(fn);
  }
}

/** Foundry's Hooks (foundry-vtt-types v12.331.5 client/core/hooks.d.mts):
 * `call` stops at the first handler returning false (and returns false),
 * `callAll` runs them all; a handler's error is logged, not thrown, so
 * the stand-in keeps it for the tests. */
export class HooksImpl {
  constructor() {
    this.handlers = new Map();
    this.errors = [];
  }
  on(name, fn) {
    if (!this.handlers.has(name)) this.handlers.set(name, []);
    this.handlers.get(name).push(fn);
    return fn;
  }
  once(name, fn) {
    const wrapped = (...args) => {
      this.off(name, wrapped);
      return fn(...args);
    };
    return this.on(name, wrapped);
  }
  off(name, fn) {
    const list = this.handlers.get(name) || [];
    const i = list.indexOf(fn);
    if (i >= 0) list.splice(i, 1);
  }
  call(name, ...args) {
    for (const fn of [...(this.handlers.get(name) || [])]) {
      try {
        if (fn(...args) === false) return false;
      } catch (err) {
        this.errors.push(err);
      }
    }
    return true;
  }
  callAll(name, ...args) {
    for (const fn of [...(this.handlers.get(name) || [])]) {
      try {
        const r = fn(...args);
        if (r && typeof r.catch === "function") r.catch((err) => this.errors.push(err));
      } catch (err) {
        this.errors.push(err);
      }
    }
    return true;
  }
}

/** What a notification shows: v12 renders the message as HTML (innerHTML);
 * v13 cleans it, then renders it (foundry-vtt-types v13.345.1 client/
 * applications/ui/notifications.d.mts). The text a user reads, from that HTML. */
export function renderedText(html) {
  return String(html)
    .replace(/<[^>]*>/g, "")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");
}
