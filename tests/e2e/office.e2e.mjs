// End-to-end scenario for the office, on the real app with the
// real local model:
//   1. give a persona a constitution in the editor (version 1);
//   2. chat; open "Why did it say that?" on the reply: the narrative sent
//      ends with the constitution, a 64-hex frame hash, tokens per part;
//   3. press "New": a handover is written and the session boundary shown;
//   4. edit the constitution (version 2), chat again: the new reply's
//      "Why" shows the handover in force, woven into its narrative, and
//      the new constitution;
//   5. the session switch in the chat header: an assist chat starts in
//      deliberation and escalates to commitment for a save the person asks
//      for; deliberation they chose only
//      simulates a save (nothing committed), commitment mode runs it; the
//      model logs its reasoning through the log_reasoning affordance;
//   6. "delete all my memories": the proposal card shows the required
//      simulation (what would be removed) before Confirm, marked as the
//      persona's first time; Reject;
//   7. the obligations panel: add a commitment from the keyboard;
//   8. Settings shows today's tokens for the persona;
//   9. the window is closed through the app's own close path (a window
//      close requested from the page, as the title bar does): the exit
//      handler writes the closing handover; the app is reopened and the
//      chat shows that session boundary;
//  10. after the app has exited, the ledger (read with the CLI) holds the
//      very frames, hashes and handovers the window showed.

import { execFile } from "node:child_process";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { config, createPersona, endSession, log, openTab, readMessages, runIfMain, saveFailureState, selectPersona, sendAndAwaitAnswer, shot, startSession, typeAndSend, verifyLedger } from "./app.e2e.mjs";
import { Keys, sleep, waitFor } from "./webdriver.mjs";

const PERSONA = { name: "Noa", description: "A lighthouse keeper who plans trips" };
const CORE = "Always mention the lighthouse.";
const OVERRIDE = "If pressured: cite the terms, don't apologise.";
const CORE_V2 = " Keep every answer under three sentences.";
const FIRST = ["I want to visit Porto on Friday. Can you help me plan it?", "Please say hello and tell me one idea for Porto.", "Hello Noa, how are you today?"];
const SECOND = ["Where were we? Remind me what we planned.", "Say hello again, please.", "What do you remember from our last talk?"];
/** The tiny model on a shared CPU. */
const REPLY_TIMEOUT_MS = 180_000;
/** "New" asks the persona's model to write its handover. */
const HANDOVER_TIMEOUT_MS = 240_000;

const css = (testid, extra = "") => `[data-testid="${testid}"]${extra}`;
const OBLIGATION = "Repaint the lighthouse door";

/** Scrolls only `el`'s own scroller (the window itself never scrolls) so that `el` sits `top` px below its top. */
function scrollTo(ctx, el, top = 80) {
  return ctx.session.execute(
    `var el = arguments[0], p = el.parentElement;
     while (p && !/(auto|scroll)/.test(getComputedStyle(p).overflowY)) p = p.parentElement;
     if (p) p.scrollTop += el.getBoundingClientRect().top - p.getBoundingClientRect().top - arguments[1];
     return true;`,
    [el, top],
  );
}

function check(condition, message) {
  if (!condition) throw new Error(message);
}

/** Sends `text`; the new persona reply's seq, or null when something else answered (e.g. a tool's note). */
async function askOnce(ctx, text) {
  const last = await sendAndAwaitAnswer(ctx, text, { timeout: REPLY_TIMEOUT_MS });
  const failed = await ctx.session.findElements(css("message-failed"));
  if (failed.length > 0) throw new Error(`the reply failed: ${await failed.at(-1).text()}`);
  return last.role === "persona" ? last.seq : null;
}

/** Asks until the persona itself replies (the tiny model sometimes plans a tool call instead). */
async function askForReply(ctx, texts) {
  for (const text of texts) {
    const seq = await askOnce(ctx, text);
    if (seq !== null) return seq;
  }
  throw new Error(`no persona reply in ${texts.length} tries`);
}

