// A small stand-in of Foundry VTT for the module's tests: a "world" (what
// Foundry's server holds and broadcasts) and "clients" (browser tabs), each
// with its own Hooks, game, ui and CONFIG, as the module sees them.
//
// It copies the behaviour the module relies on, as documented in Foundry's
// API (foundry/README.md says which facts were checked and where), and no
// more: pre-update hooks on the initiating client only (they may cancel or
// edit the change), update hooks on every client after the change, update
// options travelling with the change, combatTurn/combatRound/combatStart on
// the initiating client with editable data and options, combatTurnChange on
// every client, the tracker keeping the current combatant on edits (the
// next survivor, else the previous one, when it is deleted), world time as a
// world setting. Real Foundry's timing, its sheets and its system code are
// what it cannot show (foundry/README.md, "What the tests cannot prove").

import { readFileSync } from "node:fs";

const LANG = JSON.parse(readFileSync(new URL("../lang/en.json", import.meta.url), "utf8"));

const clone = (v) => (v === undefined ? undefined : structuredClone(v));
const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);

/** {"a.b": 1} -> {a: {b: 1}} (Foundry's update data accepts both), as
 * Foundry's `foundry.utils.expandObject` does it: each key in order is set
 * with setProperty, so a later key naming a whole object (`flags`) replaces
 * what earlier dotted keys (`flags.sfrpg.phase`) put there. */
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

/** Merge `changes` into `target` recursively (objects merge, the rest replaces). */
export function merge(target, changes) {
  for (const [k, v] of Object.entries(changes)) {
    if (isObject(v) && isObject(target[k])) merge(target[k], v);
    else target[k] = clone(v);
  }
  return target;
}

/** The part of `changes` that differs from `source` (Foundry diffs updates). */
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

function getPath(obj, path) {
  return path.split(".").reduce((v, k) => (v == null ? undefined : v[k]), obj);
}

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

class HooksImpl {
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
  /** Foundry's Hooks.call: stops (and returns false) when a handler returns false. */
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

// ---------------------------------------------------------------- the world

export class World {
  /**
   * @param {object} opts
   * @param {string} opts.system  game.system.id: "sfrpg", "pf1" or any other (generic)
   * @param {number} opts.generation  Foundry's major version (12 or 13)
   */
  constructor({ system = "sfrpg", generation = 12, combatClass = "core", protocol = "http:" } = {}) {
    this.system = system;
    this.generation = generation;
    this.combatClass = combatClass; // "core", or "sfrpg" (CombatSFRPG's own turn methods)
    this.protocol = protocol; // the page's location.protocol
    this.users = new Map();
    this.actors = new Map();
    this.combats = new Map();
    this.settings = new Map(); // world settings, "ns.key" -> value
    this.userSettings = new Map(); // v13 user settings, "user:ns.key" -> value
    this.settings.set("core.time", 0);
    this.clients = [];
    this.log = []; // document operations as committed, for the tests
    this.pending = 0;
    this.counter = 0;
  }

  id(prefix) {
    this.counter += 1;
    return `${prefix}${String(this.counter).padStart(15 - prefix.length, "0")}`;
  }

  get time() {
    return this.settings.get("core.time");
  }

  addUser(name, role) {
    const id = this.id("U");
    this.users.set(id, { _id: id, name, role, active: false, flags: {} });
    return id;
  }

  addActor(data) {
    const id = this.id("A");
    this.actors.set(id, {
      _id: id,
      type: "character",
      flags: {},
      ownership: { default: 0 },
      items: [], // embedded Items (sfrpg's conditions are condition items)
      effects: [], // embedded ActiveEffects (pf1's conditions; core status effects)
      ...clone(data),
    });
    return id;
  }

  addCombat(data = {}) {
    const id = this.id("C");
    this.combats.set(id, {
      _id: id,
      name: "Encounter",
      round: 0,
      turn: null,
      flags: {},
      combatants: [],
      ...clone(data),
    });
    for (const c of this.clients) c.receiveCombat(id, { created: true });
    return id;
  }

  /** A browser tab of `userId` joining the world; tabs given the same
   * `storage` share a browser's localStorage (client settings live there). */
  connect(userId, { storage = new Storage() } = {}) {
    const client = new FoundryClient(this, userId, storage);
    this.clients.push(client);
    const user = this.users.get(userId);
    const wasActive = user.active;
    user.active = true;
    if (!wasActive) this.deliver((c) => c.receiveUser(userId, true), client);
    return client;
  }

