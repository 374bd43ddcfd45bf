// Where the module connects and what it refuses: wss:// by default from an
// https page, the browser's mixed-content refusal reported once as final,
// a cluster redirect never sending the token to a host the GM did not
// configure. The real browser's side (Chromium throwing SecurityError, a
// self-signed certificate) is tests/foundry/test_browser.py.
import assert from "node:assert/strict";
import { test } from "node:test";

import { hostFamily, isMixedContent, redirectAllowed, toWsUrl } from "../scripts/connection.mjs";
import { VttSyncModule } from "../scripts/module.mjs";
import { presetToken } from "./harness.mjs";
import { World } from "./standin.mjs";
import { VttSyncClient, waitFor } from "./server.mjs";

test("a bare host:port becomes wss:// from an https page, ws:// from an http one", () => {
  assert.equal(toWsUrl("vtt.example.org:8765", "https:"), "wss://vtt.example.org:8765");
  assert.equal(toWsUrl("vtt.example.org:8765", "http:"), "ws://vtt.example.org:8765");
  assert.equal(toWsUrl("https://vtt.example.org/sync/", "https:"), "wss://vtt.example.org/sync/");
  assert.equal(toWsUrl("http://10.0.0.2:8765", "http:"), "ws://10.0.0.2:8765");
  assert.equal(toWsUrl(" ws://h:1 ", "https:"), "ws://h:1"); // what the GM typed, kept (and refused below)
  assert.equal(isMixedContent("ws://h:1", "https:"), true);
  assert.equal(isMixedContent("ws://127.0.0.1:1", "https:"), false); // loopback is a secure context
  assert.equal(isMixedContent("wss://h:1", "https:"), false);
  assert.equal(isMixedContent("ws://h:1", "http:"), false);
});

test("a redirect may go to the configured host, its siblings, or hosts the GM listed; never elsewhere, never down to ws://", () => {
  const conf = "wss://vtt.example.org:8765/";
  assert.equal(redirectAllowed("wss://vtt.example.org:9000/", conf), true);
  assert.equal(redirectAllowed("wss://node-2.example.org:8765/", conf), true);
  assert.equal(redirectAllowed("wss://a.node.example.org/", conf), false); // a cousin, not a sibling
  assert.equal(redirectAllowed("ws://node-2.example.org:8765/", conf), false); // no downgrade
  assert.equal(redirectAllowed("wss://evil.test/", conf), false);
  assert.equal(redirectAllowed("wss://example.org.evil.test/", conf), false);
  assert.equal(redirectAllowed("wss://evil.test/", conf, ["evil.test"]), true);
  assert.equal(redirectAllowed("wss://10.0.0.3:8765/", "wss://10.0.0.2:8765/"), false); // IPs: exact
  assert.equal(redirectAllowed("wss://node-1.example:1/", "wss://vtt.example:1/"), false); // one-label parent
  assert.equal(redirectAllowed("wss://h:2/", "ws://h:1/"), true); // up to wss is fine
  assert.equal(hostFamily("vtt.example.org"), "example.org");
  assert.equal(redirectAllowed("javascript:alert(1)", conf), false);
});

/**
 * A scripted WebSocket: every instance is recorded (its URL and what was
 * sent); `script(ws)` plays the server's side.
 */
function scriptedSocket(script) {
  const made = [];
  class Scripted {
    constructor(url) {
      this.url = url;
      this.sent = [];
      this.readyState = 0;
      made.push(this);
      setTimeout(() => {
        this.readyState = 1;
        this.onopen?.({});
      }, 0);
    }
    send(data) {
      this.sent.push(JSON.parse(data));
      script(this, JSON.parse(data));
    }
    close(code = 1000) {
      if (this.readyState === 3) return;
      this.readyState = 3;
      setTimeout(() => this.onclose?.({ code, reason: "", wasClean: true }), 0);
    }
    reply(frame) {
      setTimeout(() => this.onmessage?.({ data: JSON.stringify(frame) }), 0);
    }
  }
  return { Scripted, made };
}

function moduleAt({ url, protocol = "https:", WebSocket, redirectHosts = "" }) {
  const world = new World({ generation: 13, protocol });
  const gm = world.addUser("Maya", 4);
  world.settings.set("vtt-sync.serverUrl", url);
  world.settings.set("vtt-sync.room", "r1");
  world.settings.set("vtt-sync.redirectHosts", redirectHosts);
  const client = world.connect(gm);
  presetToken(client, "secret-token-value");
  if (WebSocket) client.env.WebSocket = WebSocket;
  const mod = new VttSyncModule(client.env, VttSyncClient).register();
  client.boot();
  return { client, mod };
}

