// End-to-end scenario for the Ledgermind desktop app, driven over W3C
// WebDriver (tauri-driver at http://127.0.0.1:4444 by default).
//
//   LEDGERMIND_APP=/path/to/ledgermind-desktop node tests/e2e/app.e2e.mjs
//
// Environment:
//   LEDGERMIND_APP         the built app binary (required unless LEDGERMIND_E2E_URL is set)
//   LEDGERMIND_ARTIFACTS   where screenshots go (default /work/main/artifacts/e2e)
//   LEDGERMIND_WEBDRIVER   the WebDriver server (default http://127.0.0.1:4444)
//   LEDGERMIND_E2E_PHASE   "first" (default): the first-run scenario;
//                          "restart": only check that the history is there;
//                          "all": first run, then a new session (the app restarts
//                          with the same LEDGERMIND_HOME) that checks the history.
//   LEDGERMIND_E2E_URL     drive a browser at this URL instead of the app (e.g. the
//                          `vite dev` preview with its in-memory backend, through
//                          chromedriver); LEDGERMIND_E2E_CHROME names the browser binary.
//
// Every step is an exported function taking the context from `startSession`,
// so other scripts can compose phases.

import { link, mkdir, mkdtemp, readdir, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { Keys, Session, sleep, waitFor, waitForDriver } from "./webdriver.mjs";

export const SCENARIO = Object.freeze({
  persona: { name: "Ada", description: "A patient mathematics tutor" },
  message: "Hello Ada, what is two plus two?",
  checkpoint: {
    slot: 10,
    name: "before-bo",
    persona: { name: "Bo", description: "Made after the save, to be undone and redone" },
  },
  account: {
    name: "local-ollama",
    baseUrl: "http://127.0.0.1:9/v1",
    key: "sk-test-e2e-secret",
    model: "llama3",
  },
});

/** How long the tiny local model may take to answer on a CI CPU. */
const REPLY_TIMEOUT_MS = 120_000;
/** How long the app may take to show its first screen (it opens the ledger, maybe loads a model). */
const STARTUP_TIMEOUT_MS = 90_000;
/** A screenshot right after a DOM change can show the previous frame. */
const SETTLE_MS = 500;

const css = (testid, extra = "") => `[data-testid="${testid}"]${extra}`;
const personaItem = (name) => css("persona-item", `[data-name="${cssString(name)}"]`);

function cssString(value) {
  return String(value).replace(/["\\]/g, "\\$&");
}

// ---- configuration and session -----------------------------------------------

export function config(env = process.env) {
  const browserUrl = env.LEDGERMIND_E2E_URL || null;
  const app = env.LEDGERMIND_APP || null;
  if (!browserUrl && !app) {
    throw new Error("LEDGERMIND_APP is not set: point it at the built Ledgermind binary (or set LEDGERMIND_E2E_URL to drive a browser).");
  }
  return {
    driverUrl: env.LEDGERMIND_WEBDRIVER || (browserUrl ? "http://127.0.0.1:9515" : "http://127.0.0.1:4444"),
    app,
    browserUrl,
    chrome: env.LEDGERMIND_E2E_CHROME || "/usr/bin/chromium",
    artifacts: resolve(env.LEDGERMIND_ARTIFACTS || new URL("../../artifacts/e2e", import.meta.url).pathname),
    phase: env.LEDGERMIND_E2E_PHASE || "first",
  };
}

export function capabilities(cfg) {
  if (cfg.browserUrl) {
    return {
      alwaysMatch: {
        browserName: "chrome",
        "goog:chromeOptions": {
          binary: cfg.chrome,
          args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,800", "--no-first-run"],
        },
      },
    };
  }
  return { alwaysMatch: { "tauri:options": { application: cfg.app } } };
}

let shotCounter = 0;

/**
 * Opens a WebDriver session (starting the app) and returns the scenario context.
 * @param {ReturnType<typeof config>} cfg
 * @param {string} label  a prefix for this session's screenshots, e.g. "run1"
 */
export async function startSession(cfg, label = "run1") {
  await mkdir(cfg.artifacts, { recursive: true });
  await waitForDriver(cfg.driverUrl);
  log(`opening a session on ${cfg.driverUrl} (${cfg.browserUrl ?? cfg.app})`);
  const session = await Session.create(cfg.driverUrl, capabilities(cfg), { timeout: STARTUP_TIMEOUT_MS });
  if (cfg.browserUrl) await session.navigate(cfg.browserUrl);
  return { session, cfg, label };
}

export async function endSession(ctx) {
  await ctx.session.delete();
}

/** Waits for the frame to settle, then saves `<artifacts>/<nn>-<label>-<name>.png`. */
export async function shot(ctx, name) {
  await sleep(SETTLE_MS);
  const file = join(ctx.cfg.artifacts, `${String(++shotCounter).padStart(2, "0")}-${ctx.label}-${name}.png`);
  try {
    await ctx.session.saveScreenshot(file);
    log(`  screenshot ${file}`);
  } catch (error) {
    log(`  (screenshot ${name} failed: ${error.message})`);
  }
  return file;
}

/** After a failure: a screenshot and the page's HTML, never hiding the failure itself. */
export async function saveFailureState(ctx) {
  try {
    await shot(ctx, "FAILURE");
    await writeFile(join(ctx.cfg.artifacts, `${ctx.label}-failure.html`), await ctx.session.source());
  } catch (e) {
    log(`  (could not save the failure state: ${e.message})`);
  }
}

export function log(message) {
  const time = new Date().toISOString().slice(11, 23);
  console.log(`[e2e ${time}] ${message}`);
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

// ---- page helpers ------------------------------------------------------------

const READ_MESSAGES = `
  return Array.from(document.querySelectorAll('[data-testid="message"]')).map(function (el) {
    var content = el.querySelector('[data-testid="message-content"]');
    return { role: el.getAttribute('data-role'), seq: Number(el.getAttribute('data-seq')), text: (content ? content.textContent : el.textContent) || '' };
  });`;

const READ_REPLY_STATE = `
  var streaming = document.querySelector('[data-testid="message-streaming"]');
  var failed = Array.from(document.querySelectorAll('[data-testid="message-failed"]')).map(function (el) { return el.textContent.trim(); });
  return {
    streaming: streaming ? (streaming.textContent || '').trim() : null,
    failed: failed,
    recorded: window.__lmStreamLengths || []
  };`;

// Records every length the streaming bubble shows, between two polls too.
const OBSERVE_STREAM = `
  if (window.__lmStreamObserver) window.__lmStreamObserver.disconnect();
  window.__lmStreamLengths = [];
  var record = function () {
    var el = document.querySelector('[data-testid="message-streaming"]');
    if (!el) return;
    var n = (el.textContent || '').trim().length;
    var seen = window.__lmStreamLengths;
    if (n > 0 && seen[seen.length - 1] !== n) seen.push(n);
  };
  window.__lmStreamObserver = new MutationObserver(record);
  window.__lmStreamObserver.observe(document.body, { subtree: true, childList: true, characterData: true });
  return true;`;

/** @returns {Promise<{ role: string, text: string }[]>} the chat's messages, oldest first */
export function readMessages(ctx) {
  return ctx.session.execute(READ_MESSAGES);
}

export async function openTab(ctx, view) {
  const tab = await ctx.session.waitForElement(css(`nav-${view}`));
  await tab.click();
  await waitFor(async () => (await tab.attribute("aria-selected")) === "true", { message: `the ${view} tab to be selected` });
}

// ---- scenario steps ------------------------------------------------------------

/** Waits until the persona list shows `name`. */
export async function waitForPersona(ctx, name, timeout = STARTUP_TIMEOUT_MS) {
  log(`waiting for persona ${name} in the list`);
  await ctx.session.waitForElement(personaItem(name), timeout);
}

export async function createPersona(ctx, { name, description }) {
  // The list shows Ei once the app's core is open; on a busy machine that
  // can take longer than a click's wait, and the form's submit waits for it.
  await waitForPersona(ctx, "Ei");
  log(`creating persona ${name}`);
  await openTab(ctx, "chat");
  await (await ctx.session.waitForElement(css("new-persona-button"))).click();
  const nameInput = await ctx.session.waitForElement(css("persona-name-input"));
  await nameInput.sendKeys(name);
  await (await ctx.session.findElement(css("persona-description-input"))).sendKeys(description);
  await shot(ctx, "persona-form");
  await (await ctx.session.findElement(css("persona-create-submit"))).click();
  await ctx.session.waitForElement(personaItem(name));
  await waitFor(async () => (await ctx.session.findElements(css("persona-name-input"))).length === 0, {
    message: "the new-persona form to close",
  });
  await shot(ctx, "persona-created");
}

export async function selectPersona(ctx, name) {
  log(`opening the chat with ${name}`);
  await (await ctx.session.waitForElement(personaItem(name))).click();
  const item = await ctx.session.findElement(personaItem(name));
  await waitFor(async () => (await item.attribute("aria-current")) === "true", { message: `${name} to be selected` });
  await ctx.session.waitForElement(css("composer-input"));
}

/**
 * Sends `text` and follows the streamed reply.
 * @returns {Promise<{ reply: string, lengths: number[] }>}
 */
export async function sendAndAwaitReply(ctx, text, { timeout = REPLY_TIMEOUT_MS } = {}) {
  const before = await readMessages(ctx);
  const personaBefore = before.filter((m) => m.role === "persona").length;

  log(`sending: ${JSON.stringify(text)}`);
  try {
    await ctx.session.execute(OBSERVE_STREAM);
  } catch (error) {
    log(`  (no in-page observer, polling only: ${error.message})`);
  }
  const input = await ctx.session.waitForElement(css("composer-input"));
  await input.sendKeys(text);
  const send = await ctx.session.findElement(css("send-button"));
  await waitFor(() => send.enabled(), { message: "the send button to be enabled" });
  await send.click();

  await waitFor(async () => (await readMessages(ctx)).some((m) => m.role === "human" && m.text.includes(text)), {
    timeout: 15_000,
    message: "the human message to appear",
  });
  log("  human message shown");
  await shot(ctx, "message-sent");

  const polled = [];
  let streamShot = false;
  const started = Date.now();
  const final = await waitFor(
    async () => {
      const state = await ctx.session.execute(READ_REPLY_STATE);
      if (state.failed.length > 0) throw new Error(`the reply failed: ${state.failed.at(-1)}`);
      if (state.streaming) {
        const n = state.streaming.length;
        if (polled.at(-1) !== n) polled.push(n);
        if (!streamShot && n > 0) {
          streamShot = true;
          await ctx.session.saveScreenshot(join(ctx.cfg.artifacts, `${String(++shotCounter).padStart(2, "0")}-${ctx.label}-streaming.png`));
        }
        return null;
      }
      const messages = await readMessages(ctx);
      const replies = messages.filter((m) => m.role === "persona");
      if (replies.length <= personaBefore) return null;
      return { reply: replies.at(-1).text, recorded: state.recorded };
    },
    { timeout, interval: 50, message: `${ctx.label}: the persona's reply (${timeout / 1000} s)` },
  );
  const lengths = mergeLengths(final.recorded, polled);
  log(`  reply after ${((Date.now() - started) / 1000).toFixed(1)} s; streaming lengths seen: ${lengths.slice(0, 12).join(", ")}${lengths.length > 12 ? ", …" : ""}`);
  check(final.reply.trim().length > 0, "the persona's final reply is empty");
  check(
    new Set(lengths).size >= 2,
    `the reply did not stream: the streaming text was seen with ${new Set(lengths).size} distinct length(s) (${lengths.join(", ") || "never"}); expected at least 2`,
  );
  log(`  reply: ${JSON.stringify(final.reply.slice(0, 160))}`);
  await shot(ctx, "reply-finished");
  return { reply: final.reply, lengths };
}

function mergeLengths(recorded, polled) {
  const all = [...(recorded ?? [])];
  for (const n of polled) if (n > 0 && !all.includes(n)) all.push(n);
  return all;
}

/** Runs Verify on the Ledger tab. @returns {Promise<{ events: number, text: string }>} */
/** Types a message and sends it (no waiting for a reply). */
export async function typeAndSend(ctx, text) {
  log(`sending: ${JSON.stringify(text)}`);
  const input = await ctx.session.waitForElement(css("composer-input"));
  await input.sendKeys(text);
  const send = await ctx.session.findElement(css("send-button"));
  await waitFor(() => send.enabled(), { message: "the send button to be enabled" });
  await send.click();
}

/**
 * Sends `text` and waits for the turn to end, however it ends: a persona
 * reply, a tool's note (a message that asks for something to be saved may
 * be done rather than answered) or a failure. Waits are on the app's state,
 * never on the model's words. Returns the last message: `{ role, seq }`.
 */
export async function sendAndAwaitAnswer(ctx, text, { timeout = REPLY_TIMEOUT_MS } = {}) {
  const before = (await ctx.session.execute(READ_MESSAGES)).length;
  await typeAndSend(ctx, text);
  const messages = await waitFor(
    async () => {
      const failed = await ctx.session.findElements(css("message-failed"));
      const streaming = await ctx.session.findElements(css("message-streaming"));
      const now = await ctx.session.execute(READ_MESSAGES);
      return streaming.length === 0 && (now.length >= before + 2 || failed.length > 0) ? now : null;
    },
    { timeout, interval: 250, message: `${ctx.label}: the answer to be complete (${timeout / 1000} s)` },
  );
  const last = messages.at(-1);
  log(`  answered with a ${last.role} message (seq ${last.seq})`);
  return last;
}

export async function verifyLedger(ctx) {
  log("verifying the ledger");
  await openTab(ctx, "ledger");
  await ctx.session.waitForElement(css("event-row"), 15_000);
  await (await ctx.session.waitForElement(css("verify-button"))).click();
  const result = await ctx.session.findElement(css("verify-result"));
  const ok = await waitFor(() => result.attribute("data-ok"), { timeout: 60_000, message: "the verify result" });
  const text = (await result.text()).trim();
  const events = Number(await result.attribute("data-events"));
  log(`  ${text}`);
  await shot(ctx, "ledger-verified");
  check(ok === "true", `the ledger did not verify: ${text}`);
  check(text.startsWith("✓"), `the verify result does not say the chain holds: ${text}`);
  check(Number.isFinite(events) && events > 0, `the verify result counts no events: ${text}`);
  return { events, text };
}

/** Adds a provider account in Settings and checks the key went nowhere visible. */
export async function addAccount(ctx, { name, baseUrl, key, model }) {
  log(`adding account ${name}`);
  await openTab(ctx, "settings");
  await (await ctx.session.waitForElement(css("account-name"))).sendKeys(name);
  await (await ctx.session.findElement(css("account-base-url"))).sendKeys(baseUrl);
  const keyInput = await ctx.session.findElement(css("account-key"));
  check((await keyInput.attribute("type")) === "password", "the API key field is not a password field");
  await keyInput.sendKeys(key);
  await (await ctx.session.findElement(css("account-model"))).sendKeys(model);
  await (await ctx.session.findElement(css("account-submit"))).click();

  const item = await ctx.session.waitForElement(css("account-item", `[data-name="${cssString(name)}"]`), 15_000);
  const indicators = await item.findAll(css("account-key-indicator"));
  check(indicators.length === 1, `account ${name} is listed without the "key in keychain" indicator`);
  check((await item.text()).includes(baseUrl), `account ${name} is listed without its base URL`);
  check((await keyInput.property("value")) === "", "the API key field was not cleared after submit");
  const source = await ctx.session.source();
  check(!source.includes(key), "the page source still contains the API key after submit");
  await shot(ctx, "account-added");
}

/**
 * Adds a model through the in-app file chooser, with the keyboard: a folder
 * holding a second name for the installed model file (a hard link, so nothing
 * is copied twice), typed into the chooser's path bar, then Enter on the file.
 */
export async function chooseModelFile(ctx) {
  const home = process.env.LEDGERMIND_HOME;
  if (!home) {
    log("  (no LEDGERMIND_HOME: the model chooser step is skipped)");
    return;
  }
  // The smallest model (SmolLM2 when present): the app copies the chosen file.
  const ggufs = (await readdir(join(home, "models"))).filter((f) => f.endsWith(".gguf")).sort();
  const installed = ggufs.find((f) => f.startsWith("SmolLM2")) ?? ggufs[0];
  check(installed, `no .gguf model in ${home}/models`);
  const folder = await mkdtemp(join(tmpdir(), "lm-e2e-models-"));
  await link(join(home, "models", installed), join(folder, "e2e-chosen.gguf"));
  await writeFile(join(folder, "notes.txt"), "not a model");
  log(`choosing ${folder}/e2e-chosen.gguf in the file chooser`);
  await openTab(ctx, "settings");
  await (await ctx.session.waitForElement(css("model-browse"))).click();
  const path = await ctx.session.waitForElement(css("chooser-path"));
  await waitFor(async () => (await path.property("value")) !== "", { timeout: 10_000, message: "the chooser to open a folder" });
  await path.clear();
  await path.sendKeys(folder + Keys.ENTER);
  const names = async () =>
    Promise.all((await ctx.session.findElements(css("chooser-entry"))).map((e) => e.attribute("data-name")));
  await waitFor(async () => (await names()).join() === "e2e-chosen.gguf", { timeout: 10_000, message: "the folder's model (and only it) to be listed" });
  await shot(ctx, "file-chooser");
  await (await ctx.session.findElement(css("chooser-list"))).sendKeys(Keys.ENTER);
  await waitFor(async () => (await ctx.session.findElements(css("file-chooser"))).length === 0, { timeout: 10_000, message: "the chooser to close" });
  await waitFor(async () => (await readdir(join(home, "models"))).includes("e2e-chosen.gguf"), { timeout: 60_000, message: "the chosen model to be copied into the models folder" });
  await waitFor(async () => (await ctx.session.source()).includes("e2e-chosen"), { timeout: 15_000, message: "the chosen model to be offered in the app" });
  await shot(ctx, "model-chosen");
}

/**
 * Switches the interface language in Settings and waits for the words to
 * change (Portuguese is loaded on first use). The choice is kept in the web
 * view's storage: the next start renders in it from the first frame.
 */
export async function setLanguage(ctx, code, chatLabel) {
  log(`switching the interface to ${code}`);
  await openTab(ctx, "settings");
  const select = await ctx.session.waitForElement(css("language-select"));
  await select.click();
  await (await ctx.session.findElement(`[data-testid="language-select"] option[value="${code}"]`)).click();
  const nav = await ctx.session.findElement(css("nav-chat"));
  await waitFor(async () => (await nav.text()).includes(chatLabel), { timeout: 10_000, message: `the tabs to read ${chatLabel}` });
  await shot(ctx, `language-${code}`);
}

// ---- checkpoints ---------------------------------------------------------------

const slotCss = (testid, slot) => css(testid, `[data-slot="${slot}"]`);

/** Waits until no checkpoint operation holds the window. */
async function waitCheckpointIdle(ctx, what) {
  await waitFor(async () => (await ctx.session.findElements(css("checkpoint-busy"))).length === 0, {
    timeout: 60_000,
    message: `the checkpoint operation (${what}) to finish`,
  });
}

async function personaNames(ctx) {
  return ctx.session.execute(
    `return Array.from(document.querySelectorAll('[data-testid="persona-item"]')).map(function (el) { return el.getAttribute('data-name'); });`,
  );
}

/**
 * Save a manual slot, change something (a new persona), restore the slot (the
 * persona is gone), undo the restore (it is back). Nothing is lost either way.
 */
export async function checkpointRoundTrip(ctx, { slot, name, persona } = SCENARIO.checkpoint) {
  log(`checkpoints: saving slot ${slot} as ${JSON.stringify(name)}`);
  await openTab(ctx, "checkpoints");
  const row = await ctx.session.waitForElement(slotCss("checkpoint-slot", slot), 15_000);
  await shot(ctx, "checkpoints-open");
  const overwrite = (await row.attribute("data-filled")) === "true";
  const input = await ctx.session.findElement(slotCss("checkpoint-name-input", slot));
  await input.clear();
  await input.sendKeys(name);
  await shot(ctx, "checkpoint-named");
  await (await ctx.session.findElement(slotCss("checkpoint-save", slot))).click();
  if (overwrite) {
    log(`  slot ${slot} was filled: confirming the overwrite`);
    await (await ctx.session.waitForElement(slotCss("checkpoint-confirm", slot))).click();
  }
  await waitFor(
    async () => {
      const el = await ctx.session.findElement(slotCss("checkpoint-slot", slot));
      const value = await (await ctx.session.findElement(slotCss("checkpoint-name-input", slot))).property("value");
      return (await el.attribute("data-filled")) === "true" && value === name && (await ctx.session.findElements(slotCss("checkpoint-restore", slot))).length === 1;
    },
    { timeout: 60_000, message: `slot ${slot} to hold ${JSON.stringify(name)}` },
  );
  await waitCheckpointIdle(ctx, "save");
  await shot(ctx, "checkpoint-saved");

  check(!(await personaNames(ctx)).includes(persona.name), `persona ${persona.name} exists before it was created`);
  await createPersona(ctx, persona);
  const withBo = await personaNames(ctx);
  log(`  personas after the change: ${withBo.join(", ")}`);

  log(`checkpoints: restoring slot ${slot}`);
  await openTab(ctx, "checkpoints");
  await (await ctx.session.waitForElement(slotCss("checkpoint-restore", slot))).click();
  const undo = await ctx.session.waitForElement(css("undo-restore"), 60_000);
  await waitCheckpointIdle(ctx, "restore");
  await waitFor(async () => !(await personaNames(ctx)).includes(persona.name), {
    timeout: 15_000,
    message: `persona ${persona.name} to leave the list after the restore`,
  });
  const restored = await personaNames(ctx);
  log(`  personas after the restore: ${restored.join(", ")}`);
  check(restored.includes(SCENARIO.persona.name), `${SCENARIO.persona.name} is missing after restoring slot ${slot}`);
  const banner = await ctx.session.findElement(css("restore-banner"));
  check((await banner.text()).includes(String(slot)), `the restore banner does not name slot ${slot}`);
  await shot(ctx, "checkpoint-restored");

  log("checkpoints: undoing the restore");
  await undo.click();
  await waitFor(async () => (await personaNames(ctx)).includes(persona.name), {
    timeout: 60_000,
    message: `persona ${persona.name} to come back after undoing the restore`,
  });
  await waitCheckpointIdle(ctx, "undo");
  await waitFor(async () => (await (await ctx.session.findElement(css("restore-banner"))).attribute("data-kind")) === "undone", {
    message: "the banner to say the restore was undone",
  });
  const after = await personaNames(ctx);
  log(`  personas after the undo: ${after.join(", ")}`);
  check(after.includes(SCENARIO.persona.name), `${SCENARIO.persona.name} is missing after undoing the restore`);
  await shot(ctx, "checkpoint-undone");
}

/** Session 2: the persona and the conversation survived a restart. */
export async function checkHistory(ctx, { persona = SCENARIO.persona.name, message = SCENARIO.message } = {}) {
  await waitForPersona(ctx, persona);
  await selectPersona(ctx, persona);
  const messages = await waitFor(
    async () => {
      const list = await readMessages(ctx);
      const human = list.some((m) => m.role === "human" && m.text.includes(message));
      const reply = list.some((m) => m.role === "persona" && m.text.trim().length > 0);
      return human && reply ? list : null;
    },
    { timeout: 30_000, message: `the earlier conversation with ${persona}` },
  );
  log(`  history holds ${messages.length} message(s)`);
  await shot(ctx, "history");
  return messages;
}

// ---- phases ------------------------------------------------------------------------

/** First run: create a persona, talk to it, round-trip a checkpoint, verify the ledger, add an account. */
export async function firstRun(ctx) {
  await waitForPersona(ctx, "Ei");
  await shot(ctx, "started");
  await createPersona(ctx, SCENARIO.persona);
  await selectPersona(ctx, SCENARIO.persona.name);
  await shot(ctx, "chat-open");
  await sendAndAwaitReply(ctx, SCENARIO.message);
  await checkpointRoundTrip(ctx);
  await verifyLedger(ctx);
  await addAccount(ctx, SCENARIO.account);
  await chooseModelFile(ctx);
  await setLanguage(ctx, "pt-BR", "Conversa");
}

/** After a restart: the history is still there (with the undone restore's persona) and still verifies. */
export async function restartRun(ctx) {
  // Started in Portuguese, the language chosen before the restart.
  const nav = await ctx.session.waitForElement(css("nav-chat"), STARTUP_TIMEOUT_MS);
  check((await nav.text()).includes("Conversa"), `the app did not start in Portuguese: ${await nav.text()}`);
  await checkHistory(ctx);
  await waitForPersona(ctx, SCENARIO.checkpoint.persona.name, 15_000);
  await verifyLedger(ctx);
  await setLanguage(ctx, "en", "Chat");
}

/** Runs `body` in a fresh app session; on failure saves a screenshot and the page first. */
export async function withSession(cfg, label, body) {
  const ctx = await startSession(cfg, label);
  try {
    await body(ctx);
  } catch (error) {
    await saveFailureState(ctx);
    throw error;
  } finally {
    await endSession(ctx);
  }
}

export async function main() {
  const cfg = config();
  const started = Date.now();
  if (cfg.phase === "first" || cfg.phase === "all") await withSession(cfg, "run1", firstRun);
  if (cfg.phase === "restart" || cfg.phase === "all") await withSession(cfg, "run2", restartRun);
  if (!["first", "restart", "all"].includes(cfg.phase)) throw new Error(`unknown LEDGERMIND_E2E_PHASE ${cfg.phase}`);
  log(`PASSED (${cfg.phase}) in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${cfg.artifacts}`);
}

/**
 * Runs `main` when `moduleUrl` is the script node was started with (each
 * scenario file is both a runnable script and a module of helpers): exits 0,
 * or 1 with a one-line reason (the stack with LEDGERMIND_E2E_DEBUG).
 */
export function runIfMain(moduleUrl, main) {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(resolve(process.argv[1])).href) return;
  main().then(
    () => process.exit(0),
    (error) => {
      console.error(`\n[e2e] FAILED: ${error?.message ?? error}`);
      if (process.env.LEDGERMIND_E2E_DEBUG && error?.stack) console.error(error.stack);
      process.exit(1);
    },
  );
}

runIfMain(import.meta.url, main);
