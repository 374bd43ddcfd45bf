// The module as Foundry users install it (build.py): a release's manifest
// (version, manifest and download URLs, readme, changelog), the files it
// names, the client copied unchanged (one source), the versioned zip with
// module.json at its root, unpacked and loaded in a stand-in Foundry.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
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
const GITHUB = "https://github.com/example/vtt-sync";
const VERSION = "9.8.7";

const build = (...args) => spawnSync("python3", [join(FOUNDRY, "build.py"), ...args], { encoding: "utf8" });

let out;
let folder;
let manifest;
let unpacked;
before(() => {
  out = mkdtempSync(join(tmpdir(), "vtt-sync-build-"));
  const r = build("--out", out, "--repo", GITHUB, "--version", VERSION);
  assert.equal(r.status, 0, r.stderr);
  folder = join(out, "vtt-sync");
  manifest = JSON.parse(readFileSync(join(folder, "module.json"), "utf8"));
  // What Foundry does with the download: unpack the zip into Data/modules/<id>/.
  unpacked = join(out, "Data", "modules", "vtt-sync");
  execFileSync("python3", ["-c", "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])", join(out, `vtt-sync-${VERSION}.zip`), unpacked]);
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
  assert.deepEqual(JSON.parse(readFileSync(join(out, "module.json"), "utf8")), manifest); // attached beside the zip
});

test("a release's manifest: this version's zip to download, the latest release's manifest to update from, readme and changelog", () => {
  assert.equal(manifest.version, VERSION);
  assert.equal(manifest.manifest, `${GITHUB}/releases/latest/download/module.json`);
  assert.equal(manifest.download, `${GITHUB}/releases/download/v${VERSION}/vtt-sync-${VERSION}.zip`);
  assert.equal(manifest.readme, `${GITHUB}/blob/v${VERSION}/foundry/README.md`);
  assert.equal(manifest.changelog, `${GITHUB}/blob/v${VERSION}/foundry/CHANGELOG.md`);
  assert.equal(manifest.url, GITHUB);
  // The source manifest leaves them to the release; a self-hosted one serves both files.
  const source = JSON.parse(readFileSync(join(FOUNDRY, "module.json"), "utf8"));
  assert.equal(source.manifest ?? source.download ?? null, null);
  const hosted = mkdtempSync(join(tmpdir(), "vtt-sync-host-"));
  try {
    assert.equal(build("--out", hosted, "--base-url", "https://example.test/vtt-sync", "--version", "1.2.3").status, 0);
    const m = JSON.parse(readFileSync(join(hosted, "module.json"), "utf8"));
    assert.deepEqual([m.manifest, m.download], ["https://example.test/vtt-sync/module.json", "https://example.test/vtt-sync/vtt-sync-1.2.3.zip"]);
    assert.ok(existsSync(join(hosted, "vtt-sync-1.2.3.zip")));
  } finally {
    rmSync(hosted, { recursive: true, force: true });
  }
});

test("a release is refused, with the reason, for a version Foundry cannot compare or an address that is not a repository", () => {
  const bad = build("--out", join(out, "bad"), "--version", "2.0", "--repo", GITHUB);
  assert.notEqual(bad.status, 0);
  assert.match(bad.stderr, /version must be MAJOR.MINOR.PATCH/);
  const elsewhere = build("--out", join(out, "bad"), "--version", "2.0.0", "--repo", "https://example.org/x");
  assert.match(elsewhere.stderr, /--repo must be https:\/\/github.com\/OWNER\/NAME/);
  assert.equal(existsSync(join(out, "bad")), false); // nothing written
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
      join(out, `vtt-sync-${VERSION}.zip`),
    ]).toString(),
  );
  const expected = {};
  for (const path of files(folder)) {
    const hash = execFileSync("sha256sum", [path]).toString().split(" ")[0];
    expected[relative(folder, path)] = hash;
  }
  assert.deepEqual(listing, expected);
  assert.ok("module.json" in listing); // at the root: Foundry reads <id>/module.json once unpacked
  assert.equal(JSON.parse(readFileSync(join(unpacked, "module.json"), "utf8")).version, VERSION);
  for (const doc of ["README.md", "CHANGELOG.md", "LICENSE"]) assert.ok(doc in listing, doc);
});

test("the release's zip, unpacked as Foundry does, loads in a stand-in Foundry: its settings, its menu, its hooks, its API", async () => {
  const world = new World({ system: "sfrpg", generation: 13 });
  const gm = world.addUser("Maya", 4);
  const client = world.connect(gm);
  const modules = new Map([["vtt-sync", { id: "vtt-sync" }]]);
  // Just enough DOM for the indicator the module adds at ready.
  const document = fakeDocument();
  const appended = document.appended;
  Object.assign(globalThis, client.env, { game: { ...client.env.game, modules }, document });
  try {
    const esmodule = JSON.parse(readFileSync(join(unpacked, "module.json"), "utf8")).esmodules[0];
    await import(pathToFileURL(join(unpacked, esmodule)).href);
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
  for (const c of ["conscious", "dying", "stable", "nonlethal", "dead"]) used.add(`Condition.${c}`);
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
