// The module's settings: registered at `init`, read and written through
// Foundry's game.settings (foundry-vtt-types v12.331.5 client/core/
// settings.d.mts, ClientSettings), and the user's token.

import { MODULE_ID } from "./names.mjs";

/** @typedef {import("./module.mjs").VttSyncModule} VttSyncModule */
/** @typedef {"serverUrl" | "room" | "token" | "redirectHosts" | "chatMessages" | "clock"} SettingKey */

export class Settings {
  /** @param {VttSyncModule} mod */
  constructor(mod) {
    this.mod = mod;
    /** True while `ready` moves an old token: connect() waits for it. */
    this.migrating = false;
  }

  get game() {
    return this.mod.env.game;
  }

  /** Called at `init`: every setting first, the menu last (a menu Foundry
   * refuses must not take the settings registered after it with it). */
  register() {
    const s = this.game.settings;
    const reconnect = () => {
      if (!this.migrating) this.mod.connection.connect(); // ready connects once the token is migrated
    };
    s.register(MODULE_ID, "serverUrl", {
      name: "VTTSYNC.Settings.ServerUrl.Name",
      hint: "VTTSYNC.Settings.ServerUrl.Hint",
      scope: "world",
      config: true,
      type: String,
      default: "",
      onChange: reconnect,
    });
    s.register(MODULE_ID, "room", {
      name: "VTTSYNC.Settings.Room.Name",
      hint: "VTTSYNC.Settings.Room.Hint",
      scope: "world",
      config: true,
      type: String,
      default: "",
      onChange: reconnect,
    });
    // A token is a user's secret: kept in this browser's localStorage
    // (`client` scope, on v12 and v13), never in the world's database. Not
    // `world` (every client reads it), nor v13's `user` (stored in the
    // world's database, on Foundry's server, where a GM or a backup of the
    // world reads it). The same key on v12 and v13, so an upgrade keeps it.
    s.register(MODULE_ID, "token", {
      name: "VTTSYNC.Settings.Token.Name",
      hint: "VTTSYNC.Settings.Token.Hint",
      scope: "client",
      config: true,
      type: String,
      default: "",
      onChange: reconnect,
    });
    // Other hosts a cluster's redirect may send this world's users to.
    s.register(MODULE_ID, "redirectHosts", {
      name: "VTTSYNC.Settings.RedirectHosts.Name",
      hint: "VTTSYNC.Settings.RedirectHosts.Hint",
      scope: "world",
      config: true,
      type: String,
      default: "",
      onChange: reconnect,
    });
    s.register(MODULE_ID, "chatMessages", {
      name: "VTTSYNC.Settings.ChatMessages.Name",
      hint: "VTTSYNC.Settings.ChatMessages.Hint",
      scope: "world",
      config: true,
      type: Boolean,
      default: false,
    });
    // The world time of the server's second 0, per room (game.time = clock + offset).
    s.register(MODULE_ID, "clock", { scope: "world", config: false, type: Object, default: {} });
    const Menu = this.mod.ui?.MenuClass;
    if (!Menu) return;
    try {
      s.registerMenu(MODULE_ID, "connection", {
        name: "VTTSYNC.Menu.Name",
        label: "VTTSYNC.Menu.Label",
        hint: "VTTSYNC.Menu.Hint",
        icon: "fas fa-plug",
        type: Menu,
        restricted: false, // each user tests (and enters) their own token
      });
    } catch (err) {
      this.mod.errors.push(err); // the settings are registered: the module works without its menu
      console.error("vtt-sync: the settings menu was refused", err);
    }
  }

  /** A setting's value, or undefined when it cannot be read.
   * @param {SettingKey} key @returns {any} */
  get(key) {
    try {
      return this.game.settings.get(MODULE_ID, key);
    } catch {
      return undefined;
    }
  }

  /** The world's room id ("" when none is set). */
  get room() {
    return String(this.get("room") || "");
  }

  /** This user's token ("" when none). */
  token() {
    return String(this.get("token") || "").trim();
  }

  /** Save this user's token (the menu's Save). @param {string} value */
  async setToken(value) {
    if (value !== this.get("token")) await this.game.settings.set(MODULE_ID, "token", value);
  }

  /** Any setting, of this module or a system's (pf1's healthConfig), or
   * undefined. @returns {(ns: string, key: string) => unknown} */
  getter() {
    return (ns, key) => {
      try {
        return this.game.settings.get(/** @type {any} */ (ns), /** @type {any} */ (key));
      } catch {
        return undefined;
      }
    };
  }

  /**
   * Up to 0.1, on v13, the token was a `user` setting: stored in the world's
   * database. It moves to this browser's storage (the `client` setting of
   * the same key) and the world's copy is deleted; a v12 world's token was
   * already a client setting under that key, so an upgrade keeps it. When
   * no token is found, connect() asks for it (once).
   */
  async migrateToken() {
    const storage = /** @type {any} */ (this.game.settings?.storage?.get?.("world"));
    const me = this.game.user?.id;
    if (!storage || !me) return;
    const doc = storage.find?.((/** @type {any} */ d) => d.key === `${MODULE_ID}.token` && d.user === me);
    if (!doc) return;
    let value = doc.value;
    if (typeof value === "string") {
      try {
        value = JSON.parse(value);
      } catch {
        /* a plain string */
      }
    }
    if (!this.token() && value) {
      await this.game.settings.set(MODULE_ID, "token", String(value));
      this.mod.notify("info", "TokenMoved");
    }
    await doc.delete?.();
  }
}
