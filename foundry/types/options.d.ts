// The module's own option key on Foundry's database operations (names.mjs
// TAG, "vttSync"): Foundry passes an operation's options to the hooks of
// every client, and the module marks its own writes with it so that its
// hooks ignore their echo. Declared where foundry-vtt-types v12.331.5
// declares the operation's options (common/abstract/_types.d.mts,
// DatabaseUpdateOperation), which every document's update and
// game.settings.set options derive from.
import "../node_modules/@league-of-foundry-developers/foundry-vtt-types/src/foundry/common/abstract/_types.d.mts";

declare module "../node_modules/@league-of-foundry-developers/foundry-vtt-types/src/foundry/common/abstract/_types.d.mts" {
  interface DatabaseUpdateOperation {
    /** An update the vtt-sync module made (its hooks ignore it). */
    vttSync?: boolean;
    /** A combat update's time advance as v12's combatTurn/combatRound hooks
     * name it (client/hooks.d.mts) and sfrpg's CombatSFRPG passes it
     * (src/module/combat/combat.js); Foundry makes `worldTime` of it. */
    advanceTime?: number;
  }
}
