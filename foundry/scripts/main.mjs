// Foundry's entry point (module.json esmodules). The client is
// client_stub/web/vtt-sync-client.js, copied here unchanged by build.py:
// this file only exists in the built module.
import { VttSyncClient } from "./vtt-sync-client.js";
import { MODULE_ID, VttSyncModule } from "./module.mjs";
import { createUi } from "./ui.mjs";

const vttSync = new VttSyncModule(globalThis, VttSyncClient, { createUi }).register();

// For macros and other modules: game.modules.get("vtt-sync").api
Hooks.once("init", () => {
  const mod = game.modules.get(MODULE_ID);
  if (mod) mod.api = vttSync;
});
