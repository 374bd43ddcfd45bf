// tsc --checkJs of the module against Foundry's own type definitions
// (@league-of-foundry-developers/foundry-vtt-types 12.331.x, from npm:
// scripts/install-test-deps runs `npm ci` here) and types/v13.d.ts for the
// v13-only APIs: hook names and their arguments, document methods, setting
// keys. Zero errors; the few remaining mismatches are `@ts-expect-error`
// lines in the scripts, each saying why.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const FOUNDRY = fileURLToPath(new URL("../", import.meta.url));
const TSC = join(FOUNDRY, "node_modules/typescript/bin/tsc");
const TYPES = join(FOUNDRY, "node_modules/@league-of-foundry-developers/foundry-vtt-types/package.json");

test("the module type-checks against foundry-vtt-types (v12) and our v13 declarations, with no error", () => {
  assert.ok(
    existsSync(TSC) && existsSync(TYPES),
    "foundry/node_modules is missing: run scripts/install-test-deps (npm ci in foundry/)",
  );
  const r = spawnSync(process.execPath, [TSC, "-p", join(FOUNDRY, "tsconfig.json")], {
    cwd: FOUNDRY,
    encoding: "utf8",
    timeout: 240_000,
  });
  assert.equal(r.status, 0, `tsc found errors:\n${r.stdout}${r.stderr}`);
});
