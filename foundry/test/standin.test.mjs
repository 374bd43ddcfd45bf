// The stand-in itself holds a module to Foundry's rules: each validation
// throws as Foundry's does, and the orders and scopes are Foundry's (the
// source of each rule is named in standin/*.mjs beside it).
import assert from "node:assert/strict";
import { test } from "node:test";

import { ApplicationV2, Browser, FormApplication, SfrpgActorSheet, World } from "./standin.mjs";

const GM = 4;
const ASSISTANT = 3;
const PLAYER = 1;

function oneClient(opts = {}, role = GM) {
  const world = new World(opts);
  const user = world.addUser("Maya", role);
  return { world, user, client: world.connect(user) };
}

test("settings: namespace and key are required; reading or writing an unregistered setting throws", async () => {
  const { client } = oneClient();
  const s = client.env.game.settings;
  assert.throws(() => s.register("vtt-sync", "", { scope: "world" }), /must specify both namespace and key/);
  assert.throws(() => s.get("vtt-sync", "clock"), /"vtt-sync.clock" is not a registered game setting/);
  await assert.rejects(s.set("vtt-sync", "clock", {}), /is not a registered game setting/);
  s.register("vtt-sync", "clock", { scope: "world", type: Object, default: {} });
  assert.deepEqual(s.get("vtt-sync", "clock"), {});
});

test("settings: v12 knows the world and client scopes (anything else is client); v13 adds user", () => {
  const v12 = oneClient({ generation: 12 }).client;
  v12.env.game.settings.register("m", "k", { scope: "user", default: 1 });
  assert.equal(v12.registered.get("m.k").scope, "client");
  const v13 = oneClient({ generation: 13 }).client;
  v13.env.game.settings.register("m", "k", { scope: "user", default: 1 });
  assert.equal(v13.registered.get("m.k").scope, "user");
});

test("registerMenu: the type must be a FormApplication or ApplicationV2 subclass", () => {
  const { client } = oneClient();
  const s = client.env.game.settings;
  const menu = (type) => ({ name: "n", label: "l", hint: "h", icon: "i", type, restricted: false });
  assert.throws(
    () => s.registerMenu("m", "plain", menu(class Plain {})),
    /You must provide a menu type that is a FormApplication or ApplicationV2 instance or subclass/,
  );
  assert.throws(() => s.registerMenu("m", "none", menu(undefined)), /FormApplication or ApplicationV2/);
  s.registerMenu("m", "v2", menu(class extends ApplicationV2 {}));
  s.registerMenu("m", "v1", menu(class extends FormApplication {}));
  assert.deepEqual([...client.menus.keys()], ["m.v2", "m.v1"]);
});

test("keybindings: registered before ready only; a binding needs a key that is not the browser's, and known modifiers", () => {
  const { client } = oneClient();
  const kb = client.env.game.keybindings;
  const bind = (editable) => ({ name: "n", editable });
  assert.throws(() => kb.register("m", "a", bind("F1")), /must be an array/);
  assert.throws(() => kb.register("m", "a", bind([{ modifiers: ["Shift"] }])), /valid key designation/);
  assert.throws(() => kb.register("m", "a", bind([{ key: "F5" }])), /protected/);
  assert.throws(() => kb.register("m", "a", bind([{ key: "KeyK", modifiers: ["Hyper"] }])), /not a valid modifier/);
  kb.register("m", "a", bind([{ key: "KeyK", modifiers: ["Control"] }]));
  client.boot();
  assert.throws(() => kb.register("m", "b", bind([{ key: "KeyJ" }])), /after the init hook/);
});

