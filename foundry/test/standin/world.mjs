// The world: what Foundry's server holds and broadcasts. It commits the
// document operations a client sends, if that user may make them, and
// delivers the result to every client, each on its own turn of the event
// loop (as Foundry's socket does).

import { clone, merge, topKeys } from "./base.mjs";
import { FoundryClient } from "./client.mjs";
import { isGM } from "./documents.mjs";
import { Browser } from "./settings.mjs";

let worlds = 0;

export class World {
  /**
   * @param {object} opts
   * @param {string} [opts.system]  game.system.id: "sfrpg", "pf1" or any other (generic)
   * @param {number} [opts.generation]  Foundry's major version (12 or 13)
   * @param {string} [opts.combatClass] "core", or "sfrpg" (CombatSFRPG's own turn methods)
   * @param {string} [opts.protocol] the page's location.protocol
   * @param {string} [opts.origin] where Foundry serves its worlds: worlds of one Foundry share it (and a browser's localStorage)
   * @param {string} [opts.id] game.world.id
   */
  constructor({ system = "sfrpg", generation = 12, combatClass = "core", protocol = "http:", origin = null, id = null } = {}) {
    worlds += 1;
    this.system = system;
    this.generation = generation;
    this.combatClass = combatClass;
    this.origin = origin ?? `${protocol}//foundry.test`;
    this.protocol = new URL(this.origin).protocol;
    this.worldId = id ?? `world-${worlds}`;
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
    this.combats.set(id, { _id: id, name: "Encounter", round: 0, turn: null, flags: {}, combatants: [], ...clone(data) });
    for (const c of this.clients) c.receiveCombat(id, { created: true });
    return id;
  }

  /** A browser tab of `userId` opening this world. Tabs of one `browser`
   * share its localStorage for this world's origin (client settings live
   * there); `storage` gives one directly. */
  connect(userId, { browser = null, storage = null } = {}) {
    const store = storage ?? (browser ?? new Browser()).storage(this.origin);
    const client = new FoundryClient(this, userId, store);
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

  /** A database operation that changes nothing the tests look at (a
   * token's movement history cleared): one round trip to every client. */
  roundTrip() {
    return this.deliver(() => {});
  }

  /** Wait until nothing is being delivered. */
  async flush() {
    while (this.pending) await new Promise((r) => setImmediate(r));
  }

  role(userId) {
    return this.users.get(userId)?.role ?? 0;
  }

  // -- documents

  /** Actor updates: a GM, or an owner of the actor (Document#canUserModify:
   * BaseActor's update permission is OWNER). */
  commitActor(updates, options, userId) {
    for (const { _id } of updates) {
      const data = this.actors.get(_id);
      const own = data.ownership?.[userId] ?? data.ownership?.default ?? 0;
      if (!isGM(this.role(userId)) && own < 3) {
        return Promise.reject(new Error(`User ${userId} lacks permission to update Actor ${_id}`));
      }
    }
    for (const { _id, changed } of updates) merge(this.actors.get(_id), changed);
    this.log.push({ op: "update", type: "Actor", ids: updates.map((u) => u._id), options: clone(options), userId });
    return this.deliver((c) => {
      for (const { _id, changed } of updates) c.receiveActor(_id, changed, options, userId);
    });
  }

  /** Combat updates: a player may change only `round`, `turn` and the
   * combatants (v12 common/documents/combat.mjs, BaseCombat.#canUpdate). The
   * time moves by the operation's `worldTime.delta` (Combat#_preUpdate made
   * it from a lone `advanceTime`), applied by Foundry's server. */
  async commitCombat(id, changed, options, userId) {
    if (!isGM(this.role(userId))) {
      const extra = topKeys(changed).filter((k) => !["_id", "round", "turn", "combatants"].includes(k));
      if (extra.length) throw new Error(`User ${userId} lacks permission to update Combat ${id} (${extra.join(", ")})`);
    }
    merge(this.combats.get(id), changed);
    this.log.push({ op: "update", type: "Combat", ids: [id], changed: clone(changed), options: clone(options), userId });
    await this.deliver((c) => c.receiveCombat(id, { changed, options, userId }));
    const delta = options?.worldTime?.delta ?? 0;
    if (delta) await this.setTime(this.time + delta, {}, userId);
  }

  deleteCombat(id, userId) {
    const data = this.combats.get(id);
    this.combats.delete(id);
    this.log.push({ op: "delete", type: "Combat", ids: [id], userId });
    return this.deliver((c) => c.receiveCombatDeleted(id, data, userId));
  }

  /** Combatants added, deleted or re-sorted: the create/delete/update
   * Combatant hooks on every client. The turn is the initiating client's
   * business (ClientCombat#editCombatants). */
  async editCombatants(id, edit, userId) {
    const data = this.combats.get(id);
    const result = edit(data);
    const { created = [], deleted = [], updated = [] } = result;
    this.log.push({ op: "combatants", type: "Combat", ids: [id], created, deleted, updated, userId });
    await this.deliver((c) => c.receiveCombatants(id, { created, deleted, updated, userId }));
    return result;
  }

  /** A User document's update: only a GM, or the user itself, may make it
   * (BaseUser's update permission, foundry-vtt-types v13.345.1 common/
   * documents/user.d.mts); the others see `updateUser`. */
  commitUser(id, changed, userId) {
    if (!(isGM(this.role(userId)) || userId === id)) {
      return Promise.reject(new Error(`User ${userId} lacks permission to update User ${id}`));
    }
    const target = this.users.get(id);
    for (const [ns, flags] of Object.entries(changed.flags ?? {})) {
      for (const key of Object.keys(flags)) {
        if (key.startsWith("-=")) {
          delete target.flags?.[ns]?.[key.slice(2)];
          delete flags[key];
        }
      }
    }
    merge(target, changed);
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
