// The console in a real browser (issue 21 part 4): Debian's Chromium,
// driven by playwright-core, against a real `switchboard serve` on
// 127.0.0.1 port 0 that this suite starts ($SWITCHBOARD_BIN). Agents and
// a fake app speak JSON-RPC over real WebSockets from Node. The suite logs
// in, sees an agent connect live, sees a hook's latency after traffic,
// runs a check and sees the failing gate marked, suspends the app and sees
// its socket close; it takes a screenshot of every page into a temp
// folder, and fails on any console error or page error, on the admin token
// in a URL, in page storage or in the hub's log.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createWriteStream, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { chromium } from "playwright-core";
import WebSocket from "ws";

const BIN = process.env.SWITCHBOARD_BIN;
const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const TOKEN = `console-browser-${randomBytes(16).toString("hex")}`;
const WAIT_MS = 20_000;

const work = mkdtempSync(join(tmpdir(), "switchboard-console-"));
const shots = join(work, "screenshots");
const hubLog = join(work, "hub.log");

let hub; // { base, child, exited }
let browser;
let page;
const consoleErrors = [];
const requestUrls = [];
const sockets = [];

/** A JSON-RPC peer over a real WebSocket: calls, and answers to the hub's calls. */
class Peer {
  constructor(url, answer = () => undefined) {
    this.ws = new WebSocket(url);
    this.nextId = 1;
    this.pending = new Map();
    this.answer = answer;
    this.closed = new Promise((resolve) => this.ws.on("close", (code, reason) => resolve({ code, reason: String(reason) })));
    this.opened = new Promise((resolve, reject) => {
      this.ws.once("open", resolve);
      this.ws.once("error", reject);
    });
    this.ws.on("message", (data) => this.onMessage(JSON.parse(String(data))));
    sockets.push(this);
  }

  onMessage(frame) {
    if (frame.method && frame.id !== undefined) {
      // An answer may be a value, a promise of one (an app that takes its
      // time), or undefined (no answer at all).
      Promise.resolve(this.answer(frame.method, frame.params)).then((result) => {
        if (result !== undefined) this.ws.send(JSON.stringify({ jsonrpc: "2.0", id: frame.id, result }));
      });
      return;
    }
    const waiting = frame.id !== undefined ? this.pending.get(frame.id) : undefined;
    if (!waiting) return;
    this.pending.delete(frame.id);
    if (frame.error) waiting.reject(new Error(`${frame.error.code} ${frame.error.message}`));
    else waiting.resolve(frame.result);
  }

  async call(method, params) {
    await this.opened;
    const id = this.nextId++;
    const answered = new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
    this.ws.send(JSON.stringify({ jsonrpc: "2.0", id, method, params }));
    return answered;
  }

  close() {
    this.ws.close();
  }
}

async function startHub() {
  assert.ok(BIN, "set SWITCHBOARD_BIN to the switchboard binary");
  const log = createWriteStream(hubLog);
  // The hub reads every SWITCHBOARD_* variable as configuration: pass none
  // of the suite's own (SWITCHBOARD_BIN).
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("SWITCHBOARD_")));
  const child = spawn(BIN, ["serve", "--listen", "127.0.0.1:0", "--data-dir", join(work, "data")], {
    env: {
      ...inherited,
      SWITCHBOARD_ADMIN__TOKEN: TOKEN,
      SWITCHBOARD_CONSOLE__POLL_INTERVAL_MS: "100",
      SWITCHBOARD_CONSOLE__STUCK_WAITING_SECS: "1",
      RUST_LOG: "switchboard=debug,info",
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stderr.pipe(log);
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const lines = createInterface({ input: child.stdout });
  const base = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the hub did not start")), 60_000);
    lines.on("line", (line) => {
      const prefix = "switchboard listening on ";
      if (line.startsWith(prefix)) {
        clearTimeout(timer);
        resolve(line.slice(prefix.length));
      }
    });
    exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`the hub exited (${code}) before listening; see ${hubLog}`));
    });
  });
  return { base, child, exited };
}

