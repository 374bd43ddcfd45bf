// The built module: its manifest, the files it names, the client copied
// unchanged (one source), the zip, and main.mjs loading in a stand-in Foundry.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";

import { World } from "./standin.mjs";

const FOUNDRY = new URL("../", import.meta.url).pathname;
const REPO = new URL("../../", import.meta.url).pathname;
const CLIENT = join(REPO, "client_stub/web/vtt-sync-client.js");
const BASE = "https://example.test/vtt-sync/";

let out;
let folder;
let manifest;
before(() => {
  out = mkdtempSync(join(tmpdir(), "vtt-sync-build-"));
  execFileSync("python3", [
    join(FOUNDRY, "build.py"),
    "--out",
    out,
    "--base-url",
    BASE,
    "--version",
    "9.8.7",
  ]);
  folder = join(out, "vtt-sync");
  manifest = JSON.parse(readFileSync(join(folder, "module.json"), "utf8"));
});
after(() => rmSync(out, { recursive: true, force: true }));

function files(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

test("the manifest has Foundry's fields for v12 and v13", () => {
  assert.equal(manifest.id, "vtt-sync");
  assert.equal(manifest.version, "9.8.7");
  for (const key of ["title", "description", "url", "bugs", "license"])
    assert.equal(typeof manifest[key], "string", key);
  assert.deepEqual(manifest.compatibility, { minimum: "12", verified: "13" });
  assert.deepEqual(manifest.esmodules, ["scripts/main.mjs"]);
  assert.ok(manifest.styles.length && manifest.languages.length);
  assert.equal(manifest.socket, true);
  assert.deepEqual(
    manifest.relationships.recommends.map((r) => [r.id, r.type]),
    [
      ["sfrpg", "system"],
      ["pf1", "system"],
    ],
  );
  assert.equal(manifest.manifest, `${BASE}module.json`);
  assert.equal(manifest.download, `${BASE}vtt-sync.zip`);
  assert.deepEqual(JSON.parse(readFileSync(join(out, "module.json"), "utf8")), manifest); // hosted beside the zip
});

test("every file the manifest names exists, in the build and in the sources", () => {
  const named = [...manifest.esmodules, ...manifest.styles, ...manifest.languages.map((l) => l.path)];
  for (const path of named) {
    assert.ok(existsSync(join(folder, path)), `built ${path}`);
    assert.ok(existsSync(join(FOUNDRY, path)), `source ${path}`);
  }
});

test("the client is the project's own file, copied byte for byte, and nowhere forked", () => {
  assert.deepEqual(readFileSync(join(folder, "scripts/vtt-sync-client.js")), readFileSync(CLIENT));
  assert.equal(existsSync(join(FOUNDRY, "scripts/vtt-sync-client.js")), false);
  for (const path of files(join(FOUNDRY, "scripts"))) {
    assert.doesNotMatch(readFileSync(path, "utf8"), /class VttSyncClient/, relative(FOUNDRY, path));
  }
});

test("every relative import of the built scripts resolves to a file of the module", () => {
  for (const path of files(join(folder, "scripts"))) {
    for (const m of readFileSync(path, "utf8").matchAll(/^import\s[^;]*?from\s+"(\.[^"]+)"/gm)) {
      assert.ok(existsSync(join(path, "..", m[1])), `${relative(folder, path)} imports ${m[1]}`);
    }
  }
});

test("the zip holds the module folder, file for file, module.json at its root", () => {
  const listing = JSON.parse(
    execFileSync("python3", [
      "-c",
      "import hashlib, json, sys, zipfile\n" +
        "z = zipfile.ZipFile(sys.argv[1])\n" +
        "print(json.dumps({n: hashlib.sha256(z.read(n)).hexdigest() for n in z.namelist()}))",
      join(out, "vtt-sync.zip"),
    ]).toString(),
  );
  const expected = {};
  for (const path of files(folder)) {
    const hash = execFileSync("sha256sum", [path]).toString().split(" ")[0];
    expected[relative(folder, path)] = hash;
  }
  assert.deepEqual(listing, expected);
  assert.ok("module.json" in listing);
});