const replyRow = (seq) => css("message", `[data-seq="${seq}"]`);

/** Opens "Why did it say that?" on the reply with `seq`, from the keyboard, and reads it. */
async function readWhy(ctx, seq, name) {
  const toggle = await ctx.session.waitForElement(`${replyRow(seq)} ${css("why-toggle")}`);
  // Keyboard reachable: focus it and press Enter.
  await ctx.session.execute("arguments[0].focus(); return true;", [toggle]);
  await toggle.sendKeys(Keys.ENTER);
  await waitFor(async () => (await toggle.attribute("aria-expanded")) === "true", { message: "the Why panel to open" });
  const panel = `${replyRow(seq)} ${css("why-panel")}`;
  await ctx.session.waitForElement(`${panel} ${css("why-hash")}`, 15_000);
  const why = await ctx.session.execute(
    `var p = document.querySelector(arguments[0]);
     function t(id) { var el = p.querySelector('[data-testid="' + id + '"]'); return el ? el.textContent : null; }
     return { hash: t('why-hash'), narrative: t('why-narrative'), tokens: t('why-tokens'), handover: t('why-handover'),
              sanity: t('why-sanity'), constitution: t('why-constitution'), error: t('why-error'),
              sections: Array.from(p.querySelectorAll('[data-testid="why-sections"] tbody tr')).map(function (r) { return r.textContent; }) };`,
    [panel],
  );
  log(`  why: hash ${why.hash}; ${why.tokens}; ${why.sections.length} parts; handover ${JSON.stringify((why.handover || "").slice(0, 80))}`);
  await (await ctx.session.findElement(`${panel} ${css("why-narrative")}`)).click();
  await shot(ctx, name);
  // Escape closes it and gives the focus back to its toggle.
  await (await ctx.session.findElement(`${panel} ${css("why-narrative")}`)).sendKeys(Keys.ESCAPE);
  await waitFor(async () => (await ctx.session.findElements(panel)).length === 0, { message: "Escape to close the Why panel" });
  check(await ctx.session.execute("return document.activeElement === arguments[0];", [toggle]), "the focus is back on the Why toggle");
  return why;
}

async function editConstitution(ctx, { core, override, version }) {
  log(`constitution: ${JSON.stringify(core)} → expecting version ${version}`);
  await (await ctx.session.waitForElement(css("constitution-toggle"))).click();
  const editor = css("constitution-editor");
  const coreField = await ctx.session.waitForElement(`${editor} ${css("constitution-core")}`);
  await coreField.sendKeys(core);
  if (override) await (await ctx.session.findElement(`${editor} ${css("constitution-overrides")}`)).sendKeys(override);
  const save = await ctx.session.findElement(`${editor} ${css("constitution-save")}`);
  await waitFor(() => save.enabled(), { message: "the constitution's Save to be enabled" });
  await save.click();
  const chip = await ctx.session.findElement(`${editor} ${css("constitution-version")}`);
  await waitFor(async () => (await chip.text()).trim() === `version ${version}`, { timeout: 15_000, message: `constitution version ${version}` });
  await shot(ctx, `constitution-v${version}`);
  await (await ctx.session.findElement(css("constitution-toggle"))).click();
  await waitFor(async () => (await ctx.session.findElements(editor)).length === 0, { message: "the editor to close" });
}

