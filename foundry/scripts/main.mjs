// Foundry's entry point (module.json esmodules). The client is
// client_stub/web/vtt-sync-client.js, copied here unchanged by build.py:
// this file only exists in the built module.
// @ts-expect-error build.py copies the client here (client_stub/web/vtt-sync-client.js): not in the sources tsc reads
import { VttSyncClient } from "./vtt-sync-client.js";
import { MODULE_ID, VttSyncModule } from "./module.mjs";
import { createUi } from "./ui.mjs";

const vttSync = new VttSyncModule(/** @type {VttSyncEnv} */ (/** @type {unknown} */ (globalThis)), VttSyncClient, {
  createUi,
}).register();

// For macros and other modules: game.modules.get("vtt-sync").api (README, "API").
Hooks.once("init", () => {
  const mod = game.modules.get(MODULE_ID);
  // @ts-expect-error `api` is the documented place for a module's API (Module has no such field in the v12 types)
  if (mod) mod.api = vttSync.api();
});