  disconnect(client) {
    this.clients = this.clients.filter((c) => c !== client);
    client.gone = true;
    const userId = client.userId;
    if (!this.clients.some((c) => c.userId === userId)) {
      this.users.get(userId).active = false;
      this.deliver((c) => c.receiveUser(userId, false));
    }
  }

  /** Send something to every client (but `except`), each on its own turn of
   * the event loop, as Foundry's socket does. Resolves when all have it. */
  deliver(fn, except = null) {
    const targets = this.clients.filter((c) => c !== except);
    return Promise.all(
      targets.map(
        (client) =>
          new Promise((resolve) => {
            this.pending += 1;
            setImmediate(() => {
              try {
                if (!client.gone) fn(client);
              } finally {
                this.pending -= 1;
                resolve();
              }
            });
          }),
      ),
    );
  }

  /** Wait until nothing is being delivered. */
  async flush() {
    while (this.pending) await new Promise((r) => setImmediate(r));
  }

  // -- documents

  commitActor(updates, options, userId) {
    const ids = [];
    for (const { _id, changed } of updates) {
      merge(this.actors.get(_id), changed);
      ids.push(_id);
    }
    this.log.push({ op: "update", type: "Actor", ids, options: clone(options), userId });
    return this.deliver((c) => {
      for (const { _id, changed } of updates) c.receiveActor(_id, changed, options, userId);
    });
  }

  async commitCombat(id, changed, options, userId) {
    const data = this.combats.get(id);
    const before = { round: data.round, turn: data.turn };
    merge(data, changed);
    this.log.push({
      op: "update",
      type: "Combat",
      ids: [id],
      changed: clone(changed),
      options: clone(options),
      userId,
    });
    await this.deliver((c) => c.receiveCombat(id, { changed, options, userId, before }));
    // Foundry's own combat time: `worldTime.delta` (Combat#_preUpdate made it
    // from `advanceTime` when only that was given).
    const delta = options?.worldTime?.delta ?? 0;
    if (delta) await this.setTime(this.time + delta, {}, userId);
  }

  deleteCombat(id, userId) {
    const data = this.combats.get(id);
    this.combats.delete(id);
    this.log.push({ op: "delete", type: "Combat", ids: [id], userId });
    return this.deliver((c) => c.receiveCombatDeleted(id, data, userId));
  }

  /** Combatants added, deleted or re-sorted: the tracker keeps the current
   * combatant; a deleted current one passes the turn to the next survivor,
   * else to the previous one (Foundry's rule). */
  async editCombatants(id, edit, userId) {
    const data = this.combats.get(id);
    const sortedBefore = sortTurns(data.combatants);
    const current = data.turn === null ? null : sortedBefore[data.turn];
    const before = { round: data.round, turn: data.turn, combatantId: current?._id ?? null };
    const { created = [], deleted = [], updated = [] } = edit(data);
    const after = sortTurns(data.combatants);
    let turn = data.turn;
    if (current && data.round > 0) {
      const idx = after.findIndex((c) => c._id === current._id);
      if (idx >= 0) turn = idx;
      else {
        const was = sortedBefore.indexOf(current);
        const next = sortedBefore.slice(was + 1).find((c) => after.includes(c));
        const prev = sortedBefore
          .slice(0, was)
          .reverse()
          .find((c) => after.includes(c));
        const survivor = next ?? prev;
        turn = survivor ? after.indexOf(survivor) : 0;
      }
    }
    const turnChanged = turn !== data.turn || (after[turn]?._id ?? null) !== before.combatantId;
    data.turn = turn;
    this.log.push({ op: "combatants", type: "Combat", ids: [id], created, deleted, updated, userId });
    await this.deliver((c) =>
      c.receiveCombatants(id, { created, deleted, updated, userId, before, turnChanged }),
    );
  }

  /** A User document's update: only a GM, or the user itself, may make it
   * (BaseUser's update permission); the others see `updateUser`. */
  commitUser(id, changed, userId) {
    const actor = this.users.get(userId);
    if (!(actor.role >= 3 || userId === id)) {
      return Promise.reject(new Error(`User ${userId} lacks permission to update User ${id}`));
    }
    merge(this.users.get(id), changed);
    this.log.push({ op: "update", type: "User", ids: [id], changed: clone(changed), userId });
    return this.deliver((c) => c.receiveUserUpdate(id, changed, userId));
  }

