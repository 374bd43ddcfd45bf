// Foundry's settings and keybindings as a module meets them: what a
// registration must hold (Foundry throws otherwise), where each scope is
// stored, and who may write it. Each rule names the source it follows.

import { FormApplication, ApplicationV2 } from "./apps.mjs";
import { clone } from "./base.mjs";

/** A browser's localStorage for one origin. Client-scope settings live
 * here as JSON under "<namespace>.<key>" (foundry-vtt-types v12.331.5
 * client/core/settings.d.mts: `storage`, "Each storage interface shares the
 * same API as window.localStorage"; scope `client`: "applied to the browser
 * or client used to access the World"). */
export class Storage {
  constructor() {
    this.map = new Map();
  }
  getItem(key) {
    return this.map.has(key) ? this.map.get(key) : null;
  }
  setItem(key, value) {
    this.map.set(key, String(value));
  }
  removeItem(key) {
    this.map.delete(key);
  }
  get length() {
    return this.map.size;
  }
  key(i) {
    return [...this.map.keys()][i] ?? null;
  }
}

/** A browser: one localStorage per origin (the web's rule), shared by
 * every Foundry user and world opened from that origin in it. */
export class Browser {
  constructor() {
    this.storages = new Map();
  }
  storage(origin) {
    if (!this.storages.has(origin)) this.storages.set(origin, new Storage());
    return this.storages.get(origin);
  }
}

/** The roles that may write world settings: USER_PERMISSIONS.SETTINGS_MODIFY
 * has defaultRole ASSISTANT (foundry-vtt-types v12.331.5 common/
 * constants.d.mts), and BaseSetting's permission "returns
 * user.hasPermission('SETTINGS_MODIFY')" (common/documents/setting.d.mts). */
export const SETTINGS_MODIFY_ROLE = 3;

/**
 * game.settings for one client (ClientSettings: v12 client/core/
 * settings.d.mts; v13 client/helpers/client-settings.d.mts).
 */
export class ClientSettings {
  /** @param {import("./client.mjs").FoundryClient} client */
  constructor(client) {
    this.client = client;
    this.settings = new Map();
    this.menus = new Map();
  }

  get generation() {
    return this.client.world.generation;
  }

  /** ClientSettings#register: namespace and key are required (Foundry
   * throws "You must specify both namespace and key portions of the
   * setting"). The scopes: v12 knows "world" and "client", anything else is
   * stored as "client" (v12 `_SettingConfig.scope: "world" | "client"`,
   * `@defaultValue "client"`); v13 adds "user" (v13 `ClientSettings.Scope`). */
  register(namespace, key, data) {
    if (!namespace || !key) throw new Error("You must specify both namespace and key portions of the setting");
    const scopes = this.generation >= 13 ? ["world", "client", "user"] : ["world", "client"];
    const scope = scopes.includes(data?.scope) ? data.scope : "client";
    this.settings.set(`${namespace}.${key}`, { ...data, namespace, key, scope });
  }

  /** ClientSettings#registerMenu: `type` must be a FormApplication or
   * ApplicationV2 subclass (RegisterSubmenu.type: `(new () =>
   * FormApplication.Any) | (new () => ApplicationV2.Any)`; Foundry v12
   * client/core/settings.js and v13 client/helpers/client-settings.mjs
   * throw otherwise, with this message). */
  registerMenu(namespace, key, data) {
    if (!namespace || !key) throw new Error("You must specify both namespace and key portions of the menu");
    const type = data?.type;
    const ok =
      typeof type === "function" &&
      (type === FormApplication ||
        type === ApplicationV2 ||
        type.prototype instanceof FormApplication ||
        type.prototype instanceof ApplicationV2);
    if (!ok) throw new Error("You must provide a menu type that is a FormApplication or ApplicationV2 instance or subclass");
    this.menus.set(`${namespace}.${key}`, { ...data, namespace, key });
  }