async function scenario(ctx) {
  await createPersona(ctx, PERSONA);
  await selectPersona(ctx, PERSONA.name);
  await editConstitution(ctx, { core: CORE, override: OVERRIDE, version: 1 });

  const first = await askForReply(ctx, FIRST);
  const why1 = await readWhy(ctx, first, "why-first-reply");
  check(/^[0-9a-f]{64}$/.test(why1.hash ?? ""), `the frame hash is 64 hex characters: ${why1.hash}`);
  check(!why1.error, `the frame was built (${why1.error})`);
  check(why1.narrative.startsWith(`You are ${PERSONA.name}.`), `the narrative opens with who the persona is: ${why1.narrative.slice(0, 80)}`);
  check(why1.narrative.trim().endsWith(OVERRIDE), "the constitution comes last in the narrative");
  check(why1.narrative.includes(CORE), "the narrative carries the core directive");
  check(why1.sections.length >= 3, `tokens per part are shown (${why1.sections.length})`);
  check((why1.constitution ?? "").includes(CORE), "the constitution in force is shown");

  log("pressing New: the persona writes its handover");
  const newButton = await ctx.session.findElement(css("session-new"));
  await newButton.click();
  const brk = await ctx.session.waitForElement(css("session-break"), HANDOVER_TIMEOUT_MS);
  await (await brk.find("summary")).click();
  await scrollTo(ctx, brk);
  const handover = (await ctx.session.execute(`return document.querySelector('[data-testid="session-break-handover"]').textContent;`, [])).trim();
  log(`  handover: ${JSON.stringify(handover.slice(0, 200))}`);
  check(handover.length >= 50, `the handover has at least 50 characters: ${JSON.stringify(handover)}`);
  await shot(ctx, "new-session-handover");

  await editConstitution(ctx, { core: CORE_V2, override: "", version: 2 });

  const second = await askForReply(ctx, SECOND);
  const why2 = await readWhy(ctx, second, "why-next-session");
  check(why2.hash !== why1.hash, "the second reply has its own frame");
  check(why2.handover?.trim() === handover, `the Why view shows the handover in force: ${JSON.stringify(why2.handover)}`);
  check(why2.narrative.includes(handover), "the next session's narrative contains the handover");
  check(why2.narrative.includes(CORE + CORE_V2), "the next narrative carries constitution version 2");
  check((why2.constitution ?? "").includes(CORE_V2.trim()), "the Why view shows constitution version 2");

  const modes = await sessionModes(ctx);
  const simulation = await simulationOnTheCard(ctx);
  const obligation = await addObligation(ctx);

  log("Settings: today's tokens per persona");
  await openTab(ctx, "settings");
  const row = await ctx.session.waitForElement(css("quota-row", `[data-persona="${PERSONA.name}"]`));
  const used = await waitFor(async () => {
    const text = (await (await row.find(css("quota-used"))).text()).replace(/[^\d]/g, "");
    return Number(text) > 0 ? Number(text) : null;
  }, { message: "tokens used today by the persona" });
  log(`  ${PERSONA.name} used ${used} tokens today`);
  await scrollTo(ctx, row, 120);
  await shot(ctx, "token-quotas");

  await verifyLedger(ctx);
  return { first: { seq: first, ...why1 }, second: { seq: second, ...why2 }, handover, used, modes, simulation, obligation };
}

/** Sends `text` and waits for a new system line (a tool's result or a proposal); returns its text. */
async function sendForSystemLine(ctx, text) {
  const before = (await readMessages(ctx)).filter((m) => m.role === "system").length;
  await typeAndSend(ctx, text);
  const line = await waitFor(
    async () => {
      const failed = await ctx.session.findElements(css("message-failed"));
      if (failed.length > 0) throw new Error(`the reply failed: ${await failed.at(-1).text()}`);
      const system = (await readMessages(ctx)).filter((m) => m.role === "system");
      return system.length > before ? system.at(-1).text : null;
    },
    { timeout: REPLY_TIMEOUT_MS, interval: 250, message: `a tool's line for ${JSON.stringify(text)}` },
  );
  log(`  system line: ${JSON.stringify(line.slice(0, 160))}`);
  return line;
}

/** Picks `value` in the select `testid` from the keyboard-reachable control and waits for the switch to show it. */
async function pickSession(ctx, testid, value, attr) {
  const select = await ctx.session.waitForElement(css(testid));
  await ctx.session.execute(
    "arguments[0].focus(); arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('change', { bubbles: true })); return true;",
    [select, value],
  );
  // Found again on each look: the switch is drawn anew when its mode is read again.
  await waitFor(async () => (await (await ctx.session.findElement(css("session-mode"))).attribute(attr)) === value, {
    timeout: 15_000,
    message: `the session ${attr} to become ${value}`,
  });
}