  /** Embedded documents of an actor created or deleted (an Item, an
   * ActiveEffect): `create<Type>`/`delete<Type>` on every client, no
   * `updateActor` (Foundry's embedded-document operations). */
  commitEmbedded(actorId, type, { created = [], deleted = [] }, options, userId) {
    const actor = this.actors.get(actorId);
    const key = type === "Item" ? "items" : "effects";
    const gone = actor[key].filter((d) => deleted.includes(d._id));
    actor[key] = actor[key].filter((d) => !deleted.includes(d._id)).concat(clone(created));
    this.log.push({ op: "embedded", type, ids: [actorId], created: clone(created), deleted: [...deleted], options: clone(options), userId });
    return this.deliver((c) => c.receiveEmbedded(actorId, type, key, created, gone, options, userId));
  }

  setTime(value, options, userId) {
    const before = this.time;
    this.settings.set("core.time", value);
    return this.deliver((c) => c.receiveTime(value, value - before, options, userId));
  }

  setWorldSetting(key, value, options, userId) {
    this.settings.set(key, clone(value));
    return this.deliver((c) => c.receiveSetting(key, value, options, userId));
  }

  emitSocket(event, data, from) {
    return this.deliver((c) => c.receiveSocket(event, data), from);
  }
}

function sortTurns(combatants) {
  return [...combatants].sort((a, b) => {
    const ia = a.initiative ?? -Infinity;
    const ib = b.initiative ?? -Infinity;
    if (ia !== ib) return ib - ia;
    return a._id < b._id ? -1 : 1;
  });
}

// ---------------------------------------------------------------- a client (browser tab)

/** A browser's localStorage (client-scope settings are kept there as JSON,
 * under "<namespace>.<key>", on v12 and v13). */
export class Storage {
  constructor() {
    this.map = new Map();
  }
  getItem(key) {
    return this.map.has(key) ? this.map.get(key) : null;
  }
  setItem(key, value) {
    this.map.set(key, String(value));
  }
  removeItem(key) {
    this.map.delete(key);
  }
}

/** What a notification shows: v12 renders the message as HTML (innerHTML);
 * v13 cleans it, then renders it. The text a user reads, from that HTML. */
export function renderedText(html) {
  return String(html)
    .replace(/<[^>]*>/g, "")
    .replace(/&lt;/g, "<")
    .replace(/&gt;/g, ">")
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, "&");
}

export class FoundryClient {
  constructor(world, userId, storage = new Storage()) {
    this.world = world;
    this.userId = userId;
    this.gone = false;
    this.notifications = [];
    this.chat = []; // ChatMessage.create data, as the world would get it
    this.storage = storage;
    this.registered = new Map();
    this.menus = new Map();
    this.socketHandlers = new Map();
    this.Hooks = new HooksImpl();
    this.actorDocs = new Map();
    this.combatDocs = new Map();
    this.time = world.time;
    this.history = new Map(); // combat id -> the HistoryData of its current turn
    for (const id of world.actors.keys()) this.actorDocs.set(id, this.makeActor(id));
    for (const id of world.combats.keys()) this.receiveCombat(id, { created: true, silent: true });
    this.env = this.makeEnv();
  }