  /** The registration of a setting; reading or writing one that is not
   * registered throws (Foundry: `"${key}" is not a registered game setting`). */
  config(namespace, key) {
    const full = `${namespace}.${key}`;
    const reg = this.settings.get(full);
    if (!reg) throw new Error(`"${full}" is not a registered game setting`);
    return reg;
  }

  get(namespace, key) {
    const full = `${namespace}.${key}`;
    const client = this.client;
    if (full === "core.time") return client.time;
    const reg = this.config(namespace, key);
    let value;
    if (reg.scope === "world") value = client.world.settings.get(full);
    else if (reg.scope === "user") value = client.world.userSettings.get(`${client.userId}:${full}`);
    else {
      const raw = client.storage.getItem(full);
      value = raw === null ? undefined : JSON.parse(raw);
    }
    return clone(value === undefined ? reg.default : value);
  }

  /** A world setting is a Setting document: written by Foundry's server
   * for a user allowed to (SETTINGS_MODIFY), its onChange run on every
   * client; a client setting is written to this origin's localStorage and
   * its onChange run here (ClientSettings#set). */
  async set(namespace, key, value, options = {}) {
    const full = `${namespace}.${key}`;
    const client = this.client;
    const user = client.world.users.get(client.userId);
    if (full === "core.time") {
      if (user.role < SETTINGS_MODIFY_ROLE) throw new Error(`User ${user.name} lacks permission to update Setting core.time`);
      return client.world.setTime(value, options, client.userId);
    }
    const reg = this.config(namespace, key);
    if (reg.scope === "world") {
      if (user.role < SETTINGS_MODIFY_ROLE) throw new Error(`User ${user.name} lacks permission to update Setting ${full}`);
      await client.world.setWorldSetting(full, value, options, client.userId);
      return value;
    }
    if (reg.scope === "user") client.world.userSettings.set(`${client.userId}:${full}`, clone(value));
    else client.storage.setItem(full, JSON.stringify(value));
    reg.onChange?.(clone(value), options);
    return value;
  }
}

/** The modifiers a binding may use (KeyboardManager.MODIFIER_KEYS) and the
 * keys reserved to the browser (KeyboardManager.PROTECTED_KEYS):
 * foundry-vtt-types v12.331.5 client/core/keyboard.d.mts. */
const MODIFIERS = ["Control", "Shift", "Alt"];
const PROTECTED_KEYS = ["F5", "F11", "F12", "PrintScreen", "ScrollLock", "NumLock", "CapsLock"];

/** game.keybindings (ClientKeybindings, v12 client/core/keybindings.d.mts):
 * `register` throws once the bindings are initialized (at `ready`), and
 * `_validateBindings` throws for a binding list that is not an array, a
 * binding without a key, a protected key, or an unknown modifier. */
export class ClientKeybindings {
  constructor() {
    this.actions = new Map();
    this.bindings = undefined; // set at ready (initialize)
  }

  initialize() {
    this.bindings = new Map();
  }

  register(namespace, action, data) {
    if (this.bindings) throw new Error("You cannot register a Keybinding after the init hook");
    for (const list of [data?.editable ?? [], data?.uneditable ?? []]) ClientKeybindings.validate(list);
    this.actions.set(`${namespace}.${action}`, { ...data, namespace, action });
  }

  static validate(values) {
    if (!Array.isArray(values)) throw new Error("Keybinding values must be an array");
    for (const binding of values) {
      if (!binding?.key) throw new Error("Each KeybindingBinding must contain a valid key designation");
      if (PROTECTED_KEYS.includes(binding.key)) {
        throw new Error(`The ${binding.key} key is protected and cannot be used in a keybinding`);
      }
      for (const m of binding.modifiers ?? []) {
        if (!MODIFIERS.includes(m)) throw new Error(`${m} is not a valid modifier key`);
      }
    }
  }
}