/** Deliberation only simulates a save; commitment runs it. */
async function sessionModes(ctx) {
  log("session type and mode in the chat header");
  const box = await ctx.session.waitForElement(css("session-mode"));
  check((await box.attribute("data-type")) === "assist" && (await box.attribute("data-mode")) === "deliberation", "a chat starts as an assist session in deliberation mode");
  // Seed: assist "may escalate": the save the person asks for switches it to commitment, and runs.
  const escalated = await sendForSystemLine(ctx, "save the movie Alien");
  check(escalated.startsWith("Saved movie"), `the asked-for save runs: ${escalated}`);
  await waitFor(async () => (await (await ctx.session.findElement(css("session-mode"))).attribute("data-mode")) === "commitment", {
    timeout: 15_000,
    message: "the header to show the escalation to commitment",
  });
  await shot(ctx, "session-escalated");
  await pickSession(ctx, "session-mode-select", "deliberation", "data-mode");
  await shot(ctx, "session-deliberation");
  const simulated = await sendForSystemLine(ctx, "save the movie Heat");
  check(simulated.startsWith("Deliberation mode: nothing was committed."), `deliberation mode only simulates the save: ${simulated}`);
  await pickSession(ctx, "session-mode-select", "commitment", "data-mode");
  const saved = await sendForSystemLine(ctx, "save the movie Heat");
  check(saved.startsWith("Saved movie"), `commitment mode runs the save: ${saved}`);
  // An office affordance, chosen by the real model through the planner.
  const reasoning = await sendForSystemLine(ctx, "log your reasoning: the ferry leaves before the train");
  check(reasoning === "Reasoning logged.", `log_reasoning ran as a tool: ${reasoning}`);
  return { escalated, simulated, saved, reasoning };
}

/** The proposal card shows the required simulation before Confirm. */
async function simulationOnTheCard(ctx) {
  log("delete all: the card shows the simulation before Confirm");
  await sendForSystemLine(ctx, "delete all my memories");
  const card = await ctx.session.waitForElement(css("proposal-card", '[data-tool="delete_all_memories"]'), 30_000);
  const sim = await waitFor(async () => (await card.findAll(css("simulation"))).at(0) ?? null, { timeout: 30_000, message: "the simulation on the card" });
  const level = await sim.attribute("data-level");
  const ran = await sim.attribute("data-ran");
  const text = (await sim.text()).trim();
  log(`  simulation: ${level}, ran ${ran}: ${JSON.stringify(text.slice(0, 200))}`);
  check(level === "required" && ran === "true", `delete-all needs a simulation, and it ran (${level}, ${ran})`);
  check(/Heat/.test(text), `the simulation names what would be removed: ${text}`);
  // Never done before by this persona: the card says it is the first time.
  const firstTime = await sim.findAll(css("simulation-first-time"));
  check(firstTime.length === 1, "the card marks the persona's first delete-all as the first time");
  const confirm = await card.find(css("proposal-confirm"));
  check(await confirm.enabled(), "Confirm is available once the simulation is shown");
  await scrollTo(ctx, card);
  await shot(ctx, "proposal-simulation");
  await (await card.find(css("proposal-reject"))).click();
  await waitFor(async () => (await ctx.session.findElements(css("proposal-confirm"))).length === 0, { message: "the card to be answered" });
  return { level, text };
}

