// The browser client agrees with the protocol vectors that the Python side
// generates from sync_server/protocol.py (tests/vectors/protocol.json).
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
