// The module at `init`, under Foundry's registration rules (the stand-in's
// ClientSettings throws where Foundry does): with its UI, as in Foundry.
import assert from "node:assert/strict";
import { test } from "node:test";

import { VttSyncModule } from "../scripts/module.mjs";
import { createUi } from "../scripts/ui.mjs";
import { fakeDocument, presetToken, serverForFile, serverSeconds } from "./harness.mjs";
import { ApplicationV2 } from "./standin.mjs";
import { BrowserLikeWebSocket, VttSyncClient, waitFor } from "./server.mjs";

const table = serverForFile("g");

// Issue 32, item 1: the settings menu's type was a plain class; Foundry's
// registerMenu throws at `init`, and the `clock` setting registered after it
// was missing: every patch then threw "not a registered game setting" and
// world time never reached the server.
test("with its UI, the module registers every setting and an ApplicationV2 menu at init; world time reaches the server", async (tc) => {
  const t = await table();
  const previous = globalThis.document;
  globalThis.document = fakeDocument();
  tc.after(() => (globalThis.document = previous));
  const client = t.world.connect(t.gmUser);
  presetToken(client, t.people.gm.token);
  client.env.WebSocket = BrowserLikeWebSocket;
  const mod = new VttSyncModule(client.env, VttSyncClient, { createUi, clockWindowMs: 100 }).register();
  t.tabs.push({ client, mod, env: client.env, game: client.env.game });
  client.boot();
  assert.deepEqual(client.Hooks.errors, []);
  for (const key of ["serverUrl", "room", "redirectHosts", "chatMessages", "clock"]) {
    assert.ok(client.registered.has(`vtt-sync.${key}`), key);
  }
  const menu = client.menus.get("vtt-sync.connection");
  assert.ok(menu.type.prototype instanceof ApplicationV2);
  assert.equal(menu.restricted, false);
  await waitFor(() => mod.status === "connected", { what: "connected" });
  await t.settle();
  // The other GM tab is not the automation client any more than this one: close it.
  t.world.disconnect(t.tabs[0].client);
  t.tabs[0].mod.client.close();
  t.tabs.shift();
  await t.settle();
  await client.env.game.time.advance(3600);
  await t.settle();
  assert.equal(t.state.clock, 3600);
  assert.equal(serverSeconds({ game: client.env.game }), 3600);
  assert.deepEqual(mod.errors, []);
  t.close();
});