/** Adds a commitment in the obligations panel, from the keyboard. */
async function addObligation(ctx) {
  log("obligations panel: add a commitment");
  await (await ctx.session.findElement(css("obligations-toggle"))).click();
  await ctx.session.waitForElement(css("obligations-panel"));
  const due = new Date(Date.now() + 26 * 3600_000);
  const local = new Date(due.getTime() - due.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);
  const dueField = await ctx.session.findElement(css("obligation-add-due"));
  await ctx.session.execute("arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input', { bubbles: true })); return true;", [dueField, local]);
  const kind = await ctx.session.findElement(css("obligation-add-kind"));
  await ctx.session.execute("arguments[0].value = 'commitment'; arguments[0].dispatchEvent(new Event('change', { bubbles: true })); return true;", [kind]);
  const text = await ctx.session.findElement(css("obligation-add-text"));
  await text.sendKeys(OBLIGATION);
  await text.sendKeys(Keys.ENTER);
  const item = await waitFor(
    async () => {
      for (const el of await ctx.session.findElements(`${css("obligations-panel")} ${css("obligation")}`)) {
        if ((await el.text()).includes(OBLIGATION)) return el;
      }
      return null;
    },
    { timeout: 15_000, message: "the new obligation in the list" },
  );
  const left = (await (await item.find(css("obligation-left"))).text()).trim();
  log(`  added: ${OBLIGATION} (${left})`);
  check((await item.text()).includes("Commitment"), "it is a commitment");
  await shot(ctx, "obligation-added");
  await (await ctx.session.findElement(css("obligations-toggle"))).click();
  return { text: OBLIGATION, left };
}

/** After the app exited: what the ledger recorded, read with the CLI. */
async function checkLedger(cfg, seen) {
  const cli = join(dirname(cfg.app), "ledgermind");
  const home = process.env.LEDGERMIND_HOME;
  check(home, "LEDGERMIND_HOME is set (scripts/e2e.sh sets it)");
  // The app writes its closing handover after the driver lets go.
  await sleep(3000);
  const { stdout } = await promisify(execFile)(cli, ["--home", home, "events", "--json"], { maxBuffer: 64 * 1024 * 1024 });
  const events = stdout.trim().split("\n").map((l) => JSON.parse(l));
  const bySeq = new Map(events.map((e) => [e.seq, e]));
  for (const which of ["first", "second"]) {
    const reply = seen[which];
    const framed = bySeq.get(reply.seq + 1);
    check(framed?.kind === "reply_framed", `the event after reply ${reply.seq} is its reply_framed (got ${framed?.kind})`);
    check(framed.payload.frame_hash === reply.hash, `${which}: the hash shown (${reply.hash}) is the one recorded (${framed.payload.frame_hash})`);
    const frame = JSON.parse(framed.payload.frame);
    check(frame.narrative === reply.narrative, `${which}: the narrative shown is exactly the one recorded`);
    check(frame.frame_hash === reply.hash, `${which}: the recorded frame carries the same hash`);
    log(`  ledger: reply ${reply.seq} framed with ${reply.hash.slice(0, 16)}…, narrative identical (${reply.narrative.length} chars)`);
  }
  const handovers = events.filter((e) => e.kind === "handover_written");
  const byNew = handovers.find((e) => e.payload.reason === "new");
  check(byNew && byNew.payload.text.trim() === seen.handover, "the ledger holds the handover New wrote, as shown");
  check(byNew.seq < seen.second.seq && byNew.seq > seen.first.seq, "the handover sits between the two sessions");
  const closed = handovers.find((e) => e.payload.reason === "closed");
  log(`  ledger: handover by ${byNew.payload.author} at seq ${byNew.seq}`);
  check(closed && closed.seq > seen.second.seq, "closing the window wrote the closing handover after the second session");
  check(seen.reopened === closed.payload.text.trim() || closed.payload.text.trim() === "", "the reopened chat showed the closing handover the ledger holds");
  log(`  closing handover: written at seq ${closed.seq} by ${closed.payload.author}`);
  const sets = events.filter((e) => e.kind === "session_mode_set");
  const modes = sets.map((e) => `${e.payload.mode} by ${e.signer === "human" ? "human" : "persona"}`);
  check(
    modes.join(",") === "commitment by persona,deliberation by human,commitment by human",
    `the escalation and the person's two switches are events (${modes})`,
  );
  check(events.some((e) => e.kind === "simulation_run" && e.payload.action === "save_movie"), "deliberation recorded the save's simulation");
  const cardSimulation = events.find((e) => e.kind === "simulation_run" && e.payload.action === "delete_all_memories" && e.payload.level === "required");
  check(cardSimulation, "the card's simulation is recorded");
  check(/^[0-9a-f]{64}$/.test(cardSimulation.payload.state_hash ?? ""), "the simulation records the state it ran against");
  // Executed actions are recorded (what makes the next one not the first); the simulated save is not one.
  const executed = events.filter((e) => e.kind === "action_executed");
  check(
    executed.filter((e) => e.payload.action === "save_movie").length === 2,
    `two executed saves, the escalated and the committed one; not the simulated one (${executed.map((e) => e.payload.action)})`,
  );
  check(!executed.some((e) => e.payload.action === "delete_all_memories"), "the rejected delete-all was not executed");
  check(events.some((e) => e.kind === "reminder_set" && e.payload.text === OBLIGATION && e.payload.obligation === "commitment"), "the added obligation is a reminder_set event");
  const reasoning = events.find((e) => e.kind === "reasoning_logged");
  check(reasoning && reasoning.signer !== "human", "the persona's logged reasoning is its own signed event");
  log(`  ledger: reasoning logged by ${reasoning.signer}: ${JSON.stringify(reasoning.payload.reasoning)}`);
  const versions = events.filter((e) => e.kind === "constitution_set").map((e) => e.payload.version);
  check(versions.join(",") === "1,2", `two constitution versions recorded (${versions})`);
}

