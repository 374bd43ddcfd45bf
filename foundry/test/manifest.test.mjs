// The built module: its manifest, the files it names, the client copied
// unchanged (one source), the zip, and main.mjs loading in a stand-in Foundry.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";

import { fakeDocument } from "./harness.mjs";
import { ApplicationV2, World } from "./standin.mjs";

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
  // No `relationships.recommends` of systems: Foundry's installer offers to
  // download what a module recommends (README: "Compatibility" lists them).
  assert.equal(manifest.relationships?.recommends, undefined);
  assert.equal(manifest.relationships?.systems, undefined);
  assert.deepEqual(
    manifest.languages.map((l) => l.lang),
    ["en", "fr"],
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
  const document = fakeDocument();
  const appended = document.appended;
  Object.assign(globalThis, client.env, { game: { ...client.env.game, modules }, document });
  try {
    await import(pathToFileURL(join(folder, "scripts/main.mjs")).href);
    client.env.game.modules = modules;
    client.boot();
    await new Promise((r) => setTimeout(r, 20)); // ready: the token's migration, then connect()
    assert.equal(client.registered.get("vtt-sync.serverUrl").scope, "world");
    // This browser's storage, never the world's database (v13's `user` scope is stored there).
    assert.equal(client.registered.get("vtt-sync.tokens").scope, "client");
    assert.ok(modules.get("vtt-sync").api);
    assert.equal(client.menus.get("vtt-sync.connection").restricted, false); // every user tests their own token
    assert.ok(client.menus.get("vtt-sync.connection").type.prototype instanceof ApplicationV2); // Foundry refuses anything else
    assert.ok(client.Hooks.handlers.get("updateCombat")?.length);
    assert.equal(modules.get("vtt-sync").api.status, "off"); // not configured: no connection, no error
    assert.deepEqual(client.Hooks.errors, []);
    assert.equal(appended[0].id, "vtt-sync-indicator");
    assert.match(appended[0].textContent, /not configured/);
  } finally {
    for (const key of ["Hooks", "game", "ui", "CONFIG", "Actor", "document"]) delete globalThis[key];
  }
});

test("every text of lang/en.json is in lang/fr.json, with the same {placeholders}", () => {
  const flat = (o, pre = "") =>
    Object.entries(o).flatMap(([k, v]) => (typeof v === "object" ? flat(v, `${pre}${k}.`) : [[`${pre}${k}`, v]]));
  const en = new Map(flat(JSON.parse(readFileSync(join(FOUNDRY, "lang/en.json"), "utf8"))));
  const fr = new Map(flat(JSON.parse(readFileSync(join(FOUNDRY, "lang/fr.json"), "utf8"))));
  assert.deepEqual([...fr.keys()].sort(), [...en.keys()].sort());
  const holes = (text) => [...text.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
  for (const [key, text] of en) assert.deepEqual(holes(fr.get(key)), holes(text), key);
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
    for (const m of src.matchAll(/finalFailure\([^,]+, "(\w+)"/g)) used.add(m[1]);
  }
  for (const c of ["conscious", "dying", "stable", "dead"]) used.add(`Condition.${c}`);
  for (const r of ["short", "night", "bed"]) used.add(`Rest.${r}`);
  for (const s of ["off", "idle", "connecting", "connected", "disconnected", "failed", "closed"])
    used.add(`Status.${s}`);
  for (const k of ["Link", "Relink", "Unlink", "PeMax", "PpMax", "Unreachable", "UnreachableTls"]) used.add(k);
  for (const code of ["ok", "empty", "insecure", "unreachable", "refused", "redirect"]) used.add(`Test.${code}`);
  for (const sys of ["generic", "sfrpg", "pf1", "pf1wv"])
    for (const k of ["PV", "PE", "PP"]) used.add(`Label.${sys}.${k}`);
  assert.ok(used.size > 40, `found ${used.size} keys`);
  const missing = [...used].filter((k) => !has(k));
  assert.deepEqual(missing, []);
});
