// The module's settings: registered at `init`, read and written through
// Foundry's game.settings (foundry-vtt-types v12.331.5 client/core/
// settings.d.mts, ClientSettings), and the user's token.

import { MODULE_ID } from "./names.mjs";

/** @typedef {import("./module.mjs").VttSyncModule} VttSyncModule */
/** @typedef {"serverUrl" | "room" | "tokens" | "redirectHosts" | "chatMessages" | "clock"} SettingKey */

/** Where the module kept the token before 0.2.0: a client setting, so one
 * value per browser origin, shared by every Foundry user and world opened
 * from it (a player on a browser where the GM once connected acted as the
 * GM). Read once, to remove it. */
export const LEGACY_TOKEN_KEY = `${MODULE_ID}.token`;

export class Settings {
  /** @param {VttSyncModule} mod */
  constructor(mod) {
    this.mod = mod;
    /** True while `ready` moves an old token: connect() waits for it. */
    this.migrating = false;
    /** This user's token when last read (a change of it reconnects). */
    this.lastToken = "";
  }

  get game() {
    return this.mod.env.game;
  }

  /** Called at `init`: every setting first, the menu last (a menu Foundry
   * refuses must not take the settings registered after it with it). */
  register() {
    const s = this.game.settings;
    if (!s) return;
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
    // A token is a user's secret, kept in this browser's localStorage
    // (`client` scope, on v12 and v13), never in the world's database: not
    // `world` (every client reads it), nor v13's `user` (stored in the
    // world's database, on Foundry's server, where a GM or a backup of the
    // world reads it). A client setting is one value per browser origin,
    // shared by every Foundry user and world opened from it: the setting
    // holds one token per world and user ("<world id>/<user id>"), and each
    // client reads its own. Entered in the connection menu only (not shown
    // in Foundry's settings window).
    s.register(MODULE_ID, "tokens", {
      scope: "client",
      config: false,
      type: Object,
      default: {},
      onChange: () => {
        const before = this.lastToken;
        if (this.token() !== before) reconnect(); // another user's token in this browser is not ours
      },
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

  /** A setting's value, or undefined when it cannot be read (before init).
   * @template {SettingKey} K @param {K} key @returns {ClientSettings.SettingInitializedType<"vtt-sync", K> | undefined} */
  get(key) {
    try {
      return this.game.settings?.get(MODULE_ID, key);
    } catch {
      return undefined;
    }
  }

  /** The world's room id ("" when none is set). */
  get room() {
    return String(this.get("room") || "");
  }

  /** This user's key in the `tokens` setting: the world, then the user. */
  tokenKey() {
    return `${this.game.world?.id ?? ""}/${this.game.user?.id ?? ""}`;
  }

  /** This user's token in this world ("" when none). */
  token() {
    const tokens = this.get("tokens") ?? {};
    this.lastToken = String(tokens[this.tokenKey()] ?? "").trim();
    return this.lastToken;
  }

  /** Save this user's token for this world (the menu's Save; "" forgets it).
   * @param {string} value */
  async setToken(value) {
    const tokens = { ...(this.get("tokens") ?? {}) };
    const key = this.tokenKey();
    const token = String(value ?? "").trim();
    if ((tokens[key] ?? "") === token) return;
    if (token) tokens[key] = token;
    else delete tokens[key];
    await this.game.settings?.set(MODULE_ID, "tokens", tokens);
  }

  /** The systems' settings the adapters read (systems.mjs: pf1's
   * healthConfig), or undefined (another system: not registered).
   * @returns {import("./systems.mjs").SettingsReader} */
  getter() {
    return (ns, key) => {
      if (ns !== "pf1" || key !== "healthConfig") return undefined;
      try {
        return this.game.settings?.get("pf1", "healthConfig");
      } catch {
        return undefined;
      }
    };
  }

  /**
   * Tokens kept where older versions put them move to this user's place:
   * - the client setting `token` before 0.2.0 (one per browser origin, whoever's it
   *   was) is removed from this browser, unread: it may be another user's,
   *   or another world's; the user is told to enter their own again;
   * - 0.1.0's v13 `user` setting (in the world's database, this user's own)
   *   moves to this user's place in this browser, and the world's copy is
   *   deleted.
   * When no token is found, connect() asks for it (once).
   */
  async migrateToken() {
    const store = this.mod.env.localStorage;
    if (store?.getItem(LEGACY_TOKEN_KEY) !== null && store?.getItem(LEGACY_TOKEN_KEY) !== undefined) {
      store.removeItem(LEGACY_TOKEN_KEY);
      this.mod.notify("warn", "TokenPerUser");
    }
    // v13's WorldSettings: the world's Setting documents; a `user` setting
    // is one with a `user` field (foundry-vtt-types v13.345.1 common/
    // documents/setting.d.mts), its value the JSON text of the value.
    const storage = this.game.settings?.storage.get("world");
    const me = this.game.user?.id;
    if (!storage || "getItem" in storage || !me) return; // a browser's Storage: no world documents
    const doc = Array.from(storage).find((d) => d.key === `${MODULE_ID}.token` && "user" in d && d.user === me);
    if (!doc) return;
    /** @type {unknown} */
    let value = doc.value;
    if (typeof value === "string") {
      try {
        value = JSON.parse(value);
      } catch {
        /* a plain string */
      }
    }
    if (!this.token() && value) {
      await this.setToken(String(value));
      this.mod.notify("info", "TokenMoved");
    }
    await doc.delete();
  }
}