  makeEnv() {
    const client = this;
    const ActorClass = makeActorClass(client);
    const game = {
      release: { generation: this.world.generation },
      system: { id: this.world.system },
      get user() {
        return client.userDoc(client.userId);
      },
      get users() {
        const users = new Collection();
        for (const id of client.world.users.keys()) users.set(id, client.userDoc(id));
        users.activeGM = (() => {
          const gms = users
            .filter((u) => u.active && u.isGM)
            .sort((a, b) => b.role - a.role || (a.id < b.id ? -1 : 1));
          return gms[0] ?? null;
        })();
        return users;
      },
      get actors() {
        return new Collection([...client.actorDocs].filter(([id]) => client.world.actors.has(id)));
      },
      get combats() {
        return new Collection(client.combatDocs);
      },
      get combat() {
        return [...client.combatDocs.values()].find((c) => c.started) ?? null;
      },
      time: {
        get worldTime() {
          return client.time;
        },
        advance: (dt, options = {}) => client.world.setTime(client.time + dt, options, client.userId),
        ...(this.world.generation >= 13
          ? { set: (value, options = {}) => client.world.setTime(value, options, client.userId) }
          : {}),
      },
      settings: {
        register: (ns, key, data) => client.registered.set(`${ns}.${key}`, data),
        registerMenu: (ns, key, data) => client.menus.set(`${ns}.${key}`, data),
        get: (ns, key) => client.getSetting(ns, key),
        set: (ns, key, value, options = {}) => client.setSetting(ns, key, value, options),
        // v13's WorldSettings: the world's Setting documents (a `user`
        // setting is one with a `user` field, its value a JSON string).
        storage: new Map([
          [
            "world",
            {
              find: (fn) => {
                const docs = [...client.world.userSettings].map(([k, value]) => {
                  const [user, key] = [k.slice(0, k.indexOf(":")), k.slice(k.indexOf(":") + 1)];
                  return { key, user, value: JSON.stringify(value), delete: async () => client.world.userSettings.delete(k) };
                });
                return docs.find(fn);
              },
            },
          ],
        ]),
      },
      i18n: {
        localize: (key) => {
          const v = getPath(LANG, key);
          return typeof v === "string" ? v : key;
        },
        format: (key, data = {}) => {
          const v = getPath(LANG, key);
          if (typeof v !== "string") return key;
          return v.replace(/\{(\w+)\}/g, (m, k) => (k in data ? String(data[k]) : m));
        },
      },
      socket: {
        on: (event, fn) => {
          if (!client.socketHandlers.has(event)) client.socketHandlers.set(event, []);
          client.socketHandlers.get(event).push(fn);
        },
        emit: (event, data) => client.world.emitSocket(event, clone(data), client),
      },
    };
    const notify = (level) => (html, options) =>
      client.notifications.push({ level, html: String(html), text: renderedText(html), options });
    return {
      Hooks: this.Hooks,
      game,
      ui: { notifications: { info: notify("info"), warn: notify("warn"), error: notify("error") } },
      CONFIG: { time: { roundTime: 6, turnTime: 0 }, Actor: { documentClass: ActorClass } },
      Actor: ActorClass,
      ChatMessage: {
        create: async (data) => {
          client.chat.push(clone(data));
          return data;
        },
      },
      location: { protocol: this.world.protocol },
      localStorage: this.storage,
    };
  }

  /** Foundry's start-up: init (settings are registered), setup, ready. */
  boot() {
    this.Hooks.callAll("init");
    this.Hooks.callAll("setup");
    this.Hooks.callAll("ready");
    return this;
  }

  userDoc(id) {
    const u = this.world.users.get(id);
    const client = this;
    return {
      id,
      name: u.name,
      role: u.role,
      active: u.active,
      isGM: u.role >= 3,
      flags: clone(u.flags),
      get isSelf() {
        return id === client.userId;
      },
      getFlag(ns, key) {
        return clone(u.flags?.[ns]?.[key]);
      },
      setFlag(ns, key, value) {
        return client.world.commitUser(id, expand({ [`flags.${ns}.${key}`]: value }), client.userId);
      },
    };
  }

  receiveUserUpdate(id, changed, userId) {
    this.Hooks.callAll("updateUser", this.userDoc(id), clone(changed), {}, userId);
  }

  // -- settings

  getSetting(ns, key) {
    const full = `${ns}.${key}`;
    if (full === "core.time") return this.time;
    const reg = this.registered.get(full);
    if (!reg) throw new Error(`setting ${full} is not registered`);
    let value;
    if (reg.scope === "world") value = this.world.settings.get(full);
    else if (reg.scope === "user") value = this.world.userSettings.get(`${this.userId}:${full}`);
    else {
      const raw = this.storage.getItem(full);
      value = raw === null ? undefined : JSON.parse(raw);
    }
    return clone(value === undefined ? reg.default : value);
  }

  async setSetting(ns, key, value, options) {
    const full = `${ns}.${key}`;
    if (full === "core.time") return this.world.setTime(value, options, this.userId);
    const reg = this.registered.get(full);
    if (!reg) throw new Error(`setting ${full} is not registered`);
    if (reg.scope === "world") return this.world.setWorldSetting(full, value, options, this.userId);
    if (reg.scope === "user") this.world.userSettings.set(`${this.userId}:${full}`, clone(value));
    else this.storage.setItem(full, JSON.stringify(value));
    reg.onChange?.(value);
    return value;
  }

  /** Set a setting before boot (what the GM typed in an earlier session). */
  preset(key, value, scope) {
    const full = `vtt-sync.${key}`;
    if (scope === "world") this.world.settings.set(full, value);
    else if (scope === "user") this.world.userSettings.set(`${this.userId}:${full}`, value);
    else this.storage.setItem(full, JSON.stringify(value));
  }

  receiveSetting(key, value) {
    this.registered.get(key)?.onChange?.(clone(value));
  }

  receiveTime(value, dt, options, userId) {
    this.time = value;
    this.Hooks.callAll("updateWorldTime", value, dt, clone(options), userId);
  }

  receiveUser(userId, connected) {
    this.Hooks.callAll("userConnected", this.userDoc(userId), connected);
  }