test("client settings live in the browser's storage of the world's origin: shared by its users and worlds, not by another origin", async () => {
  const browser = new Browser();
  const w1 = new World({ origin: "https://foundry.example" });
  const w2 = new World({ origin: "https://foundry.example" }); // another world of the same Foundry
  const w3 = new World({ origin: "https://other.example" });
  const clients = [
    w1.connect(w1.addUser("Maya", GM), { browser }),
    w1.connect(w1.addUser("Paul", PLAYER), { browser }),
    w2.connect(w2.addUser("Lea", PLAYER), { browser }),
    w3.connect(w3.addUser("Noa", PLAYER), { browser }),
  ];
  for (const c of clients) c.env.game.settings.register("m", "secret", { scope: "client", default: "" });
  await clients[0].env.game.settings.set("m", "secret", "maya's");
  assert.deepEqual(
    clients.map((c) => c.env.game.settings.get("m", "secret")),
    ["maya's", "maya's", "maya's", ""],
  );
});

test("world settings and the world time are written by GMs and assistants only (SETTINGS_MODIFY)", async () => {
  const world = new World();
  const clients = [GM, ASSISTANT, PLAYER].map((role) => world.connect(world.addUser(`r${role}`, role)));
  for (const c of clients) c.env.game.settings.register("m", "w", { scope: "world", default: 0 });
  await clients[0].env.game.settings.set("m", "w", 1);
  await clients[1].env.game.settings.set("m", "w", 2);
  await assert.rejects(clients[2].env.game.settings.set("m", "w", 3), /lacks permission/);
  await assert.rejects(clients[2].env.game.time.advance(60), /lacks permission/);
  assert.equal(world.settings.get("m.w"), 2);
});

test("updates: the preUpdate hook sees the submitted change before the diff; the update hooks see the differences", async () => {
  const { world, client } = oneClient();
  const id = world.addActor({ name: "Aline", system: { attributes: { hp: { value: 20 }, rp: { value: 6 } } } });
  client.actorDocs.set(id, client.makeActor(id));
  const seen = [];
  client.Hooks.on("preUpdateActor", (a, changed) => seen.push(["pre", structuredClone(changed)]));
  client.Hooks.on("updateActor", (a, changed) => seen.push(["update", structuredClone(changed)]));
  await client.actor(id).update({ name: "Aline", "system.attributes.hp.value": 20, "system.attributes.rp.value": 5 });
  await world.flush();
  assert.deepEqual(seen, [
    ["pre", { name: "Aline", system: { attributes: { hp: { value: 20 }, rp: { value: 5 } } } }],
    ["update", { system: { attributes: { rp: { value: 5 } } } }],
  ]);
});

test("sfrpg's AppV1 sheet submits its whole form, unchanged inputs included", async () => {
  const { world, client } = oneClient({ system: "sfrpg" });
  const id = world.addActor({ name: "Aline", system: { attributes: { hp: { value: 20 }, sp: { value: 3 }, rp: { value: 6 } } } });
  client.actorDocs.set(id, client.makeActor(id));
  const sheet = new SfrpgActorSheet(client.actor(id), client.Hooks);
  await sheet.render();
  let submitted = null;
  client.Hooks.on("preUpdateActor", (a, changed) => (submitted = structuredClone(changed)));
  await sheet.submit({ name: "Aline the brave" });
  assert.deepEqual(submitted.system.attributes, { hp: { value: 20 }, sp: { value: 3 }, rp: { value: 6 } });
  assert.equal(submitted.name, "Aline the brave");
});

test("who may update what: a player only actors they own, only round and turn of a combat, only their own User", async () => {
  const world = new World();
  const gm = world.connect(world.addUser("Maya", GM));
  const paul = world.addUser("Paul", PLAYER);
  const player = world.connect(paul);
  const mine = world.addActor({ name: "Aline", ownership: { default: 0, [paul]: 3 } });
  const theirs = world.addActor({ name: "Gorgol" });
  for (const c of [gm, player]) for (const id of [mine, theirs]) c.actorDocs.set(id, c.makeActor(id));
  await player.actor(mine).update({ name: "Aline!" });
  await assert.rejects(player.actor(theirs).update({ name: "Gorgol!" }), /lacks permission to update Actor/);
  const cid = world.addCombat({ round: 1, turn: 0, combatants: [{ _id: "B1", actorId: mine, initiative: 1 }, { _id: "B2", actorId: theirs, initiative: 0 }] });
  await player.combat(cid).update({ turn: 1 });
  await assert.rejects(player.combat(cid).setFlag("vtt-sync", "room", "r"), /lacks permission to update Combat/);
  await assert.rejects(player.env.game.users.get(world.clients[0].userId).setFlag("m", "k", 1), /lacks permission to update User/);
  await player.env.game.user.setFlag("m", "k", 1);
});

