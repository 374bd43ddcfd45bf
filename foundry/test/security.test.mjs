// What a hostile server, an imported room file, or another player cannot
// do: run script in a Foundry client (every server value is escaped where
// the module builds HTML, numbers rendered as numbers), or take another
// player's characters by claiming to be them.
import assert from "node:assert/strict";
import { test } from "node:test";

import { eventHtml } from "../scripts/chat.mjs";
import { VttSyncModule } from "../scripts/module.mjs";
import { panelHtml } from "../scripts/ui.mjs";
import { PLAYER, serverForFile, sfrpgSheet } from "./harness.mjs";
import { World } from "./standin.mjs";

const table = serverForFile("x");
const EVIL = `<img src=x onerror="alert(1)">`;
const t = (key, data) => (data ? `${key}(${Object.values(data).join(",")})` : key);

test("the panel: server values that are not numbers are not HTML either", () => {
  const html = panelHtml(
    {
      status: `connected"><script>alert(1)</script>`,
      linked: true,
      gm: true,
      id: "c1",
      char: { pv: EVIL, pv_max: "<b>20</b>", pe: 1.5, pe_max: null, pp: "6", pp_max: 6, condition: EVIL, activity: { kind: EVIL } },
      labels: { pv: "<i>HP</i>", pe: "SP", pp: "RP" },
      actions: [{ op: `x" onclick="alert(1)`, args: { char: EVIL }, key: "FirstAid", name: EVIL }],
      flagMaxima: { pe_max: EVIL, pp_max: 2, pe: true },
    },
    t,
  );
  assert.doesNotMatch(html, /<img|<script|<b>|<i>|onclick="|onerror="/);
  assert.match(html, /&lt;i&gt;HP&lt;\/i&gt; \?\/\?/); // numbers as numbers: anything else is "?"
  assert.match(html, /SP 1\/\?/);
  assert.match(html, /RP \?\/6/); // "6" from a server is not a number
  assert.match(html, /vtt-sync-condition unknown/);
});

test("chat messages: names and numbers from the server are escaped", () => {
  const state = { characters: { c1: { name: EVIL }, c2: { name: "<b>Bob</b>" } } };
  const html = eventHtml(
    { kind: "roll", char: "c1", patient: "c2", check: "medicine", d20: "<b>", mod: 1, bonus: 0, total: 14, dc: 15, outcome: "success" },
    state,
    t,
  );
  assert.doesNotMatch(html, /<img|<b>/);
  assert.match(html, /^<p class="vtt-sync-chat">/);
  assert.match(eventHtml({ kind: "condition", char: "c1", to: "dying" }, state, t), /&lt;img/);
  assert.equal(eventHtml({ kind: "condition", char: "c1", to: EVIL }, state, t), null);
});

test("notifications carry server values escaped (v12 renders them as HTML)", () => {
  const world = new World({ generation: 12 });
  const client = world.connect(world.addUser("Maya", 4));
  const mod = new VttSyncModule(client.env, class {}).register();
  client.boot();
  mod.report(Object.assign(new Error("x"), { name: "CommandError", op: "damage", serverMessage: EVIL }));
  mod.warnOnce("k", "OutOfStep", { server: EVIL, foundry: "<b>x</b>" });
  for (const n of client.notifications) assert.doesNotMatch(n.html, /<img|<b>/);
  assert.match(client.notifications[0].text, /onerror="alert\(1\)"/); // shown as text
});

test("a player's socket message claiming another Foundry user gets them nothing; logins live in each user's own flags", async () => {
  const tb = await table();
  const lea = tb.world.addUser("Lea", PLAYER); // a player without a server user yet
  await tb.world.deliver(() => {});
  const leas = await tb.actor({ name: "Kira", system: sfrpgSheet(), ownership: { default: 0, [lea]: 3 } });
  // Paul's client lies: "Foundry user Lea is server user <Paul>" (the old announce message).
  tb.player.game.socket.emit("module.vtt-sync", {
    type: "user",
    room: tb.room,
    user: tb.people.Paul.user,
    foundryUser: lea,
  });
  // ...and tries to write Lea's User flags: Foundry refuses (only a GM or Lea may).
  const leaDoc = tb.player.game.users.get(lea);
  await assert.rejects(leaDoc.setFlag("vtt-sync", "login", { room: tb.room, user: tb.people.Paul.user }), /lacks permission/);
  await tb.settle();
  await tb.gm.mod.sheets.link(tb.gm.client.actor(leas));
  await tb.settle();
  assert.notEqual(tb.state.characters[`fvtt-${leas}`].owner, tb.people.Paul.user);
  assert.equal(tb.state.characters[`fvtt-${leas}`].owner, null);
  // Paul's own login is in Paul's User document, written by Paul's client.
  assert.deepEqual(tb.world.users.get(tb.playerUser).flags["vtt-sync"].login, {
    room: tb.room,
    user: tb.people.Paul.user,
    role: "player",
  });
  tb.assertClean();
  tb.close();
});
