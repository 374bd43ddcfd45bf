// tsc --checkJs --strict of the module against Foundry's own type
// definitions (@league-of-foundry-developers/foundry-vtt-types 12.331.x,
// from npm: scripts/install-test-deps runs `npm ci` here), types/v13.d.ts
// for the v13-only APIs, types/vtt-sync.d.ts for the server's state and the
// client: hook names and their arguments, document methods, setting keys,
// flags. No escape hatch: no `any`, no @ts-ignore/@ts-expect-error, no cast
// through `unknown`; the client's declaration names members the real client
// has.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { VttSyncClient } from "../../client_stub/web/vtt-sync-client.js";

const FOUNDRY = fileURLToPath(new URL("../", import.meta.url));
const TSC = join(FOUNDRY, "node_modules/typescript/bin/tsc");
const TYPES = join(FOUNDRY, "node_modules/@league-of-foundry-developers/foundry-vtt-types/package.json");
const SCRIPTS = join(FOUNDRY, "scripts");

test("the module type-checks, strict, against foundry-vtt-types (v12) and our v13 declarations, with no error", () => {
  assert.ok(
    existsSync(TSC) && existsSync(TYPES),
    "foundry/node_modules is missing: run scripts/install-test-deps (npm ci in foundry/)",
  );
  const config = JSON.parse(readFileSync(join(FOUNDRY, "tsconfig.json"), "utf8"));
  assert.equal(config.compilerOptions.strict, true);
  assert.equal(config.compilerOptions.checkJs, true);
  assert.deepEqual(config.include.filter((p) => p.startsWith("scripts")), ["scripts/*.mjs"]);
  const r = spawnSync(process.execPath, [TSC, "-p", join(FOUNDRY, "tsconfig.json")], {
    cwd: FOUNDRY,
    encoding: "utf8",
    timeout: 240_000,
  });
  assert.equal(r.status, 0, `tsc found errors:\n${r.stdout}${r.stderr}`);
});

test("no escape hatch in the scripts: no any, no @ts- directive, no cast through unknown", () => {
  const found = [];
  for (const name of readdirSync(SCRIPTS).filter((n) => n.endsWith(".mjs"))) {
    const lines = readFileSync(join(SCRIPTS, name), "utf8").split("\n");
    lines.forEach((line, i) => {
      const where = `${name}:${i + 1}: ${line.trim()}`;
      if (/@ts-(ignore|expect-error|nocheck)/.test(line)) found.push(where);
      if (/@(type|param|returns|typedef)\s*\{[^}]*\bany\b/.test(line)) found.push(where);
      if (/@type \{unknown\} \*\/ \(/.test(line)) found.push(where);
    });
  }
  assert.deepEqual(found, []);
});

test("the client's declaration (types/vtt-sync.d.ts, VttSync.Client) names members the real client has", () => {
  const dts = readFileSync(join(FOUNDRY, "types/vtt-sync.d.ts"), "utf8");
  const body = dts.slice(dts.indexOf("interface Client {"), dts.indexOf("type ClientClass"));
  const members = [...body.matchAll(/^\s+(?:readonly\s+)?(\w+)[(<?:]/gm)].map((m) => m[1]);
  assert.ok(members.length >= 10, members.join(", "));
  const client = new VttSyncClient({ url: "ws://127.0.0.1:9/", token: "t", room: "r" });
  for (const name of members) assert.ok(name in client, `VttSyncClient has no ${name}`);
  client.close();
});
