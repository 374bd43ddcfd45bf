// A stand-in of Foundry VTT for the module's tests: a "world" (what
// Foundry's server holds and broadcasts) and "clients" (browser tabs), each
// with its own Hooks, game, ui and CONFIG, as the module sees them. It
// enforces Foundry's rules, not ours: each behaviour names the Foundry or
// system source it models (shared facts in foundry/README.md, "Which real
// behaviour the stand-in copies"). Its pieces:
//   standin/base.mjs       expandObject/mergeObject/diffObject, Collection, Hooks
//   standin/settings.mjs   settings and keybindings: registration rules, scopes, per-origin storage
//   standin/apps.mjs       FormApplication, ApplicationV2, dialogs, sfrpg's AppV1 actor sheet
//   standin/documents.mjs  actors (and the systems' condition APIs), users, combatants
//   standin/combat.mjs     core's Combat per generation (history, hook order), CombatSFRPG
//   standin/client.mjs     a client: env, the update paths of the initiating client
//   standin/world.mjs      the world: permissions, commits, deliveries
// Real Foundry's timing, its sheets and its system code are what it cannot
// show (foundry/README.md, "What the stand-in cannot prove").

export { Collection, diff, expand, merge, renderedText } from "./standin/base.mjs";
export { ApplicationV2, Dialog, DialogV2, FormApplication, SfrpgActorSheet } from "./standin/apps.mjs";
export { FoundryClient } from "./standin/client.mjs";
export { ClientCombat, SfrpgCombat } from "./standin/combat.mjs";
export { Browser, ClientKeybindings, ClientSettings, Storage } from "./standin/settings.mjs";
export { World } from "./standin/world.mjs";
