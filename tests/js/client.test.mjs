// The browser client agrees with the protocol vectors that the Python side
// generates from sync_server/wire/protocol.py (tests/vectors/protocol.json).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import {
  CLOSE_CODES,
  FINAL_CLOSE_CODES,
  MAX_FRAME,
  MAX_REDIRECTS,
  PROTO,
  SUBPROTOCOL,
  applyOps,
  cmdFrame,
  helloFrame,
  syncFrame,
} from "../../client_stub/web/vtt-sync-client.js";

const vectors = JSON.parse(
  readFileSync(new URL("../vectors/protocol.json", import.meta.url), "utf8"),
);

test("names and numbers match the protocol", () => {
  assert.equal(PROTO, vectors.proto);
  assert.equal(SUBPROTOCOL, vectors.subprotocols.json);
  assert.equal(MAX_FRAME, vectors.max_frame_bytes);
  assert.equal(MAX_REDIRECTS, vectors.max_redirects);
  assert.deepEqual({ ...CLOSE_CODES }, vectors.close_codes);
  assert.deepEqual(
    Object.keys(FINAL_CLOSE_CODES).map(Number).sort(),
    vectors.final_close_codes,
  );
});

test("frame builders build the protocol's frames", () => {
  const f = vectors.frames;
  assert.deepEqual(helloFrame("TOKEN", "r1", 41), f.hello);
  assert.deepEqual(helloFrame("TOKEN"), f.hello_admin);
  assert.deepEqual(cmdFrame("c-17", "damage", { char: "c1", amount: 3 }, 57), f.cmd);
  assert.deepEqual(cmdFrame("c-18", "combat_end"), f.cmd_no_expect);
  assert.deepEqual(syncFrame(41), f.sync);
  assert.deepEqual(syncFrame(41, "q1"), f.sync_with_id);
});

test("patch ops apply as the Python mirror applies them", () => {
  const state = { a: { b: 1 }, c: [1] };
  applyOps(state, [
    ["set", ["a", "b"], 2],
    ["set", ["d"], { e: 3 }],
    ["del", ["c"]],
  ]);
  assert.deepEqual(state, { a: { b: 2 }, d: { e: 3 } });
});

// A stand-in WebSocket: each URL has a script of what the "server" does.
function fakeSocketClass(nodes, log) {
  return class FakeWS {
    constructor(url, protocols) {
      this.url = url;
      this.protocols = protocols;
      this.readyState = 0;
      log.push(url);
      setTimeout(() => {
        this.readyState = 1;
        this.onopen?.();
      }, 0);
    }
    send(text) {
      const hello = JSON.parse(text);
      const node = nodes[this.url];
      setTimeout(() => node(this, hello), 0);
    }
    close(code = 1000, reason = "") {
      if (this.readyState === 3) return;
      this.readyState = 3;
      setTimeout(() => this.onclose?.({ code, reason }), 0);
    }
    deliver(frame) {
      this.onmessage?.({ data: JSON.stringify(frame) });
    }
  };
}

const redirectTo = (url) => (ws) => {
  ws.deliver({ t: "redirect", url });
  ws.close(vectors.close_codes.redirect, "served elsewhere");
};
const welcoming = (ws, hello) =>
  ws.deliver({ t: "welcome", room: hello.room, user: "u4", role: "observer", v: 3, state: {} });

test("the browser client follows a redirect with the same hello", async () => {
  const log = [];
  const { VttSyncClient } = await import("../../client_stub/web/vtt-sync-client.js");
  const nodes = { "ws://a/": redirectTo("ws://b/"), "ws://b/": welcoming };
  const c = new VttSyncClient({
    url: "ws://a/",
    token: "T",
    room: "r1",
    WebSocketImpl: fakeSocketClass(nodes, log),
  });
  await c.connect();
  assert.deepEqual(log, ["ws://a/", "ws://b/"]);
  assert.equal(c.version, 3);
  c.close();
});

test("a redirect loop is reported after MAX_REDIRECTS hops, then retried later", async () => {
  const log = [];
  const statuses = [];
  const { VttSyncClient } = await import("../../client_stub/web/vtt-sync-client.js");
  const nodes = { "ws://a/": redirectTo("ws://a/") };
  const c = new VttSyncClient({
    url: "ws://a/",
    token: "T",
    room: "r1",
    backoffInitial: 60000,
    WebSocketImpl: fakeSocketClass(nodes, log),
  });
  c.on("status", (status, detail) => statuses.push([status, detail]));
  c.connect().catch(() => {});
  while (!statuses.some(([s]) => s === "disconnected")) await new Promise((r) => setTimeout(r, 5));
  assert.equal(log.length, 1 + MAX_REDIRECTS);
  const [, detail] = statuses.find(([s]) => s === "disconnected");
  assert.match(detail, new RegExp(`redirected ${MAX_REDIRECTS + 1} times`));
  c.close();
});

test("withdraw takes back a command never sent, and only such a one", async () => {
  const { VttSyncClient, CommandError } = await import("../../client_stub/web/vtt-sync-client.js");
  const sent = [];
  const nodes = {
    "ws://a/": (ws, frame) => {
      if (frame.t === "hello") welcoming(ws, frame);
      else sent.push(frame.id); // commands: never answered
    },
  };
  const c = new VttSyncClient({ url: "ws://a/", token: "T", room: "r1", WebSocketImpl: fakeSocketClass(nodes, []) });
  const offline = c.command("advance_clock", { seconds: 6 }, { id: "off-1" }); // before any connection
  assert.equal(c.withdraw("off-1"), true);
  await assert.rejects(offline, (err) => err instanceof CommandError && err.code === "expired");
  assert.deepEqual(c.pendingCommands, []);
  await c.connect();
  const online = c.command("advance_clock", { seconds: 6 }, { id: "on-1" });
  online.catch(() => {});
  await new Promise((resolve) => setTimeout(resolve, 5));
  assert.deepEqual(sent, ["on-1"]); // the withdrawn one never went
  assert.equal(c.withdraw("on-1"), false); // sent: it waits for its answer
  assert.deepEqual(c.pendingCommands, ["on-1"]);
  c.close();
});