async function rest(method, path, body, bearer) {
  const headers = {};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  const r = await fetch(hub.base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
}

async function registerAgent(name) {
  const r = await rest("POST", "/api/v1/agents/register", { name });
  assert.equal(r.status, 201, JSON.stringify(r.body));
  return { id: r.body.agentId, key: r.body.agentKey };
}

const wsUrl = () => `${hub.base.replace("http://", "ws://")}/ws`;

async function connectAgent(agent) {
  const peer = new Peer(wsUrl());
  await peer.call("agent/network/connect", { agentKey: agent.key });
  return peer;
}

async function shot(name) {
  await page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
}

async function show(pageName) {
  await page.click(`[data-testid=nav-${pageName}]`);
  await page.waitForSelector(`[data-testid=page-${pageName}]`, { timeout: WAIT_MS });
}

before(async () => {
  hub = await startHub();
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox"] });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  page = await context.newPage();
  page.on("console", (m) => {
    if (m.type() === "error") consoleErrors.push(m.text());
  });
  page.on("pageerror", (e) => consoleErrors.push(`page error: ${e.message}`));
  page.on("request", (r) => requestUrls.push(r.url()));
  console.log(`console screenshots: ${shots}`);
});

after(async () => {
  for (const s of sockets) s.close();
  await browser?.close();
  if (hub) {
    hub.child.kill("SIGTERM");
    await hub.exited;
  }
});

test("log in with the operator token; it is kept in no URL and no page storage", async () => {
  await page.goto(`${hub.base}/console`);
  await page.waitForSelector("[data-testid=login]", { timeout: WAIT_MS });
  await shot("login");
  await page.fill("#token", TOKEN);
  await page.click("[data-testid=login] button[type=submit]");
  await page.waitForSelector("[data-testid=live-status]:text-matches('^live')", { timeout: WAIT_MS });
  await page.waitForSelector("[data-testid=page-connections]", { timeout: WAIT_MS });
  const stored = await page.evaluate(() => ({
    local: JSON.stringify(Object.entries(localStorage)),
    session: JSON.stringify(Object.entries(sessionStorage)),
    cookie: document.cookie,
    url: location.href,
    token: document.querySelector("#token")?.value ?? "",
  }));
  assert.equal(stored.local, "[]", "nothing in localStorage");
  assert.equal(stored.session, "[]", "nothing in sessionStorage");
  assert.ok(!stored.cookie.includes(TOKEN), "the token is in no cookie the page can read");
  assert.ok(!stored.cookie.includes("sb_console="), "the session cookie is HttpOnly");
  assert.ok(stored.cookie.includes("sb_console_csrf="), "the CSRF cookie is readable");
  assert.ok(!stored.url.includes(TOKEN));
  assert.equal(stored.token, "", "the form keeps no token once logged in");
});

test("an agent that connects appears live", async () => {
  await show("connections");
  const alice = await registerAgent("alice");
  const selector = `[data-testid=connection][data-principal="${alice.id}"]`;
  assert.equal(await page.$(selector), null);
  await connectAgent(alice);
  await page.waitForSelector(selector, { timeout: WAIT_MS });
  assert.match(await page.textContent(selector), /alice/);
  assert.equal(await page.getAttribute(selector, "data-kind"), "agent");
  await shot("connections");
});

let app; // { id, key, peer }

test("a hook's latency appears after traffic", async () => {
  const manifest = {
    name: "Moderator",
    description: "the console suite's fake app",
    limits: { maxParticipants: 8 },
    conversations: [{ key: "main", name: "Main", participantFilter: "all" }],
    hooks: {
      task_create: { kind: "hook", timeoutMs: 3000 },
      message_authorize: { kind: "hook", timeoutMs: 3000 },
      dispatch_authorize: { kind: "hook", timeoutMs: 3000 },
    },
  };
  const registered = await rest("POST", "/api/v1/apps/register", { manifest });
  assert.equal(registered.status, 201, JSON.stringify(registered.body));
  const answers = {
    "app/task/create": () => ({ verdict: { decision: "Accept" } }),
    "app/message/authorize": (p) => ({
      verdict: { decision: "Forward", recipients: (p.conversation?.participants ?? []).filter((id) => id !== p.message?.senderId) },
    }),
    // Wrongly typed on purpose: the check marks this gate.
    "app/dispatch/authorize": () => ({ admission: { decision: "perhaps" } }),
  };
  const peer = new Peer(wsUrl(), (method, params) => answers[method]?.(params));
  await peer.call("app/network/connect", { appKey: registered.body.appKey });
  app = { id: registered.body.appId, peer };

  await show("apps");
  const card = `[data-testid=app][data-app="${app.id}"]`;
  await page.waitForSelector(`${card} [data-testid=sockets]:text("1 socket(s)")`, { timeout: WAIT_MS });
  const health = `${card} [data-testid=health][data-method="app/task/create"]`;
  assert.equal(await page.getAttribute(health, "data-count"), "0");

  const bob = await registerAgent("bob");
  const alice = await registerAgent("alice-2");
  const a = await connectAgent(alice);
  const task = await a.call("agent/task/request", { appId: app.id, invitedAgentIds: [bob.id] });
  assert.equal(task.task.state, "active");

  await page.waitForSelector(`${health}[data-count="1"]`, { timeout: WAIT_MS });
  const p50 = await page.textContent(`${health} [data-testid=p50]`);
  assert.match(p50, /ms$/, `a latency is shown: ${p50}`);
  await shot("apps");
});

test("a check marks the failing gate", async () => {
  const card = `[data-testid=app][data-app="${app.id}"]`;
  await page.click(`${card} [data-testid=run-check]`);
  await page.waitForSelector(`${card} [data-testid=check-result]`, { timeout: WAIT_MS });
  const gate = (name) => `${card} [data-testid=check-gate][data-gate=${name}]`;
  assert.equal(await page.getAttribute(`${card} [data-testid=check-result]`, "data-ok"), "false");
  assert.equal(await page.getAttribute(gate("dispatch_authorize"), "data-outcome"), "bad_result");
  assert.match(await page.getAttribute(gate("dispatch_authorize"), "class"), /gate-failed/);
  assert.equal(await page.getAttribute(gate("task_create"), "data-outcome"), "ok");
  assert.match(await page.getAttribute(gate("task_create"), "class"), /gate-ok/);
  await shot("apps-check");
});

test("suspending an app, once confirmed, closes its sockets", async () => {
  const card = `[data-testid=app][data-app="${app.id}"]`;
  await page.click(`${card} [data-testid=suspend]`);
  await page.waitForSelector("[data-testid=confirm]", { timeout: WAIT_MS });
  await shot("apps-confirm-suspend");
  let closed = false;
  app.peer.closed.then(() => (closed = true));
  await page.click("[data-testid=confirm-cancel]");
  await page.waitForSelector("[data-testid=confirm]", { state: "detached", timeout: WAIT_MS });
  assert.equal(await page.getAttribute(card, "data-state"), "active", "a cancel changes nothing");
  assert.equal(closed, false);

  await page.click(`${card} [data-testid=suspend]`);
  await page.click("[data-testid=confirm-ok]");
  const { code } = await app.peer.closed;
  assert.equal(code, 4012, "the app's socket closes as suspended");
  await page.waitForSelector(`${card}[data-state=suspended]`, { timeout: WAIT_MS });
  await page.waitForSelector(`${card} [data-testid=sockets]:text("0 socket(s)")`, { timeout: WAIT_MS });
  await page.waitForSelector(`${card} [data-testid=resume]`, { timeout: WAIT_MS });
  await shot("apps-suspended");
});

test("a task left waiting by its app's hook is shown stuck", async () => {
  let release;
  const held = new Promise((resolve) => (release = resolve));
  const manifest = {
    name: "Slowpoke",
    description: "holds its task_create answer until released",
    limits: { maxParticipants: 8 },
    conversations: [{ key: "main", name: "Main", participantFilter: "all" }],
    hooks: { task_create: { kind: "hook", timeoutMs: 30000 }, message_authorize: { kind: "forwardAllExceptSender" }, dispatch_authorize: { kind: "grant" } },
  };
  const registered = await rest("POST", "/api/v1/apps/register", { manifest });
  assert.equal(registered.status, 201, JSON.stringify(registered.body));
  const slow = new Peer(wsUrl(), (method) =>
    method === "app/task/create" ? held.then(() => ({ verdict: { decision: "Accept" } })) : undefined,
  );
  await slow.call("app/network/connect", { appKey: registered.body.appKey });
  const carol = await registerAgent("carol");
  const dave = await registerAgent("dave");
  const c = await connectAgent(carol);
  const requested = c.call("agent/task/request", { appId: registered.body.appId, invitedAgentIds: [dave.id] });

  await show("tasks");
  const stuck = `[data-testid=waiting-task][data-stuck=true]`;
  await page.waitForSelector(stuck, { timeout: WAIT_MS });
  assert.match(await page.getAttribute(stuck, "class"), /stuck/);
  assert.match(await page.textContent(stuck), /Slowpoke/);
  await shot("tasks-stuck");
  release();
  // Answered now: the task leaves `waiting` (the request itself may have
  // returned it waiting already, after jobs.inline_grace_ms).
  const task = await requested;
  assert.ok(["active", "waiting"].includes(task.task.state), task.task.state);
  await page.waitForSelector("[data-testid=waiting-task]", { state: "detached", timeout: WAIT_MS });
});

test("every page renders; no console error, and the token is in no URL and no log line", async () => {
  for (const name of ["tasks", "leases", "denials", "backlog", "connections"]) {
    await show(name);
    await shot(name);
  }
  assert.deepEqual(await page.evaluate(() => [localStorage.length, sessionStorage.length]), [0, 0]);
  for (const url of requestUrls) assert.ok(!url.includes(TOKEN), `the token is in a URL: ${url}`);
  assert.ok(requestUrls.some((u) => u.endsWith("/console/api/stream")), "the page used the stream");
  assert.deepEqual(consoleErrors, [], "no console error on the page");
  const log = readFileSync(hubLog, "utf8");
  assert.ok(log.includes("console session started"), "the hub's log is captured");
  assert.ok(!log.includes(TOKEN), "the admin token is in the hub's log");
});