  receiveSocket(event, data) {
    for (const fn of this.socketHandlers.get(event) || []) fn(clone(data));
  }

  // -- actors

  makeActor(id) {
    const Cls = makeActorClass(this);
    return new Cls(id);
  }

  actor(id) {
    return this.actorDocs.get(id);
  }

  receiveEmbedded(actorId, type, key, created, gone, options, userId) {
    const actor = this.actorDocs.get(actorId);
    if (!actor) return;
    actor._source[key] = clone(this.world.actors.get(actorId)[key]);
    actor.prepare();
    for (const d of created) this.Hooks.callAll(`create${type}`, { ...clone(d), parent: actor }, clone(options), userId);
    for (const d of gone) this.Hooks.callAll(`delete${type}`, { ...clone(d), parent: actor }, clone(options), userId);
  }

  receiveActor(id, changed, options, userId) {
    if (!this.actorDocs.has(id)) this.actorDocs.set(id, this.makeActor(id));
    const actor = this.actorDocs.get(id);
    merge(actor._source, changed);
    actor.prepare();
    this.Hooks.callAll("updateActor", actor, clone(changed), clone(options), userId);
  }

  /** Foundry's update path on the initiating client: diff, the system's
   * _preUpdate, the preUpdate hook (may cancel or edit), then the commit. */
  async updateActors(updates, options = {}) {
    const accepted = [];
    for (const update of updates) {
      const { _id, ...data } = update;
      const actor = this.actorDocs.get(_id);
      const changed = diff(actor._source, expand(data));
      if (!Object.keys(changed).length) continue;
      actor._preUpdate?.(changed, options);
      if (this.Hooks.call("preUpdateActor", actor, changed, options, this.userId) === false) continue;
      const real = diff(actor._source, changed);
      if (Object.keys(real).length) accepted.push({ _id, changed: real });
    }
    if (accepted.length) await this.world.commitActor(accepted, options, this.userId);
    return accepted.map((u) => this.actorDocs.get(u._id));
  }

  // -- combats

  combat(id) {
    return this.combatDocs.get(id);
  }

  receiveCombat(id, { created = false, silent = false, changed = null, options = {}, userId = null } = {}) {
    const data = clone(this.world.combats.get(id));
    if (!this.combatDocs.has(id)) {
      const Cls = this.world.combatClass === "sfrpg" ? SfrpgCombat : ClientCombat;
      this.combatDocs.set(id, new Cls(this, id));
    }
    const combat = this.combatDocs.get(id);
    const prior = this.history.get(id) ?? combat.state();
    combat._source = data;
    const current = combat.state();
    this.history.set(id, current);
    if (created) {
      if (!silent) this.Hooks.callAll("createCombat", combat, {}, userId);
      return;
    }
    if (changed && ("round" in changed || "turn" in changed)) {
      if (prior.round !== current.round || prior.turn !== current.turn) {
        this.Hooks.callAll("combatTurnChange", combat, prior, current);
      }
    }
    this.Hooks.callAll("updateCombat", combat, clone(changed), clone(options), userId);
  }

  receiveCombatDeleted(id, data, userId) {
    const combat = this.combatDocs.get(id);
    this.combatDocs.delete(id);
    this.history.delete(id);
    if (combat) this.Hooks.callAll("deleteCombat", combat, {}, userId);
  }

  receiveCombatants(id, { created, deleted, updated, userId, turnChanged }) {
    const combat = this.combatDocs.get(id);
    const before = this.history.get(id) ?? combat.state();
    const old = new Map(combat.combatants.map((c) => [c.id, c]));
    combat._source = clone(this.world.combats.get(id));
    for (const cid of created) this.Hooks.callAll("createCombatant", combat.combatants.get(cid), {}, userId);
    for (const cid of deleted) this.Hooks.callAll("deleteCombatant", old.get(cid), {}, userId);
    for (const cid of updated)
      this.Hooks.callAll("updateCombatant", combat.combatants.get(cid), {}, {}, userId);
    const current = combat.state();
    this.history.set(id, current);
    if (turnChanged) {
      this.Hooks.callAll("combatTurnChange", combat, before, current);
      this.Hooks.callAll("updateCombat", combat, { turn: current.turn }, {}, userId);
    }
  }

  async updateCombat(id, data, options = {}) {
    const combat = this.combatDocs.get(id);
    const changed = diff(combat._source, expand(data));
    if (!Object.keys(changed).length) return combat;
    // Combat#_preUpdate (before the hook): a system's `advanceTime` becomes
    // the operation's `worldTime` when none is given.
    if ("advanceTime" in options && !options.worldTime) options.worldTime = { delta: options.advanceTime };
    if (this.Hooks.call("preUpdateCombat", combat, changed, options, this.userId) === false) return null;
    await this.world.commitCombat(id, changed, options, this.userId);
    return combat;
  }
}

