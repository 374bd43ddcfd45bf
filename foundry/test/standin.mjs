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

/** {"a.b": 1} -> {a: {b: 1}} (Foundry's update data accepts both). */
export function expand(data) {
  const out = {};
  for (const [key, value] of Object.entries(data || {})) {
    const parts = key.split(".");
    let target = out;
    for (const p of parts.slice(0, -1)) {
      if (!isObject(target[p])) target[p] = {};
      target = target[p];
    }
    const last = parts[parts.length - 1];
    target[last] = isObject(value) ? merge(isObject(target[last]) ? target[last] : {}, expand(value)) : value;
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
  constructor({ system = "sfrpg", generation = 12 } = {}) {
    this.system = system;
    this.generation = generation;
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
    this.users.set(id, { _id: id, name, role, active: false });
    return id;
  }

  addActor(data) {
    const id = this.id("A");
    this.actors.set(id, {
      _id: id,
      type: "character",
      flags: {},
      ownership: { default: 0 },
      conditions: [],
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

  /** A browser tab of `userId` joining the world. */
  connect(userId) {
    const client = new FoundryClient(this, userId);
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
    // Foundry's own combat time: v12 `advanceTime`, v13 `worldTime.delta`.
    const delta = options?.worldTime?.delta ?? options?.advanceTime ?? 0;
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

export class FoundryClient {
  constructor(world, userId) {
    this.world = world;
    this.userId = userId;
    this.gone = false;
    this.notifications = [];
    this.clientSettings = new Map();
    this.registered = new Map();
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
        get: (ns, key) => client.getSetting(ns, key),
        set: (ns, key, value, options = {}) => client.setSetting(ns, key, value, options),
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
    const notify = (level) => (text) => client.notifications.push({ level, text });
    return {
      Hooks: this.Hooks,
      game,
      ui: { notifications: { info: notify("info"), warn: notify("warn"), error: notify("error") } },
      CONFIG: { time: { roundTime: 6, turnTime: 0 }, Actor: { documentClass: ActorClass } },
      Actor: ActorClass,
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
      get isSelf() {
        return id === client.userId;
      },
    };
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
    else value = this.clientSettings.get(full);
    return clone(value === undefined ? reg.default : value);
  }

  async setSetting(ns, key, value, options) {
    const full = `${ns}.${key}`;
    if (full === "core.time") return this.world.setTime(value, options, this.userId);
    const reg = this.registered.get(full);
    if (!reg) throw new Error(`setting ${full} is not registered`);
    if (reg.scope === "world") return this.world.setWorldSetting(full, value, options, this.userId);
    if (reg.scope === "user") this.world.userSettings.set(`${this.userId}:${full}`, clone(value));
    else this.clientSettings.set(full, clone(value));
    reg.onChange?.(value);
    return value;
  }

  /** Set a setting before boot (what the GM typed in an earlier session). */
  preset(key, value, scope) {
    const full = `vtt-sync.${key}`;
    if (scope === "world") this.world.settings.set(full, value);
    else if (scope === "user") this.world.userSettings.set(`${this.userId}:${full}`, value);
    else this.clientSettings.set(full, value);
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
    if (!this.combatDocs.has(id)) this.combatDocs.set(id, new ClientCombat(this, id));
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
    if (this.Hooks.call("preUpdateCombat", combat, changed, options, this.userId) === false) return null;
    await this.world.commitCombat(id, changed, options, this.userId);
    return combat;
  }
}

function makeActorClass(client) {
  return class StandInActor {
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
    get statuses() {
      return new Set(this._source.conditions);
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
    // sfrpg and pf1 condition APIs, and Foundry's status effects (generic):
    // conditions live in `conditions` here and change by an actor update.
    hasCondition(name) {
      return this._source.conditions.includes(name);
    }
    setCondition(name, enabled) {
      if (client.world.system !== "sfrpg") throw new Error("setCondition is sfrpg's");
      return this._conditions({ [name]: enabled }, {});
    }
    setConditions(conditions, context = {}) {
      if (client.world.system !== "pf1") throw new Error("setConditions is pf1's");
      return this._conditions(conditions, context);
    }
    toggleStatusEffect(id, { active } = {}) {
      return this._conditions({ [id]: active ?? !this.hasCondition(id) }, {});
    }
    _conditions(map, options) {
      const set = new Set(this._source.conditions);
      for (const [name, on] of Object.entries(map)) {
        if (on) set.add(name);
        else set.delete(name);
      }
      client.world.conditionCalls = (client.world.conditionCalls ?? 0) + 1;
      return this.update({ conditions: [...set].sort() }, options);
    }
  };
}

class ClientCombatant {
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
  timeOptions(delta, direction) {
    return this.client.world.generation >= 13
      ? { worldTime: { delta }, direction }
      : { advanceTime: delta, direction };
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
