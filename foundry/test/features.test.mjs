// What Foundry users expect of a module: maxima asked for where the system
// has none (pf1), labels per system and a French translation, a per-actor
// "don't sync", rule events in the chat (opt-in), a `vtt-sync.ready` hook
// and API, and the settings menu's connection test (tokens: tokens.test.mjs).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import { availableActions } from "../scripts/actions.mjs";
import { VttSyncModule } from "../scripts/module.mjs";
import { panelHtml, panelModel } from "../scripts/ui.mjs";
import { GM, pf1Sheet, presetToken, serverForFile, sfrpgSheet } from "./harness.mjs";
import { World } from "./standin.mjs";
import { BrowserLikeWebSocket, VttSyncClient, waitFor } from "./server.mjs";

const table = serverForFile("f");

test("pf1: linking proposes PE/PP maxima (none in the system), so a dying character can stabilise", async () => {
  const t = await table({ system: "pf1" });
  const kira = await t.actor({
    name: "Kira",
    system: pf1Sheet({ hpMax: 24, level: 5 }),
    ownership: { default: 0, [t.playerUser]: 3 },
  });
  const asked = [];
  t.gm.mod.sheets.askMaxima = async (actor, proposal) => {
    asked.push(proposal);
    return proposal; // the GM accepts the proposal
  };
  await t.gm.mod.sheets.link(t.gm.client.actor(kira));
  await t.settle();
  // pf1Sheet: level 5, every ability 12 (+1): PE 5 x (6 + 1) = 35, PP 5/2 + 1 = 3.
  assert.deepEqual(asked, [{ pe_max: 35, pp_max: 3 }]);
  const c = t.state.characters[`fvtt-${kira}`];
  assert.deepEqual([c.pe_max, c.pp_max, c.pp], [35, 3, 3]);
  assert.equal(t.gm.client.actor(kira).flags["vtt-sync"].pp_max, 3);
  await t.watcher.command("damage", { char: `fvtt-${kira}`, amount: 35 + 24 });
  await t.settle();
  const ops = availableActions(t.player.mod.client.state, `fvtt-${kira}`).map((a) => a.op);
  assert.deepEqual(ops, ["stabilize"]);
  // A GM who cancels links nothing.
  const other = await t.actor({ name: "Zed", system: pf1Sheet() });
  t.gm.mod.sheets.askMaxima = async () => null;
  assert.equal(await t.gm.mod.sheets.link(t.gm.client.actor(other)), null);
  assert.equal(t.state.characters[`fvtt-${other}`], undefined);
  t.assertClean();
  t.close();
});

test("labels per system: sfrpg's HP/SP/RP, pf1's HP (Wounds/Vigor under the variant); French PV/PE/PP", () => {
  const en = JSON.parse(readFileSync(new URL("../lang/en.json", import.meta.url), "utf8"));
  const fr = JSON.parse(readFileSync(new URL("../lang/fr.json", import.meta.url), "utf8"));
  const labels = (system, lang, variant = false) => {
    const world = new World({ system });
    const client = world.connect(world.addUser("Maya", GM));
    const get = (k) => k.split(".").reduce((v, p) => v?.[p], lang);
    client.env.game.i18n.localize = (k) => (typeof get(k) === "string" ? get(k) : k);
    const mod = new VttSyncModule(client.env, class {}).register();
    client.boot();
    if (variant) {
      client.registered.set("pf1.healthConfig", { scope: "world" });
      world.settings.set("pf1.healthConfig", { variants: { pc: { useWoundsAndVigor: true } } });
    }
    return mod.labels({ type: "character", system: {}, flags: {} });
  };
  assert.deepEqual(labels("sfrpg", en), { pv: "HP", pe: "SP", pp: "RP" });
  assert.deepEqual(labels("pf1", en), { pv: "HP", pe: "Stamina", pp: "Perseverance" });
  assert.deepEqual(labels("pf1", en, true), { pv: "Wounds", pe: "Vigor", pp: "Perseverance" });
  assert.deepEqual(labels("dnd5e", en), { pv: "HP", pe: "Stamina", pp: "Perseverance" });
  assert.deepEqual(labels("sfrpg", fr), { pv: "PV", pe: "PE", pp: "PP" });
  const html = panelHtml(
    { status: "connected", linked: true, gm: false, id: "c1", actions: [], flagMaxima: null, labels: labels("sfrpg", en), char: { pv: 3, pv_max: 9, pe: 0, pe_max: 5, pp: 1, pp_max: 2, condition: "conscious" } },
    (k) => k,
  );
  assert.match(html, /HP 3\/9<\/span> <span>SP 0\/5<\/span> <span>RP 1\/2/);
  assert.doesNotMatch(en.VTTSYNC.Action.Stabilize + en.VTTSYNC.EditByPlayer, /\bP[VEP]\b/); // no PV/PE/PP in English texts
});