function makeActorClass(client) {
  return class StandInActor {
    static documentName = "Actor";
    get documentName() {
      return "Actor";
    }
    constructor(id) {
      this._id = id;
      this._source = clone(client.world.actors.get(id));
      this.prepare();
    }
    static updateDocuments(updates, options = {}) {
      return client.updateActors(updates, options);
    }
    get id() {
      return this._id;
    }
    get uuid() {
      return `Actor.${this._id}`;
    }
    get name() {
      return this._source.name;
    }
    get type() {
      return this._source.type;
    }
    get flags() {
      return this._source.flags;
    }
    get isToken() {
      return false;
    }
    /** Foundry's Actor#statuses: the status ids of its active effects. */
    get statuses() {
      return new Set((this._source.effects ?? []).flatMap((e) => e.statuses ?? []));
    }
    /** The conditions the actor shows, whatever holds them (for the tests). */
    conditionNames() {
      const items = (this._source.items ?? []).filter((i) => i.type === "condition").map((i) => i.name);
      return [...new Set([...items, ...this.statuses])].sort();
    }
    /** Derived data, as the systems prepare it: pf1's value = max + offset. */
    prepare() {
      this.system = clone(this._source.system);
      if (client.world.system === "pf1") {
        for (const k of ["hp", "wounds", "vigor"]) {
          const a = this.system?.attributes?.[k];
          if (a && Number.isFinite(a.offset)) a.value = a.max + a.offset;
        }
      }
    }
    /** pf1's _preUpdate: a value written becomes an offset from the maximum. */
    _preUpdate(changed) {
      if (client.world.system !== "pf1") return;
      const attrs = changed.system?.attributes;
      if (!attrs) return;
      for (const k of ["hp", "wounds", "vigor"]) {
        const a = attrs[k];
        if (!a) continue;
        if (a.value !== undefined && a.offset === undefined)
          a.offset = a.value - (a.max ?? this.system.attributes[k].max);
        delete a.value;
      }
    }
    getFlag(ns, key) {
      return this._source.flags?.[ns]?.[key];
    }
    setFlag(ns, key, value) {
      return this.update({ [`flags.${ns}.${key}`]: value });
    }
    testUserPermission(user, level) {
      if (user.isGM) return true;
      const need = { NONE: 0, LIMITED: 1, OBSERVER: 2, OWNER: 3 }[level] ?? level;
      const own = this._source.ownership?.[user.id] ?? this._source.ownership?.default ?? 0;
      return own >= need;
    }
    update(data, options = {}) {
      return client.updateActors([{ _id: this._id, ...data }], options);
    }
    // The systems' condition APIs, holding conditions where each system does:
    // sfrpg's ActorConditionsMixin#setCondition adds or deletes a condition
    // Item (from its compendium; here made in place), hasCondition looks at
    // the items (foundryvtt-starfinder src/module/actor/mixins/actor-conditions.js);
    // pf1's ActorPF#setConditions creates or deletes ActiveEffects carrying
    // the condition as a status (pf1 10.8), as core's toggleStatusEffect does
    // for any system (foundry-vtt-types client/documents/actor.d.mts). No
    // `updateActor` follows: embedded documents change.
    hasCondition(name) {
      if (client.world.system === "sfrpg") {
        return (this._source.items ?? []).some((i) => i.type === "condition" && i.name === name);
      }
      return this.statuses.has(name);
    }
    setCondition(name, enabled) {
      if (client.world.system !== "sfrpg") throw new Error("setCondition is sfrpg's");
      const have = (this._source.items ?? []).filter((i) => i.type === "condition" && i.name === name);
      client.world.conditionCalls = (client.world.conditionCalls ?? 0) + 1;
      if (enabled && !have.length) {
        const item = { _id: client.world.id("I"), type: "condition", name };
        return client.world.commitEmbedded(this._id, "Item", { created: [item] }, {}, client.userId);
      }
      if (!enabled && have.length) {
        return client.world.commitEmbedded(this._id, "Item", { deleted: have.map((i) => i._id) }, {}, client.userId);
      }
      return Promise.resolve();
    }
    setConditions(conditions, context = {}) {
      if (client.world.system !== "pf1") throw new Error("setConditions is pf1's");
      return this._effects(conditions, context);
    }
    toggleStatusEffect(id, { active } = {}) {
      return this._effects({ [id]: active ?? !this.statuses.has(id) }, {});
    }
    _effects(map, options) {
      const effects = this._source.effects ?? [];
      const created = [];
      const deleted = [];
      for (const [name, on] of Object.entries(map)) {
        const have = effects.filter((e) => (e.statuses ?? []).includes(name));
        if (on && !have.length) created.push({ _id: client.world.id("E"), name, statuses: [name] });
        if (!on) deleted.push(...have.map((e) => e._id));
      }
      client.world.conditionCalls = (client.world.conditionCalls ?? 0) + 1;
      if (!created.length && !deleted.length) return Promise.resolve();
      return client.world.commitEmbedded(this._id, "ActiveEffect", { created, deleted }, options, client.userId);
    }
  };
}

