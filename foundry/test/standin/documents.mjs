// The documents a client holds: actors (with the systems' condition APIs),
// users, combats and combatants, and sfrpg's Combat class. Each behaviour
// names the Foundry or system source it follows.

import { clone, expand } from "./base.mjs";

/** Foundry's ownership levels (CONST.DOCUMENT_OWNERSHIP_LEVELS). */
const LEVELS = { NONE: 0, LIMITED: 1, OBSERVER: 2, OWNER: 3 };

/** A GM is a user of role ASSISTANT (3) or GAMEMASTER (4): User#isGM. */
export const isGM = (role) => role >= 3;

/** The Actor class of one client. */
export function makeActorClass(client) {
  return class StandInActor {
    static documentName = "Actor";
    get documentName() {
      return "Actor";
    }
    constructor(id) {
      this._id = id;
      this._source = clone(client.world.actors.get(id));
      this.apps = new Set(); // the open sheets (Document#apps)
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
    /** Actor#statuses: the status ids of its active effects. */
    get statuses() {
      return new Set((this._source.effects ?? []).flatMap((e) => e.statuses ?? []));
    }
    /** The conditions the actor shows, whatever holds them (for the tests). */
    conditionNames() {
      const items = (this._source.items ?? []).filter((i) => i.type === "condition").map((i) => i.name);
      return [...new Set([...items, ...this.statuses])].sort();
    }
    /** Derived data, as the systems prepare it: pf1's value = max + offset
     * (pf1 10.8 ActorPF prepareDerivedData). */
    prepare() {
      this.system = clone(this._source.system);
      if (client.world.system === "pf1") {
        for (const k of ["hp", "wounds", "vigor"]) {
          const a = this.system?.attributes?.[k];
          if (a && Number.isFinite(a.offset)) a.value = a.max + a.offset;
        }
      }
    }
    /** pf1's _preUpdate (actor-pf.mjs): a value written becomes an offset
     * from the maximum. It runs before the preUpdateActor hook. */
    _preUpdate(changed) {
      if (client.world.system !== "pf1") return;
      const attrs = changed.system?.attributes;
      if (!attrs) return;
      for (const k of ["hp", "wounds", "vigor"]) {
        const a = attrs[k];
        if (!a) continue;
        if (a.value !== undefined && a.offset === undefined) a.offset = a.value - (a.max ?? this.system.attributes[k].max);
        delete a.value;
      }
    }
    getFlag(ns, key) {
      return this._source.flags?.[ns]?.[key];
    }
    setFlag(ns, key, value) {
      return this.update({ [`flags.${ns}.${key}`]: value });
    }
    /** Document#testUserPermission: a GM has every level; others their
     * own ownership, else the default. */
    testUserPermission(user, level) {
      if (user.isGM) return true;
      const need = LEVELS[level] ?? level;
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

/** A User document as a client sees it. Updates go through the world's
 * permission rule (a GM, or the user itself). */
export function userDoc(client, id) {
  const u = client.world.users.get(id);
  return {
    documentName: "User",
    id,
    name: u.name,
    role: u.role,
    active: u.active,
    isGM: isGM(u.role),
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
    unsetFlag(ns, key) {
      return client.world.commitUser(id, expand({ [`flags.${ns}.-=${key}`]: null }), client.userId);
    },
  };
}

export function sortTurns(combatants) {
  return [...combatants].sort((a, b) => {
    const ia = a.initiative ?? -Infinity;
    const ib = b.initiative ?? -Infinity;
    if (ia !== ib) return ib - ia;
    return a._id < b._id ? -1 : 1;
  });
}

export class ClientCombatant {
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
    return this.combat.editCombatants((c) => {
      Object.assign(
        c.combatants.find((x) => x._id === this.id),
        clone(data),
      );
      return { updated: [this.id] };
    });
  }
}
