// The names the module's files share, each written once: the module's id,
// the option key that tags the module's own document writes, and the
// server's conditions (docs/rules.md).

/** The module's id: its folder, its settings' and flags' namespace. */
export const MODULE_ID = "vtt-sync";

/** The option key that marks the module's own writes, so that its hooks
 * ignore their echo (update options travel with the update to every client). */
export const TAG = "vttSync";

/** The server's conditions, in the order a table reads them. */
export const CONDITIONS = Object.freeze(["conscious", "dying", "stable", "dead"]);