class ClientCombatant {
  get documentName() {
    return "Combatant";
  }
  constructor(combat, data) {
    this.combat = combat;
    this.parent = combat;
    this._source = data;
  }
  get id() {
    return this._source._id;
  }
  get actorId() {
    return this._source.actorId;
  }
  get actor() {
    return this.combat.client.actor(this._source.actorId);
  }
  get initiative() {
    return this._source.initiative;
  }
  get name() {
    return this._source.name ?? this.actor?.name;
  }
  update(data) {
    const client = this.combat.client;
    return client.world.editCombatants(
      this.combat.id,
      (c) => {
        Object.assign(
          c.combatants.find((x) => x._id === this.id),
          clone(data),
        );
        return { updated: [this.id] };
      },
      client.userId,
    );
  }
}

class ClientCombat {
  static documentName = "Combat";
  get documentName() {
    return "Combat";
  }
  constructor(client, id) {
    this.client = client;
    this._id = id;
    this._source = clone(client.world.combats.get(id));
  }
  get id() {
    return this._id;
  }
  get name() {
    return this._source.name;
  }
  get round() {
    return this._source.round;
  }
  get turn() {
    return this._source.turn;
  }
  get flags() {
    return this._source.flags;
  }
  get started() {
    return this._source.round > 0;
  }
  get combatants() {
    return new Collection(this._source.combatants.map((c) => [c._id, new ClientCombatant(this, c)]));
  }
  get turns() {
    const all = this.combatants;
    return sortTurns(this._source.combatants).map((c) => all.get(c._id));
  }
  get combatant() {
    return this.turn === null ? null : (this.turns[this.turn] ?? null);
  }
  state() {
    const c = this.combatant;
    return { round: this.round, turn: this.turn, combatantId: c?.id ?? null, tokenId: null };
  }
  getFlag(ns, key) {
    return this._source.flags?.[ns]?.[key];
  }
  setFlag(ns, key, value) {
    return this.update({ [`flags.${ns}.${key}`]: value });
  }
  update(data, options = {}) {
    return this.client.updateCombat(this._id, data, options);
  }
  /** Core's options for a turn or round change: v13 `{direction,
   * worldTime: {delta}}`; v12 passes `worldTime.delta` too, besides the
   * `advanceTime` its hook documentation names (foundry-vtt-types v12.331:
   * Combat.Database.Update has `worldTime`; hooks.d.mts combatTurn
   * `advanceTime`). */
  timeOptions(delta, direction) {
    return this.client.world.generation >= 13
      ? { direction, worldTime: { delta } }
      : { advanceTime: delta, direction, worldTime: { delta } };
  }
  get cfg() {
    return this.client.env.CONFIG.time;
  }
  async startCombat() {
    const data = { round: 1, turn: 0 };
    this.client.Hooks.callAll("combatStart", this, data);
    return this.update(data);
  }
  async nextTurn() {
    const next = (this.turn ?? -1) + 1;
    if (next >= this.turns.length) return this.nextRound();
    const data = { round: this.round, turn: next };
    const options = this.timeOptions(this.cfg.turnTime, 1);
    this.client.Hooks.callAll("combatTurn", this, data, options);
    return this.update(data, options);
  }
  async nextRound() {
    const delta = Math.max(this.turns.length - (this.turn ?? 0), 0) * this.cfg.turnTime + this.cfg.roundTime;
    const data = { round: this.round + 1, turn: 0 };
    const options = this.timeOptions(delta, 1);
    this.client.Hooks.callAll("combatRound", this, data, options);
    return this.update(data, options);
  }
  async previousTurn() {
    if (this.turn === 0 && this.round === 0) return this;
    if (this.turn <= 0) return this.previousRound();
    const data = { round: this.round, turn: this.turn - 1 };
    const options = this.timeOptions(-this.cfg.turnTime, -1);
    this.client.Hooks.callAll("combatTurn", this, data, options);
    return this.update(data, options);
  }
  async previousRound() {
    const turn = this.round === 0 ? 0 : Math.max(this.turns.length - 1, 0);
    const round = Math.max(this.round - 1, 0);
    let delta = -1 * turn * this.cfg.turnTime;
    if (round > 0) delta -= this.cfg.roundTime;
    const data = { round, turn };
    const options = this.timeOptions(delta, -1);
    this.client.Hooks.callAll("combatRound", this, data, options);
    return this.update(data, options);
  }
  endCombat() {
    return this.client.world.deleteCombat(this._id, this.client.userId);
  }
  createEmbeddedDocuments(type, list) {
    const world = this.client.world;
    return world.editCombatants(
      this._id,
      (c) => {
        const created = list.map((d) => ({ _id: world.id("B"), initiative: null, ...clone(d) }));
        c.combatants.push(...created);
        return { created: created.map((x) => x._id) };
      },
      this.client.userId,
    );
  }
  deleteEmbeddedDocuments(type, ids) {
    return this.client.world.editCombatants(
      this._id,
      (c) => {
        c.combatants = c.combatants.filter((x) => !ids.includes(x._id));
        return { deleted: [...ids] };
      },
      this.client.userId,
    );
  }
}