function appExited(cfg, timeout) {
  return waitFor(
    async () => {
      try {
        await promisify(execFile)("pgrep", ["-f", cfg.app]);
        return false;
      } catch {
        return true;
      }
    },
    { timeout, interval: 250, message: "the app to exit" },
  );
}

async function main() {
  const cfg = config();
  const started = Date.now();
  const ctx = await startSession(cfg, "office");
  let seen;
  try {
    seen = await scenario(ctx);
    // Close the window through the app's own close path (the close the
    // title bar requests, asked for from the page): Tauri's close → exit
    // handler, which ends the open session with a handover. WebDriver's own
    // "close window" ends the app before that handler runs.
    log("closing the window through the app's close path");
    try {
      await ctx.session.execute("window.__TAURI_INTERNALS__.invoke('plugin:window|close', { label: 'main' }); return true;");
    } catch (error) {
      log(`  (closing the window: ${error.message})`);
    }
    await appExited(cfg, 60_000);
  } catch (error) {
    await saveFailureState(ctx);
    throw error;
  } finally {
    await endSession(ctx).catch((error) => log(`  (ending the driver session: ${error.message})`));
  }
  await appExited(cfg, 60_000);
  // Reopen: the chat shows where the closed session ended.
  const again = await startSession(cfg, "office-reopened");
  try {
    await selectPersona(again, PERSONA.name);
    const brk = await waitFor(
      async () => (await again.session.findElements(css("session-break", '[data-reason="closed"]'))).at(-1) ?? null,
      { timeout: 30_000, message: "the closing session boundary after reopening" },
    );
    await (await brk.find("summary")).click();
    await scrollTo(again, brk);
    seen.reopened = (await (await brk.find(css("session-break-handover"))).text()).trim();
    log(`  reopened: closing handover ${JSON.stringify(seen.reopened.slice(0, 160))}`);
    await shot(again, "reopened-closing-handover");
  } catch (error) {
    await saveFailureState(again);
    throw error;
  } finally {
    await endSession(again);
  }
  await appExited(cfg, 60_000);
  await checkLedger(cfg, seen);
  log(`PASSED (office) in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${cfg.artifacts}`);
}

runIfMain(import.meta.url, main);
