// Foundry users and the server's users: which server user each Foundry
// user's client logged in as (the owners of the actors follow), which
// client sends automation, and what the users are told when none does.

import { MODULE_ID } from "./names.mjs";

/** @typedef {import("./module.mjs").VttSyncModule} VttSyncModule */
/** The server user a Foundry user's client logged in as (its User flag).
 * @typedef {{room: string, user: string, role?: string}} Login */

export class Users {
  /** @param {VttSyncModule} mod */
  constructor(mod) {
    this.mod = mod;
    this.was = false; // this client sent automation at the last look
  }

  get game() {
    return this.mod.env.game;
  }

  /** The world's users (none before Foundry's setup).
   * @returns {User.Implementation[]} */
  all() {
    const users = this.game.users;
    return users ? Array.from(users) : [];
  }

  /** @param {typeof Hooks} H */
  register(H) {
    H.on("userConnected", () => this.onUsersChanged());
    /** @type {Hooks.UpdateDocument<typeof User>} */
    const onUpdateUser = (user, changed) => this.onUpdateUser(changed);
    H.on("updateUser", onUpdateUser);
  }

  // ------------------------------------------------------------ logins

  /**
   * Each client records which server user it logged in as, in its own
   * Foundry User document's flags (`flags["vtt-sync"].login = {room, user,
   * role}`): Foundry lets a non-GM user update only their own User
   * (BaseUser's update permission), so no player can speak for another.
   * A socket message could come from anyone claiming anything: none is
   * trusted. Linking an actor owned by a player makes that player's server
   * user its owner; a GM's login says its client can send automation.
   */
  announce() {
    const me = this.game.user;
    const client = this.mod.client;
    if (!client?.user || !me) return;
    /** @type {Login} */
    const login = { room: this.mod.room, user: client.user, role: client.role ?? "" };
    const now = this.loginFlag(me);
    if (now?.room === login.room && now?.user === login.user && now?.role === login.role) return;
    Promise.resolve(me.setFlag(MODULE_ID, "login", login)).catch((err) => this.mod.report(err));
  }

  /** This client cannot log in (no token, a refused one): its login is
   * withdrawn, so that no one counts on it. */
  withdraw() {
    const me = this.game.user;
    if (!me || !this.loginFlag(me)) return;
    Promise.resolve(me.setFlag(MODULE_ID, "login", null)).catch((err) => this.mod.report(err));
  }

  /** @param {User.Implementation} fu @returns {Login | null} */
  loginFlag(fu) {
    return fu.getFlag(MODULE_ID, "login") ?? null;
  }

  /** A User document changed: a login may be known (or withdrawn) now.
   * @param {object} changed */
  onUpdateUser(changed) {
    const flags = "flags" in changed ? changed.flags : undefined;
    if (!(typeof flags === "object" && flags !== null && MODULE_ID in flags) && !(`flags.${MODULE_ID}` in changed)) return;
    this.onUsersChanged();
    if (!this.mod.isAutomation()) return;
    // A player's server user became known: the owners of the actors follow.
    this.mod.enqueue(async () => {
      for (const actor of this.mod.sheets.linkedActors()) await this.mod.sheets.push(actor);
    });
  }

  /** The server user a Foundry user logged in as in this room, from that
   * user's own flags, if the room has such a user of the same kind (a
   * player cannot stand for the GM).
   * @param {User.Implementation} fu */
  loginOf(fu) {
    const login = this.loginFlag(fu);
    if (!login || login.room !== this.mod.room) return null;
    const u = this.mod.client?.state?.users?.[login.user];
    if (!u || (u.role === "gm") !== Boolean(fu.isGM)) return null;
    return login.user;
  }

  /** The server user owning an actor: the server user of a player owning
   * it; null when no player owns it; undefined when a player owns it but
   * has not connected yet (the server's owner is then left alone).
   * @param {Actor.Implementation} actor @returns {string | null | undefined} */
  ownerOf(actor) {
    const players = this.all().filter((u) => !u.isGM && actor.testUserPermission(u, "OWNER"));
    if (!players.length) return null;
    for (const u of players) {
      const user = this.loginOf(u);
      if (user) return user;
    }
    return undefined;
  }

  // ------------------------------------------------------------ automation

  /** Is this client one the server welcomed as a GM of the room, still connected or retrying? */
  welcomedAsGm() {
    const c = this.mod.client;
    return Boolean(c && c.role === "gm" && c.status !== "failed" && c.status !== "closed" && this.game.user?.isGM);
  }

  /**
   * The Foundry user whose client sends automation: of the active GMs
   * whose client the server welcomed as a GM of this room (this client: its
   * own connection; the others: their `login` flag), the first in the
   * order Foundry picks its active GM (Users#activeGM: the highest role,
   * then the lowest id). Null when there is none: no automation.
   */
  automationUser() {
    const room = this.mod.room;
    if (!room) return null;
    /** @param {User.Implementation} u */
    const ok = (u) => {
      if (!u.active || !u.isGM) return false;
      if (u.isSelf) return this.welcomedAsGm();
      const login = this.loginFlag(u);
      return login?.room === room && login?.role === "gm";
    };
    const gms = this.all()
      .filter(ok)
      .sort((a, b) => b.role - a.role || ((a.id ?? "") < (b.id ?? "") ? -1 : 1));
    return gms[0] ?? null;
  }

  /** Does some client send automation (from anyone's view)? */
  present() {
    return this.automationUser() !== null;
  }

  /** Is this client the one that sends automation? (Also while the
   * connection is down: what happens meanwhile is sent when it is back,
   * the client keeps the commands and resends them under their ids.) */
  isSelf() {
    return this.welcomedAsGm() && this.automationUser()?.isSelf === true;
  }

  /** A user connected or left, or a login changed: the automation client may
   * have changed; when there is one again, the next absence is told again. */
  onUsersChanged() {
    if (this.present()) this.mod.warned.delete("no-gm");
    const now = this.isSelf();
    if (now && !this.was) this.mod.becomeAutomation();
    this.was = now;
  }

  /** A turn moves in a room combat while no client sends automation: the
   * user who moved it is told, once, that the server does not get it now. */
  noAutomation() {
    this.mod.warnOnce("no-gm", "NoGm");
  }
}