/**
 * A system's Combat subclass that runs turns itself, as sfrpg's
 * CombatSFRPG (foundryvtt-starfinder src/module/combat/combat.js, 0.30):
 * next/previous turn and round update the combat with `{advanceTime,
 * direction, eventData}` and fire no combatTurn/combatRound; its start fires
 * combatStart with dotted `flags.sfrpg.*` keys and updates with
 * `{advanceTime: CONFIG.time.roundTime}`; its delete() starts core's
 * deletion without waiting and advances game time by a round. Normal
 * combat: one phase that iterates the turns.
 */
export class SfrpgCombat extends ClientCombat {
  get phase() {
    return this._source.flags?.sfrpg?.phase ?? 0;
  }
  async startCombat() {
    const update = {
      "flags.sfrpg.startTime": this.client.time,
      "flags.sfrpg.combatType": "normal",
      "flags.sfrpg.phase": 0,
      round: 1,
      turn: 0,
    };
    this.client.Hooks.callAll("combatStart", this, update);
    return this.update(update, { advanceTime: this.cfg.roundTime });
  }
  _handleUpdate(round, turn, options) {
    return this.update(
      { round, "flags.sfrpg.phase": 0, turn },
      { ...options, eventData: { isNewRound: round !== this.round, oldRound: this.round, newRound: round } },
    );
  }
  async nextTurn() {
    let round = this.round;
    let turn = (this.turn ?? -1) + 1;
    const options = {};
    if (turn >= this.turns.length) {
      round += 1;
      turn = 0;
      options.advanceTime = Math.max(this.turns.length - this.turn, 0) * this.cfg.turnTime + this.cfg.roundTime;
      options.direction = 1;
    }
    return this._handleUpdate(round, turn, options);
  }
  async nextRound() {
    const advanceTime = Math.max(this.turns.length - this.turn, 0) * this.cfg.turnTime + this.cfg.roundTime;
    return this._handleUpdate(this.round + 1, 0, { advanceTime, direction: 1 });
  }
  async previousTurn() {
    let round = this.round;
    let turn = this.turn - 1;
    const options = {};
    if (turn < 0) {
      round -= 1;
      if (round <= 0) return this;
      turn = this.turns.length - 1;
      let advanceTime = -1 * (this.turn || 0) * this.cfg.turnTime;
      if (round > 0) advanceTime -= this.cfg.roundTime;
      options.advanceTime = advanceTime;
      options.direction = -1;
    }
    return this._handleUpdate(round, turn, options);
  }
  async previousRound() {
    const round = Math.max(this.round - 1, 0);
    let advanceTime = -1 * (this.turn || 0) * this.cfg.turnTime;
    if (round > 0) advanceTime -= this.cfg.roundTime;
    return this._handleUpdate(round, 0, { advanceTime, direction: -1 });
  }
  /** CombatSFRPG#delete: `super.delete(options)` (not awaited), then
   * `game.time.advance(CONFIG.time.roundTime)`. */
  endCombat() {
    const deleted = super.endCombat();
    const advanced = this.client.env.game.time.advance(this.cfg.roundTime);
    return Promise.all([deleted, advanced]);
  }
}
