// Foundry's entry point (module.json esmodules). The client is
// client_stub/web/vtt-sync-client.js, copied here unchanged by build.py:
// this file only exists in the built module.
import { VttSyncClient } from "./vtt-sync-client.js"; // build.py copies it here (types/built/ declares it)
import { MODULE_ID, VttSyncModule } from "./module.mjs";
import { createUi } from "./ui.mjs";

/** Foundry's globals, read when the module uses them (tests pass a stand-in). @type {VttSyncEnv} */
const env = {
  get Hooks() {
    return Hooks;
  },
  get game() {
    return game;
  },
  get ui() {
    return ui;
  },
  get CONFIG() {
    return CONFIG;
  },
  get Actor() {
    return CONFIG.Actor.documentClass;
  },
  get ChatMessage() {
    return ChatMessage;
  },
  get Dialog() {
    return Dialog;
  },
  get foundry() {
    return foundry;
  },
  get WebSocket() {
    return WebSocket;
  },
  get location() {
    return location;
  },
  get localStorage() {
    return localStorage;
  },
};

const vttSync = new VttSyncModule(env, VttSyncClient, { createUi }).register();

// For macros and other modules: game.modules.get("vtt-sync").api (README, "API").
Hooks.once("init", () => {
  const mod = game.modules?.get(MODULE_ID);
  if (mod) mod.api = vttSync.api(); // the documented place of a module's API (ModuleConfig, types/env.d.ts)
});