const redirectTo = (target) => (ws, frame) => {
  if (frame.t === "hello") {
    ws.reply({ t: "redirect", url: target });
    setTimeout(() => ws.close(4302), 5);
  }
};

test("a redirect to a host the GM did not configure: the token is never sent there; reported once, final", async () => {
  const { Scripted, made } = scriptedSocket((ws, frame) =>
    ws.url.startsWith("wss://vtt.example.org") ? redirectTo("wss://collector.evil.test/")(ws, frame) : null,
  );
  const { client, mod } = moduleAt({ url: "vtt.example.org:8765", WebSocket: Scripted });
  await waitFor(() => mod.status === "failed", { what: "final failure" });
  await new Promise((r) => setTimeout(r, 300)); // no retry follows
  assert.deepEqual(
    made.map((ws) => ws.url),
    ["wss://vtt.example.org:8765"], // wss:// from the https page; nothing opened for the redirect
  );
  const errors = client.notifications.filter((n) => n.level === "error");
  assert.equal(errors.length, 1);
  assert.match(errors[0].text, /redirected this client to wss:\/\/collector\.evil\.test\/.*refused, the token was not sent/);
  assert.doesNotMatch(JSON.stringify(client.notifications), /secret-token-value/);
  assert.deepEqual(client.Hooks.errors, []);
  mod.client?.close();
});

test("a redirect to a sibling node is followed, with the token", async () => {
  const { Scripted, made } = scriptedSocket((ws, frame) => {
    if (ws.url.startsWith("wss://vtt.example.org")) return redirectTo("wss://node-2.example.org:8765/")(ws, frame);
    if (frame.t === "hello") ws.reply({ t: "welcome", proto: 1, v: 0, user: "u1", role: "gm", state: { characters: {}, users: {}, combat: null, clock: 0 } });
  });
  const { mod } = moduleAt({ url: "wss://vtt.example.org:8765", WebSocket: Scripted });
  await waitFor(() => made.length === 2 && made[1].sent.length, { what: "the sibling's hello" });
  assert.equal(made[1].url, "wss://node-2.example.org:8765/");
  assert.equal(made[1].sent[0].token, "secret-token-value");
  mod.client?.close();
});

test("ws:// typed on an https page: no connection is tried; one final error says what to put instead", async () => {
  const { Scripted, made } = scriptedSocket(() => {});
  const { client, mod } = moduleAt({ url: "ws://vtt.example.org:8765", WebSocket: Scripted });
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(mod.status, "failed");
  assert.equal(made.length, 0);
  const texts = client.notifications.map((n) => n.text);
  assert.equal(texts.length, 1);
  assert.match(texts[0], /https, so the browser refuses to connect to ws:\/\/vtt\.example\.org:8765 .*Put wss:\/\/vtt\.example\.org:8765 in the server URL setting.*TLS/);
});

test("the browser's SecurityError in the WebSocket constructor is final, reported once (not retried for ever)", async () => {
  let tries = 0;
  class Refusing {
    constructor() {
      tries += 1;
      const err = new Error("Failed to construct 'WebSocket': An insecure WebSocket connection may not be initiated from a page loaded over HTTPS.");
      err.name = "SecurityError";
      throw err;
    }
  }
  // A page the module does not see as https (e.g. a proxy page): the browser still refuses.
  const { client, mod } = moduleAt({ url: "ws://vtt.example.org:8765", protocol: "http:", WebSocket: Refusing });
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(tries, 1);
  assert.equal(mod.status, "failed");
  const texts = client.notifications.map((n) => n.text);
  assert.equal(texts.length, 1, texts.join("\n"));
  assert.match(texts[0], /refuses to connect to ws:\/\/vtt\.example\.org:8765/);
});

test("a wss:// server never reached: one notice naming the certificate and the TLS port as causes", async () => {
  class Unreachable {
    constructor(url) {
      this.url = url;
      setTimeout(() => {
        this.onerror?.({});
        this.onclose?.({ code: 1006, reason: "", wasClean: false });
      }, 0);
    }
    close() {}
  }
  const { client, mod } = moduleAt({ url: "wss://vtt.example.org:8765", WebSocket: Unreachable });
  await waitFor(() => mod.client?._attempt >= 3, { what: "retries", timeout: 15_000 });
  const texts = client.notifications.map((n) => n.text);
  assert.equal(texts.length, 1);
  assert.match(texts[0], /cannot reach wss:\/\/vtt\.example\.org:8765.*does not trust its certificate \(open https:\/\/vtt\.example\.org:8765 in a tab/);
  mod.client?.close();
});
