// A table for the live tests: a real server room, a stand-in Foundry world
// with GM and player clients each running the module with its own token,
// and a watcher connection (the GM's token) through which the test sees the
// server's state and every patch.

import assert from "node:assert/strict";
import { after, before } from "node:test";

import { VttSyncModule } from "../scripts/module.mjs";
import { World } from "./standin.mjs";
import { BrowserLikeWebSocket, VttSyncClient, connect, makeRoom, startServer, waitFor } from "./server.mjs";

export const GM = 4; // Foundry's GAMEMASTER role
export const PLAYER = 1;

/** Sheet data shaped like the sfrpg template (static/template.json before
 * the data models: attributes.hp/sp/rp, details.level, skills.med). */
export function sfrpgSheet({
  hp = 20,
  hpMax = 20,
  sp = 15,
  spMax = 15,
  rp = 6,
  rpMax = 6,
  level = 3,
  med = 5,
} = {}) {
  return {
    attributes: {
      hp: { value: hp, max: hpMax, min: 0, temp: null },
      sp: { value: sp, max: spMax, min: 0 },
      rp: { value: rp, max: rpMax, min: 0 },
    },
    details: { level: { value: level, min: 1, max: 20 } },
    abilities: Object.fromEntries(
      ["str", "dex", "con", "int", "wis", "cha"].map((a) => [
        a,
        { value: a === "con" ? 14 : 10, min: 3, misc: 0, mod: 0, damage: 0 },
      ]),
    ),
    skills: { med: { ability: "int", ranks: 2, value: 0, misc: 0, mod: med, enabled: true } },
    conditions: {},
  };
}

/** Sheet data shaped like pf1 v10 (public/template.json: hp/wounds/vigor
 * with `offset`; value and max are derived, prepare() adds value). */
export function pf1Sheet({ hpMax = 24, hpOffset = 0, level = 3, hea = 6 } = {}) {
  return {
    attributes: {
      hp: { base: 0, temp: 0, nonlethal: 0, offset: hpOffset, max: hpMax },
      wounds: { base: 0, offset: 0, max: 12 },
      vigor: { temp: 0, base: 0, offset: 0, max: 9 },
    },
    details: { level: { value: level } },
    abilities: Object.fromEntries(
      ["str", "dex", "con", "int", "wis", "cha"].map((a) => [
        a,
        { value: 12, damage: 0, drain: 0, userPenalty: 0, total: 12 },
      ]),
    ),
    skills: { hea: { ability: "wis", rank: 3, mod: hea } },
  };
}

export class Table {
  /**
   * @param {object} server  startServer()'s result
   * @param {object} opts
   * @param {string} opts.room
   * @param {string} [opts.system] game.system.id
   * @param {number} [opts.generation] 12 or 13
   * @param {number} [opts.gmTabs] browser tabs of the one GM user
   * @param {number} [opts.time] the world time before the module runs
   */
  constructor(
    server,
    {
      room,
      system = "sfrpg",
      generation = 12,
      gmTabs = 1,
      time = 0,
      combatClass = "core",
      protocol = "http:",
      moduleOptions = { clockWindowMs: 100 },
    } = {},
  ) {
    this.server = server;
    this.room = room;
    this.world = new World({ system, generation, combatClass, protocol });
    this.moduleOptions = moduleOptions;
    this.world.settings.set("core.time", time); // the world's calendar before the module
    this.generation = generation;
    this.gmTabs = gmTabs;
    this.gmUser = this.world.addUser("Maya", GM);
    this.playerUser = this.world.addUser("Paul", PLAYER);
    this.tabs = [];
    this.seenPatches = [];
  }

  /** Make the room and put the stand-in clients at the table. */
  async open() {
    this.people = await makeRoom(this.server, this.room, ["Paul"]);
    this.world.settings.set("vtt-sync.serverUrl", this.server.url);
    this.world.settings.set("vtt-sync.room", this.room);
    for (let i = 0; i < this.gmTabs; i++) this.tabs.push(this.join(this.gmUser, this.people.gm.token));
    this.player = this.join(this.playerUser, this.people.Paul.token);
    this.watcher = await connect(this.server.url, this.people.gm.token, this.room);
    this.watcher.on("patch", (p) => this.seenPatches.push(p));
    await waitFor(() => this.all.every((t) => t.mod.status === "connected"), { what: "modules connected" });
    await this.settle();
    return this;
  }

  get gm() {
    return this.tabs[0];
  }

  get all() {
    return [...this.tabs, this.player];
  }

  join(userId, token, { storage = null, browser = null } = {}) {
    const client = this.world.connect(userId, { storage, browser });
    if (token) presetToken(client, token);
    client.env.WebSocket = BrowserLikeWebSocket;
    const mod = new VttSyncModule(client.env, VttSyncClient, this.moduleOptions).register();
    client.boot();
    return { client, mod, env: client.env, game: client.env.game };
  }

