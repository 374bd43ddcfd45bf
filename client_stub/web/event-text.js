// Events as sentences, from the table in events.json (shared with the Python
// client: client_stub/events.py interprets the same rules the same way).
//
//   const texts = await loadTexts();            // fetches events.json next to this module
//   const names = new Names(); names.update(state);
//   const t = new EventText(texts, names, (v) => eventsOfVersion(v));
//   t.sentence(event)  ->  "Bastien rolls Medicine for Chloe: d20 13 +1 = 14 vs DC 15 — failure"
//   t.segments(event)  ->  [[text, field|null], ...]  (to style the numbers)

const PLACEHOLDER = /\{([A-Za-z_][\w.]*)(?:\|([a-z]+)(?::(\w+))?)?\}/g;
const MISSING = "?";

export async function loadTexts(url = new URL("events.json", import.meta.url)) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`events.json: HTTP ${res.status}`);
  return res.json();
}

const pad = (n) => String(n).padStart(2, "0");

export function formatClock(seconds) {
  const s = Math.max(0, Math.floor(seconds || 0));
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = s % 60;
  return d ? `${d}d ${pad(h)}h ${pad(m)}m ${pad(sec)}s` : `${h}h ${pad(m)}m ${pad(sec)}s`;
}

export function formatDuration(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${s % 60 ? ` ${pad(s % 60)}s` : ""}`;
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return `${h}h${m ? ` ${pad(m)}m` : ""}`;
}

export function signed(n) {
  const v = Math.trunc(Number(n) || 0);
  return v >= 0 ? `+${v}` : `${v}`;
}

// A field's value as a `case` key, as JSON writes it (true, null, 3).
const key = (v) => (typeof v === "string" ? v : JSON.stringify(v ?? null));
const isSet = (v) => v !== undefined && v !== null;
const truthy = (v) => isSet(v) && v !== false && v !== 0 && v !== "" && !(Array.isArray(v) && !v.length);
const words = (v) => String(v).replaceAll("_", " ");

/** Character and user names by id, kept after they leave the room. */
export class Names {
  constructor() {
    this.chars = new Map();
    this.users = new Map();
  }

  update(state) {
    if (!state) return;
    for (const [id, c] of Object.entries(state.characters || {})) if (c.name) this.chars.set(id, String(c.name));
    for (const [id, u] of Object.entries(state.users || {})) if (u.name) this.users.set(id, String(u.name));
  }

  /** A name an event says (a character's arrival or departure): kept
   * unless a state named it already. */
  learn(id, name) {
    if (!this.chars.has(id)) this.chars.set(id, String(name));
  }

  char(id) {
    return typeof id === "string" ? (this.chars.get(id) ?? id) : MISSING;
  }

  user(id) {
    return typeof id === "string" ? (this.users.get(id) ?? id) : MISSING;
  }
}

export class EventText {
  constructor(texts, names = new Names(), history = null) {
    this.texts = texts;
    this.names = names;
    this.history = history; // (v) => events of version v, or null
  }

  /** An event as complete as the patch's ops allow: a `character` event
   * stripped to kind and char (a character seen at the status level, as a
   * server before issue 33 sent it; views) gets the `change` its ops show
   * (the character set whole: added, with its name; deleted: removed), so a
   * status NPC "joins the table" for players. A `character` event's name is
   * remembered (`Names`), so the log of someone removed before the page
   * loaded reads with their name, not their id. */
  complete(ev, ops) {
    if (ev.kind === "character" && typeof ev.char === "string" && typeof ev.name === "string")
      this.names.learn(ev.char, ev.name);
    if (ev.kind !== "character" || ev.change !== undefined || typeof ev.char !== "string") return ev;
    for (const op of ops || []) {
      const [kind, path] = op;
      if (!Array.isArray(path) || path.length !== 2 || path[0] !== "characters" || path[1] !== ev.char) continue;
      if (kind === "set" && op[2] && typeof op[2] === "object")
        return { ...ev, change: "added", name: op[2].name ?? this.names.char(ev.char) };
      if (kind === "del") return { ...ev, change: "removed", name: this.names.char(ev.char) };
    }
    return ev;
  }

  sentence(ev) {
    return this.segments(ev)
      .map(([text]) => text)
      .join("");
  }

  segments(ev) {
    const rule = this.texts.events[ev.kind] ?? this.texts.unknown;
    const out = [];
    this.#rule(rule, ev, (f) => ev[f], out);
    return out;
  }

  /** Why an action cannot be done now (an affordance's `why`), in words. */
  reason(why) {
    const rule = this.texts.reasons?.[why?.key];
    if (rule === undefined) return String(why?.key ?? "not possible now").replaceAll("_", " ");
    const out = [];
    this.#rule(rule, why, (f) => why[f], out);
    return out.map(([text]) => text).join("");
  }

  /** A character's note (rest, dying, tending...) in words, from the
   * table's `notes`: the Python client renders the same ones from the same table. */
  note(key, values) {
    const out = [];
    this.#rule(this.texts.notes[key], values, (f) => values[f], out);
    return out.map(([text]) => text).join("");
  }

  /** An action's label (the `actions` table). */
  action(op) {
    return this.texts.actions?.[op] ?? String(op).replaceAll("_", " ");
  }

  /** What a command did, from its op and events; null when they do not say enough. */
  command(op, events) {
    const template = this.texts.commands[op];
    if (template === undefined || !events) return null;
    const lookup = (path) => {
      const [kind, field] = path.split(".");
      const ev = events.find((e) => e.kind === kind && isSet(e[field]));
      return ev ? ev[field] : undefined;
    };
    const out = [];
    if (!this.#template(template, lookup, out, {}, true)) return null;
    return out.map(([text]) => text).join("");
  }

  #rule(rule, ev, get, out) {
    if (typeof rule === "string") this.#template(rule, get, out, ev);
    else if (Array.isArray(rule)) for (const part of rule) this.#rule(part, ev, get, out);
    else if (rule && typeof rule === "object" && "join" in rule) this.#join(rule, ev, get, out);
    else if (rule && typeof rule === "object" && "each" in rule) {
      this.#each(rule, ev, get).forEach((item, n) => {
        if (n) out.push([rule.sep ?? ", ", null]);
        out.push(...item);
      });
    } else if (rule && typeof rule === "object") {
      let branch;
      if ("if" in rule) branch = truthy(get(rule.if)) ? rule.then : rule.else;
      else if ("has" in rule) branch = isSet(get(rule.has)) ? rule.then : rule.else;
      else if ("case" in rule) branch = rule.of[key(get(rule.case))] ?? rule.else;
      else throw new Error(`unknown rule ${JSON.stringify(rule)}`);
      if (branch !== undefined && branch !== null) this.#rule(branch, ev, get, out);
    } else throw new Error(`unknown rule ${JSON.stringify(rule)}`);
  }

  /** `then` once per entry of the field `each` names (an object's keys in
   * order, or a list's items), with `key` and `value` read as fields. */
  #each(rule, ev, get) {
    const value = get(rule.each);
    let entries = [];
    if (Array.isArray(value)) entries = value.map((v, i) => [i, v]);
    else if (value && typeof value === "object") entries = Object.entries(value);
    return entries.map(([k, v]) => {
      const part = [];
      this.#rule(rule.then, ev, (f) => (f === "key" ? k : f === "value" ? v : get(f)), part);
      return part;
    });
  }

  /** The non-empty parts (an `each` counts as one part per entry), joined
   * with `sep` (", ") and the last with `last` (" and "); `none` when every
   * part is empty. */
  #join(rule, ev, get, out) {
    const parts = [];
    for (const part of rule.join) {
      if (part && typeof part === "object" && !Array.isArray(part) && "each" in part) parts.push(...this.#each(part, ev, get));
      else {
        const piece = [];
        this.#rule(part, ev, get, piece);
        parts.push(piece);
      }
    }
    const kept = parts.filter((p) => p.map(([text]) => text).join(""));
    if (!kept.length) {
      if (rule.none !== undefined && rule.none !== null) this.#rule(rule.none, ev, get, out);
      return;
    }
    kept.forEach((part, i) => {
      if (i) out.push([i === kept.length - 1 ? (rule.last ?? " and ") : (rule.sep ?? ", "), null]);
      out.push(...part);
    });
  }

  #template(template, get, out, ev, strict = false) {
    const pieces = [];
    let pos = 0;
    for (const m of template.matchAll(PLACEHOLDER)) {
      if (m.index > pos) pieces.push([template.slice(pos, m.index), null]);
      const [, field, fmt, arg] = m;
      const value = get(field);
      if (!isSet(value) && strict) return false;
      pieces.push([this.#format(value, fmt, arg, ev), field.split(".").pop()]);
      pos = m.index + m[0].length;
    }
    if (pos < template.length) pieces.push([template.slice(pos), null]);
    out.push(...pieces);
    return true;
  }

  #format(value, fmt, arg, ev) {
    if (fmt === "command") return this.#undone(ev);
    if (!isSet(value)) return MISSING;
    switch (fmt) {
      case "char":
        return this.names.char(value);
      case "chars":
        return (value || []).map((v) => this.names.char(v)).join(", ");
      case "user":
        return this.names.user(value);
      case "signed":
        return signed(value);
      case "abs":
        return String(Math.abs(Math.trunc(Number(value))));
      case "clock":
        return formatClock(value);
      case "duration":
        return formatDuration(value);
      case "words":
        return words(value);
      case "label":
        return this.#label(value, arg);
      case "labels":
        return (value || []).map((v) => this.#label(v, arg)).join(", ");
      case undefined:
      case "list":
        if (Array.isArray(value)) return value.map(String).join(", ");
        if (typeof value === "boolean") return value ? "yes" : "no";
        return String(value);
      default:
        throw new Error(`unknown format ${fmt}`);
    }
  }

  #label(value, table) {
    const labels = this.texts.labels[table ?? ""] ?? {};
    return String(labels[key(value)] ?? words(value));
  }

  #undone(ev) {
    const v = ev.undone;
    const events = this.history && Number.isInteger(v) ? this.history(v) : null;
    const phrase = this.command(String(ev.op), events);
    if (phrase !== null) return phrase;
    const out = [];
    this.#template(this.texts.commands.fallback, (f) => ev[f], out, ev);
    return out.map(([text]) => text).join("");
  }
}