test("the built main.mjs loads in a stand-in Foundry, registers its settings and hooks, and offers its API", async () => {
  const world = new World({ system: "sfrpg", generation: 13 });
  const gm = world.addUser("Maya", 4);
  const client = world.connect(gm);
  const modules = new Map([["vtt-sync", { id: "vtt-sync" }]]);
  // Just enough DOM for the indicator the module adds at ready.
  const appended = [];
  const element = () => ({
    dataset: {},
    append() {},
    prepend() {},
    querySelector: () => null,
    querySelectorAll: () => [],
  });
  const document = {
    createElement: element,
    body: { append: (e) => appended.push(e) },
    querySelectorAll: () => [],
  };
  Object.assign(globalThis, client.env, { game: { ...client.env.game, modules }, document });
  try {
    await import(pathToFileURL(join(folder, "scripts/main.mjs")).href);
    client.env.game.modules = modules;
    client.boot();
    assert.equal(client.registered.get("vtt-sync.serverUrl").scope, "world");
    assert.equal(client.registered.get("vtt-sync.token").scope, "user"); // v13: a user setting, never world
    assert.ok(modules.get("vtt-sync").api);
    assert.ok(client.Hooks.handlers.get("combatTurnChange")?.length);
    assert.equal(modules.get("vtt-sync").api.status, "off"); // not configured: no connection, no error
    assert.deepEqual(client.Hooks.errors, []);
    assert.equal(appended[0].id, "vtt-sync-indicator");
    assert.match(appended[0].textContent, /not configured/);
  } finally {
    for (const key of ["Hooks", "game", "ui", "CONFIG", "Actor", "document"]) delete globalThis[key];
  }
});

test("on v12 the token is a client setting (v12 has no user scope)", async () => {
  const { VttSyncModule } = await import("../scripts/module.mjs");
  const world = new World({ generation: 12 });
  const client = world.connect(world.addUser("Maya", 4));
  new VttSyncModule(client.env, class {}).register();
  client.boot();
  assert.equal(client.registered.get("vtt-sync.token").scope, "client");
});

test("every text the module shows exists in lang/en.json", async () => {
  const lang = JSON.parse(readFileSync(join(FOUNDRY, "lang/en.json"), "utf8")).VTTSYNC;
  const has = (key) => key.split(".").reduce((v, k) => v?.[k], lang) !== undefined;
  const used = new Set();
  for (const path of files(join(FOUNDRY, "scripts"))) {
    const src = readFileSync(path, "utf8");
    for (const m of src.matchAll(/notify\("\w+", "(\w+)"/g)) used.add(m[1]);
    for (const m of src.matchAll(/warnOnce\([^,]+, "(\w+)"/g)) used.add(m[1]);
    for (const m of src.matchAll(/\bt\("([\w.]+)"/g)) used.add(m[1]);
    for (const m of src.matchAll(/"VTTSYNC\.([\w.]+)"/g)) used.add(m[1]);
    for (const m of src.matchAll(/key: "(\w+)"/g)) used.add(`Action.${m[1]}`);
  }
  for (const c of ["conscious", "dying", "stable", "dead"]) used.add(`Condition.${c}`);
  for (const r of ["short", "night", "bed"]) used.add(`Rest.${r}`);
  for (const s of ["off", "idle", "connecting", "connected", "disconnected", "failed", "closed"])
    used.add(`Status.${s}`);
  for (const k of ["Link", "Relink", "Unlink", "PeMax", "PpMax"]) used.add(k);
  assert.ok(used.size > 40, `found ${used.size} keys`);
  const missing = [...used].filter((k) => !has(k));
  assert.deepEqual(missing, []);
});