  get state() {
    return this.watcher.state;
  }

  /** Wait until every delivery, module queue, debounced tracker edit and
   * patch has landed: the point at which a test may assert. */
  async settle() {
    let last = null;
    let stable = 0;
    for (let i = 0; stable < 3; i++) {
      if (i > 2000) throw new Error("the table never settled");
      await this.world.flush();
      await Promise.all(this.all.map((t) => t.mod.idle()));
      const sig = JSON.stringify([
        this.world.pending,
        this.world.log.length,
        this.watcher.version,
        this.all.map((t) => [
          t.mod.client?.version,
          t.mod.pending(),
        ]),
        this.world.time,
      ]);
      const busy = this.all.some((t) => {
        const p = t.mod.pending();
        return (
          p.orders ||
          (p.clockHeld && p.clockWindowMs <= 1000) || // a short window is waited for
          (t.mod.client && !["failed", "closed"].includes(t.mod.client.status) && t.mod.client.version !== this.watcher.version)
        );
      });
      if (sig === last && !busy) stable += 1;
      else stable = 0;
      last = sig;
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  /** The server patches a module sent with ids of a kind ("turn", "clock"...). */
  patches(kind) {
    return this.seenPatches.filter((p) => String(p.id).startsWith(`${kind}:`));
  }

  /** A world actor, made before or after the clients joined. */
  async actor(data) {
    const id = this.world.addActor(data);
    await this.world.deliver((c) => c.actorDocs.set(id, c.makeActor(id)));
    await this.settle();
    return id;
  }

  /** A combat of the GM's with `combatants` ({actorId, initiative}), started
   * as the GM's Begin Combat does (Combat#startCombat), once the table
   * settled: the combat document, as the GM's client holds it. */
  async startCombat(combatants) {
    const combat = this.gm.client.combat(this.world.addCombat({}));
    await combat.createEmbeddedDocuments("Combatant", combatants);
    await combat.startCombat();
    await this.settle();
    return combat;
  }

  /** Every hook error, module error and unexpected notification, for a clean end. */
  problems({ allow = [] } = {}) {
    const out = [];
    for (const t of this.all) {
      out.push(...t.client.Hooks.errors.map((e) => `hook: ${e.stack || e}`));
      out.push(...t.mod.errors.map((e) => `module: ${e.message || e}`));
      for (const n of t.client.notifications) {
        if (n.level !== "info" && !allow.some((re) => re.test(n.text))) out.push(`${n.level}: ${n.text}`);
      }
    }
    return out;
  }

  assertClean(opts) {
    assert.deepEqual(this.problems(opts), []);
  }

  close() {
    for (const t of this.all) {
      t.mod.client?.close();
      clearTimeout(t.mod.clock.timer);
      for (const timer of t.mod.tracker.orderTimers.values()) clearTimeout(timer);
    }
    this.watcher?.close();
  }
}

/** This user's token for this world, saved in the client's browser as the
 * module keeps it (settings.mjs: the `tokens` client setting, one per world
 * and user), before the client boots. */
export function presetToken(client, token) {
  const key = "vtt-sync.tokens";
  const tokens = JSON.parse(client.storage.getItem(key) ?? "{}");
  tokens[`${client.world.worldId}/${client.userId}`] = token;
  client.storage.setItem(key, JSON.stringify(tokens));
}

/** Just enough DOM for the module's UI outside a browser (the indicator it
 * adds at ready, the panels it looks for): elements record what is done to
 * them. The DOM itself is tested in Chromium (tests/foundry/). */
export function fakeDocument() {
  const appended = [];
  const element = () => ({
    dataset: {},
    classList: { add() {}, remove() {}, toggle() {} },
    append() {},
    prepend() {},
    addEventListener() {},
    querySelector: () => null,
    querySelectorAll: () => [],
  });
  return {
    appended,
    getElementById: () => null,
    createElement: element,
    body: { append: (e) => appended.push(e) },
    querySelectorAll: () => [],
  };
}

/** The clock seen on one client, in server seconds. */
export function serverSeconds(tab) {
  const saved = tab.game.settings.get("vtt-sync", "clock");
  return tab.game.time.worldTime - saved.offset;
}

/** One server for a test file (started before its tests, stopped after);
 * returns `table(opts)`, which opens a Table in a new room of it. */
export function serverForFile(prefix) {
  let server = null;
  let rooms = 0;
  before(async () => {
    server = await startServer();
  });
  after(async () => {
    await server?.stop();
  });
  const tables = [];
  after(() => {
    for (const t of tables) t.close(); // a failed test's table too: no client left retrying
  });
  return (opts = {}) => {
    rooms += 1;
    const t = new Table(server, { room: `${prefix}${rooms}`, ...opts });
    tables.push(t);
    return t.open();
  };
}