test("don't sync: the actor stays linked and in the combat, its sheet is left alone", async () => {
  const t = await table();
  const aline = await t.actor({ name: "Aline", system: sfrpgSheet() });
  await t.gm.mod.sheets.link(t.gm.client.actor(aline));
  const ca = `fvtt-${aline}`;
  await t.gm.mod.sheets.setPaused(t.gm.client.actor(aline), true);
  await t.settle();
  await t.watcher.command("damage", { char: ca, amount: 5 });
  await t.settle();
  assert.equal(t.state.characters[ca].pe, 10);
  assert.equal(t.gm.client.actor(aline).system.attributes.sp.value, 15); // not written
  await t.gm.client.actor(aline).update({ "system.attributes.hp.value": 3 }); // a GM's edit: not sent, kept
  await t.settle();
  assert.equal(t.state.characters[ca].pv, 20);
  assert.equal(t.gm.client.actor(aline).system.attributes.hp.value, 3);
  assert.match(panelHtml(panelModel(t.gm.mod, t.gm.client.actor(aline)), (k) => k), /checked> NoSync/);
  await t.gm.mod.sheets.setPaused(t.gm.client.actor(aline), false); // back: the server's values again
  await t.settle();
  assert.equal(t.gm.client.actor(aline).system.attributes.sp.value, 10);
  assert.equal(t.gm.client.actor(aline).system.attributes.hp.value, 20);
  t.assertClean();
  t.close();
});

test("rule events become chat messages when the world opts in, once (the automation client posts)", async () => {
  const t = await table();
  const aline = await t.actor({ name: "Kira", system: sfrpgSheet() });
  await t.gm.mod.sheets.link(t.gm.client.actor(aline));
  const ca = `fvtt-${aline}`;
  await t.watcher.command("damage", { char: ca, amount: 3 }); // off by default
  await t.settle();
  assert.deepEqual([...t.gm.client.chat, ...t.player.client.chat], []);
  await t.gm.game.settings.set("vtt-sync", "chatMessages", true);
  await t.watcher.command("damage", { char: ca, amount: 40 });
  await t.settle();
  assert.deepEqual(t.player.client.chat, []);
  const texts = t.gm.client.chat.map((m) => m.content);
  assert.deepEqual(texts, ['<p class="vtt-sync-chat">Kira is dying: loses 1 RP at the end of each of their turns.</p>']);
  t.assertClean();
  t.close();
});

test("vtt-sync.ready fires once with the API; the API answers for an actor and reports changes", async () => {
  const heard = [];
  const world = new World();
  const orig = world.connect.bind(world);
  world.connect = (...args) => {
    const c = orig(...args);
    c.Hooks.on("vtt-sync.ready", (api) => heard.push(api));
    return c;
  };
  const t = await table();
  const aline = await t.actor({ name: "Aline", system: sfrpgSheet() });
  await t.gm.mod.sheets.link(t.gm.client.actor(aline));
  const api = t.gm.mod.api();
  assert.equal(api.status, "connected");
  assert.equal(api.charId(t.gm.client.actor(aline)), `fvtt-${aline}`);
  assert.equal(api.character(t.gm.client.actor(aline)).pv, 20);
  const patches = [];
  const off = api.on("patch", (p) => patches.push(p.v));
  await t.watcher.command("damage", { char: `fvtt-${aline}`, amount: 1 });
  await t.settle();
  off();
  assert.equal(patches.length, 1);
  assert.equal(Object.isFrozen(api), true);
  // The hook: registered before the module connects, fired at the first welcome only.
  const w = new World();
  const gm = w.addUser("Maya", GM);
  w.settings.set("vtt-sync.serverUrl", t.server.url);
  w.settings.set("vtt-sync.room", t.room);
  const c = w.connect(gm);
  presetToken(c, t.people.gm.token);
  c.env.WebSocket = BrowserLikeWebSocket;
  c.Hooks.on("vtt-sync.ready", (a) => heard.push(a));
  const mod = new VttSyncModule(c.env, VttSyncClient).register();
  c.boot();
  await waitFor(() => heard.length, { what: "vtt-sync.ready" });
  mod.connect(); // a settings change reconnects: no second ready
  await waitFor(() => mod.status === "connected", { what: "reconnected" });
  assert.equal(heard.length, 1);
  assert.equal(heard[0], mod.api());
  mod.client.close();
  t.close();
});

test("the settings menu's connection test says what is wrong", async () => {
  const t = await table();
  const mod = t.player.mod;
  assert.equal((await mod.connection.test()).code, "ok");
  assert.deepEqual(await mod.connection.test(), { code: "ok", role: "player", user: t.people.Paul.user, room: t.room });
  assert.equal((await mod.connection.test({ token: "not-a-token" })).code, "refused");
  assert.equal((await mod.connection.test({ room: "no-such-room" })).code, "refused");
  assert.equal((await mod.connection.test({ room: "" })).code, "empty");
  assert.equal((await mod.connection.test({ serverUrl: "ws://127.0.0.1:9" })).code, "unreachable");
  t.player.env.location = { protocol: "https:" };
  assert.deepEqual(await mod.connection.test({ serverUrl: "ws://vtt.example.org:8765" }), {
    code: "insecure",
    detail: "ws://vtt.example.org:8765",
  });
  t.close();
});
