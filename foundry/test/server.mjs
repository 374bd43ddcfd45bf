// A real vtt-sync server for the tests: `python3 -m sync_server serve` on
// 127.0.0.1, port 0 (or a given port, to restart on the same one), a
// temporary data directory, an admin token from the environment; rooms made
// with ordinary commands. Every wait is bounded.

import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

import { VttSyncClient } from "../../client_stub/web/vtt-sync-client.js";

if (typeof globalThis.WebSocket !== "function") {
  throw new Error(
    "these tests need a WebSocket: run Node 20 with --experimental-websocket (Node 22+ has one)",
  );
}

export const REPO = fileURLToPath(new URL("../../", import.meta.url));
const START_TIMEOUT_MS = 30_000;
const STOP_TIMEOUT_MS = 10_000;

export { VttSyncClient };

export async function startServer({ dataDir = null, port = 0, admin = null } = {}) {
  const dir = dataDir ?? mkdtempSync(join(tmpdir(), "vtt-sync-foundry-"));
  const adminToken = admin ?? randomBytes(24).toString("base64url");
  const proc = spawn(
    "python3",
    ["-m", "sync_server", "serve", "--host", "127.0.0.1", "--port", String(port), "--data-dir", dir],
    {
      cwd: REPO,
      env: { ...process.env, VTT_SYNC_ADMIN_TOKEN: adminToken, PYTHONUNBUFFERED: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    },
  );
  let output = "";
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), START_TIMEOUT_MS);
    const onData = (chunk) => {
      output += chunk;
      const m = /vtt-sync listening on (ws:\/\/\S+)/.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    };
    proc.stdout.on("data", onData);
    proc.stderr.on("data", (chunk) => (output += chunk));
    proc.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code}):\n${output}`));
    });
  });
  const actualPort = Number(new URL(url.replace(/^ws/, "http")).port);
  return {
    url,
    port: actualPort,
    dir,
    admin: adminToken,
    async stop({ keepData = false } = {}) {
      if (proc.exitCode === null) {
        const exited = new Promise((r) => proc.once("exit", r));
        proc.kill("SIGTERM");
        const timer = setTimeout(() => proc.kill("SIGKILL"), STOP_TIMEOUT_MS);
        await exited;
        clearTimeout(timer);
      }
      if (!keepData && !dataDir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Node 20's experimental WebSocket fires `error` but never `close` when a
 * connection cannot be made (the server is down), and stays CONNECTING;
 * browsers fire both, as the WHATWG WebSocket spec says, and the client
 * (like any browser code) waits for `close` to retry. This subclass adds the
 * missing close event, so the tests see a browser's behaviour.
 */
export class BrowserLikeWebSocket extends globalThis.WebSocket {
  constructor(url, protocols) {
    super(url, protocols);
    let closed = false;
    this.addEventListener("close", () => (closed = true));
    this.addEventListener("error", () => {
      setTimeout(() => {
        if (!closed && this.readyState !== 1) {
          closed = true;
          this.onclose?.({ code: 1006, reason: "", wasClean: false });
        }
      }, 0);
    });
  }
}

/** A connected client; `room` null for the admin session. */
export async function connect(url, token, room) {
  const c = new VttSyncClient({
    url,
    token,
    room,
    backoffInitial: 50,
    backoffMax: 500,
    WebSocketImpl: BrowserLikeWebSocket,
  });
  await c.connect();
  return c;
}

/** A new room with a GM and `players` players: their user ids and tokens. */
export async function makeRoom(server, room, players = ["Paul"]) {
  const admin = await connect(server.url, server.admin, null);
  const made = await admin.command("create_room", { room, name: `Table ${room}`, gm_name: "Maya" });
  admin.close();
  const gm = await connect(server.url, made.result.gm_token, room);
  const people = { gm: { user: made.result.user, token: made.result.gm_token } };
  for (const name of players) {
    const ack = await gm.command("add_user", { name, role: "player" });
    people[name] = { user: ack.result.user, token: ack.result.token };
  }
  gm.close();
  return people;
}

/** Wait (bounded) until `check()` is truthy; returns its value. */
export async function waitFor(check, { timeout = 10_000, what = "condition" } = {}) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
