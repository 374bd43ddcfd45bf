// Where a user's token is kept: this browser's storage (a `client`
// setting, never the world's database), one per Foundry user and world. A
// client setting is one value per browser origin, shared by every user and
// world opened from it (standin/settings.mjs, Browser): the module keeps
// one token per "<world>/<user>" in it and reads its own.
import assert from "node:assert/strict";
import { test } from "node:test";

import { VttSyncModule } from "../scripts/module.mjs";
import { GM, PLAYER, serverForFile } from "./harness.mjs";
import { Browser, World } from "./standin.mjs";
import { BrowserLikeWebSocket, VttSyncClient, waitFor } from "./server.mjs";

const table = serverForFile("o");
const texts = (client) => client.notifications.map((n) => n.text).join("\n");
const tick = () => new Promise((r) => setTimeout(r, 20));

/** A client of `world` for `userId` in `browser`, running the module. */
function boot(world, userId, browser, booted) {
  const client = world.connect(userId, { browser });
  client.env.WebSocket = BrowserLikeWebSocket;
  const mod = new VttSyncModule(client.env, VttSyncClient).register();
  client.boot();
  booted.push(mod);
  return { client, mod };
}

// Issue 32, item 6: the token was one client setting per browser origin: a
// player on a browser where the GM once connected acted with GM authority.
test("the token is per Foundry user and world: a player on the GM's browser, or another world, does not get the GM's", async (tc) => {
  const t = await table();
  const booted = [];
  tc.after(() => booted.forEach((m) => m.client?.close()));
  const browser = new Browser(); // the table's laptop
  const maya = boot(t.world, t.gmUser, browser, booted);
  await maya.mod.settings.setToken(t.people.gm.token); // the connection menu's Save
  await waitFor(() => maya.mod.status === "connected", { what: "Maya connected" });
  assert.equal(maya.mod.client.role, "gm");
  maya.mod.client.close();
  t.world.disconnect(maya.client);
  // Paul logs in on the same browser: no token of his yet.
  const paul = boot(t.world, t.playerUser, browser, booted);
  await tick();
  assert.equal(paul.mod.client, null); // nothing sent, no GM authority
  assert.match(texts(paul.client), /enter your own token/);
  await paul.mod.settings.setToken(t.people.Paul.token);
  await waitFor(() => paul.mod.status === "connected", { what: "Paul connected" });
  assert.equal(paul.mod.client.role, "player");
  // Another world of the same Foundry (the same origin), Maya again: no token there.
  const other = new World({ origin: t.world.origin });
  other.settings.set("vtt-sync.serverUrl", t.server.url);
  other.settings.set("vtt-sync.room", t.room);
  const elsewhere = boot(other, other.addUser("Maya", GM), browser, booted);
  await tick();
  assert.equal(elsewhere.mod.client, null);
  // Back in the first world, Maya's token is still hers.
  paul.mod.client.close();
  t.world.disconnect(paul.client);
  const again = boot(t.world, t.gmUser, browser, booted);
  await waitFor(() => again.mod.status === "connected", { what: "Maya again" });
  assert.equal(again.mod.client.user, t.people.gm.user);
  t.close();
});

test("the token a browser kept for everyone (before 0.2.0) is removed, unread, and the user told; a v12 -> v13 upgrade keeps the user's", async (tc) => {
  const booted = [];
  tc.after(() => booted.forEach((m) => m.client?.close()));
  const url = "ws://127.0.0.1:9"; // nothing listens: only the settings are looked at
  const browser = new Browser();
  const v12 = new World({ generation: 12, id: "saga" });
  const maya = v12.addUser("Maya", GM);
  v12.settings.set("vtt-sync.serverUrl", url);
  v12.settings.set("vtt-sync.room", "r1");
  browser.storage(v12.origin).setItem("vtt-sync.token", JSON.stringify("whose-token")); // where it was before 0.2.0
  const a = boot(v12, maya, browser, booted);
  await tick();
  assert.equal(browser.storage(v12.origin).getItem("vtt-sync.token"), null);
  assert.equal(a.mod.client, null); // not used
  assert.match(texts(a.client), /keeps each user's token for one world now/);
  await a.mod.settings.setToken("tok-12");
  await tick();
  assert.equal(a.mod.client?.url, url);
  a.mod.client?.close();
  // The same world and browser, Foundry upgraded to v13.
  const v13 = new World({ generation: 13, id: "saga" });
  v13.users = v12.users;
  v13.settings = v12.settings;
  const b = boot(v13, maya, browser, booted);
  await tick();
  assert.equal(b.mod.settings.token(), "tok-12");
  assert.equal(b.mod.client?.url, url);
  b.mod.client?.close();
});

test("0.1.0's v13 `user` setting (the world's database) moves to the user's place in this browser; nothing anywhere is asked for once", async (tc) => {
  const booted = [];
  tc.after(() => booted.forEach((m) => m.client?.close()));
  const url = "ws://127.0.0.1:9";
  const w = new World({ generation: 13 });
  const lea = w.addUser("Lea", PLAYER);
  w.settings.set("vtt-sync.serverUrl", url);
  w.settings.set("vtt-sync.room", "r1");
  w.userSettings.set(`${lea}:vtt-sync.token`, "tok-db");
  const c = boot(w, lea, new Browser(), booted);
  await waitFor(() => c.mod.client, { what: "connect after the migration" });
  await tick();
  assert.equal(c.mod.client.connections + c.mod.client._attempt <= 1, true); // one client, not two
  assert.equal(c.mod.settings.token(), "tok-db");
  assert.equal(w.userSettings.has(`${lea}:vtt-sync.token`), false); // no copy left in the world
  assert.match(texts(c.client), /moved from the world's database to this browser/);
  c.mod.client?.close();
  const d = boot(w, w.addUser("Noa", PLAYER), new Browser(), booted);
  await tick();
  assert.equal(d.mod.client, null);
  assert.equal(texts(d.client).match(/enter your own token/g)?.length, 1);
});