for (const generation of [12, 13]) {
  test(`v${generation}: combatTurnChange's order, clients and \`previous\` are Foundry's`, async () => {
    const world = new World({ generation });
    const gm = world.connect(world.addUser("Maya", GM));
    const player = world.connect(world.addUser("Paul", PLAYER));
    const cid = world.addCombat({ round: 1, turn: 0, combatants: [{ _id: "B1", initiative: 2 }, { _id: "B2", initiative: 1 }, { _id: "B3", initiative: 0 }] });
    const order = { gm: [], player: [] };
    const priors = [];
    for (const [who, c] of [["gm", gm], ["player", player]]) {
      c.Hooks.on("updateCombat", () => order[who].push("updateCombat"));
      c.Hooks.on("combatTurnChange", (combat, prior) => {
        order[who].push("combatTurnChange");
        if (who === "gm") priors.push(prior);
      });
    }
    await gm.combat(cid).nextTurn();
    await gm.combat(cid).nextTurn();
    await world.flush();
    await new Promise((r) => setTimeout(r, 20));
    if (generation >= 13) {
      // The active GM only, after the update hook and its turn events; one live object.
      assert.deepEqual(order, {
        gm: ["updateCombat", "updateCombat", "combatTurnChange", "combatTurnChange"],
        player: ["updateCombat", "updateCombat"],
      });
      assert.equal(priors[0], priors[1]);
      assert.equal(priors[0].turn, 1);
    } else {
      assert.deepEqual(order.gm, ["updateCombat", "combatTurnChange", "updateCombat", "combatTurnChange"]);
      assert.deepEqual(order.player, ["combatTurnChange", "updateCombat", "combatTurnChange", "updateCombat"]);
      assert.deepEqual(priors.map((p) => p.turn), [0, 1]);
    }
  });

  test(`v${generation}: deleting the current combatant moves the tracker as Foundry does`, async () => {
    const world = new World({ generation });
    const gm = world.connect(world.addUser("Maya", GM));
    const cid = world.addCombat({ round: 2, turn: 1, combatants: [{ _id: "B1", initiative: 2 }, { _id: "B2", initiative: 1 }, { _id: "B3", initiative: 0 }] });
    await gm.combat(cid).deleteEmbeddedDocuments("Combatant", ["B2"]);
    await world.flush();
    const c = gm.combat(cid);
    if (generation >= 13) assert.deepEqual([c.round, c.combatant.id], [3, "B1"]);
    else assert.deepEqual([c.round, c.combatant.id], [2, "B1"]); // the previous survivor
  });
}

test("sfrpg's CombatSFRPG#delete: onBeforeCombatEnd, the deletion started, then a round of world time in the same run", async () => {
  const world = new World({ combatClass: "sfrpg" });
  const gm = world.connect(world.addUser("Maya", GM));
  const cid = world.addCombat({ round: 1, turn: 0 });
  const steps = [];
  gm.Hooks.on("onBeforeCombatEnd", () => steps.push("onBeforeCombatEnd"));
  const advance = gm.env.game.time.advance;
  gm.env.game.time.advance = (...args) => {
    steps.push("advance");
    return advance(...args);
  };
  const done = gm.combat(cid).endCombat();
  steps.push("returned");
  await done;
  await world.flush();
  assert.deepEqual(steps, ["onBeforeCombatEnd", "advance", "returned"]);
  assert.equal(world.time, 6);
  assert.equal(world.combats.has(cid), false);
});
