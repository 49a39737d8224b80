// End-to-end scenario for personas that remember, on the real app
// with the real local model: chat with a persona, wait for the low-priority
// extraction, see what it learned in "What they know about you", confirm one
// memory, forget another, then see "Memories used" under a later reply.
//
// Then persona management and chat state: create a persona from a short
// description (the local model fills its traits and topics), see and edit
// them, pause it (a message sent meanwhile waits, is marked "always" and is
// recalled into the composer), resume, an unread count for a reply that
// arrives while another chat is open, archive and unarchive.
//
// The extraction runs once a conversation has been quiet for
// LEDGERMIND_EXTRACTION_DELAY_SECS (scripts/e2e.sh sets a short one).

import {
  config,
  createPersona,
  endSession,
  log,
  openTab,
  selectPersona,
  sendAndAwaitAnswer,
  shot,
  startSession,
  verifyLedger,
  runIfMain,
  saveFailureState,
} from "./app.e2e.mjs";
import { waitFor } from "./webdriver.mjs";

const PERSONA = { name: "Lia", description: "A warm friend who remembers" };
const FIRST = "My name is Marta and I live in Lisbon. My brother Tomás is a doctor. I love playing the piano.";
const SECONDS = [
  "Do you remember where I live and what I love playing?",
  "Please answer me in one sentence: what do you know about my brother?",
  "Say hello and tell me one thing you remember about me.",
];
/** Extraction waits for the quiet delay, then runs the tiny model on a shared CPU. */
const EXTRACTION_TIMEOUT_MS = 300_000;

/**
 * A reply on a shared 2-core machine can take minutes (a long answer from
 * the local model): a budget generous enough for the longest reply the
 * model may write.
 */
const REPLY_TIMEOUT_MS = 600_000;

const css = (testid, extra = "") => `[data-testid="${testid}"]${extra}`;

const READ_MEMORIES = `
  return Array.from(document.querySelectorAll('[data-testid="memory-view"] > ul [data-testid="memory-item"], [data-testid="memory-view"] [data-testid^="memory-list-"] [data-testid="memory-item"]')).map(function (el) {
    var text = el.querySelector('[data-testid="memory-text"]');
    return { id: el.getAttribute('data-id'), kind: el.getAttribute('data-kind'), validation: el.getAttribute('data-validation'), text: text ? text.textContent : '' };
  });`;

function check(condition, message) {
  if (!condition) throw new Error(message);
}

async function readMemories(ctx) {
  return ctx.session.execute(READ_MEMORIES);
}

async function memoryButton(ctx, id, testid) {
  return ctx.session.waitForElement(`[data-testid="memory-view"] [data-testid="memory-item"][data-id="${id}"] [data-testid="${testid}"]`);
}

async function scenario(ctx) {
  await createPersona(ctx, PERSONA);
  await selectPersona(ctx, PERSONA.name);
  // Any answer will do here (a reply or a tool's note): extraction follows either.
  await sendAndAwaitAnswer(ctx, FIRST, { timeout: REPLY_TIMEOUT_MS });
  await shot(ctx, "first-answer");

  log("waiting for the extraction to fill 'What they know about you'");
  await openTab(ctx, "memory");
  await ctx.session.waitForElement(css("memory-view"));
  const learned = await waitFor(
    async () => {
      const items = await readMemories(ctx);
      return items.length >= 2 ? items : null;
    },
    { timeout: EXTRACTION_TIMEOUT_MS, interval: 1000, message: "memories extracted from the conversation" },
  );
  log(`  learned ${learned.length}: ${learned.map((m) => `${m.kind}: ${m.text}`).join(" | ").slice(0, 400)}`);
  check(learned.every((m) => m.validation === "none"), "new memories start unconfirmed");
  await shot(ctx, "memories-learned");

  // The extractor may learn one sentence twice under two kinds (a trait and
  // a quote): forget one whose words no other memory shares, so that the
  // words under the reply can only come from the forgotten one.
  const keep = learned[0];
  const unique = learned.filter((m) => m !== keep && learned.every((o) => o === m || !o.text.includes(m.text)));
  const drop = unique.at(-1) ?? learned.at(-1);
  log(`confirming ${JSON.stringify(keep.text)}`);
  await (await memoryButton(ctx, keep.id, "memory-confirm")).click();
  await waitFor(async () => (await readMemories(ctx)).some((m) => m.id === keep.id && m.validation === "human"), {
    message: "the memory to be confirmed",
  });
  log(`forgetting ${JSON.stringify(drop.text)}`);
  await (await memoryButton(ctx, drop.id, "memory-forget")).click();
  await waitFor(async () => !(await readMemories(ctx)).some((m) => m.id === drop.id), { message: "the memory to be forgotten" });
  await shot(ctx, "confirmed-and-forgotten");

  log("asking about it, to see the memories the reply used");
  await openTab(ctx, "chat");
  // The tiny model sometimes plans a tool call instead of answering (a
  // system message, no reply): ask again, up to three times.
  let answered = false;
  for (let attempt = 0; attempt < 3 && !answered; attempt++) {
    answered = (await sendAndAwaitAnswer(ctx, SECONDS[attempt], { timeout: REPLY_TIMEOUT_MS })).role === "persona";
  }
  check(answered, "no persona reply to the follow-up questions in three tries");
  const toggles = await waitFor(
    async () => {
      const found = await ctx.session.findElements(css("memories-used-toggle"));
      return found.length >= 1 ? found : null;
    },
    { timeout: 15_000, message: 'a "Memories used" toggle under the reply' },
  );
  await toggles.at(-1).click();
  const used = await waitFor(
    async () => {
      const list = await ctx.session.findElements(`${css("memories-used")} > *`);
      return list.length > 0 ? list.length : null;
    },
    { timeout: 15_000, message: "the memories used by the last reply" },
  );
  const usedText = await (await ctx.session.findElement(css("memories-used"))).text();
  log(`  the reply used ${used} item(s): ${JSON.stringify(usedText.slice(0, 300))}`);
  check(!usedText.includes(drop.text) || drop.text.length < 4, "a forgotten memory is not shown as used");
  await shot(ctx, "memories-used");

  const { events } = await verifyLedger(ctx);
  log(`  ledger verifies with ${events} events`);
}

// ---- persona management and chat state ----------------------------------------

const NOOR = { name: "Noor", description: "A cheerful gardener who talks about tomatoes and rain" };
/** The fill is normal-priority work for the tiny model on a shared CPU. */
const FILL_TIMEOUT_MS = 240_000;
const personaItem = (name) => css("persona-item", `[data-name="${name}"]`);

async function openEditor(ctx) {
  await (await ctx.session.waitForElement(css("persona-edit"))).click();
  return ctx.session.waitForElement(css("persona-editor"));
}

const READ_EDITOR = `
  var q = function (id) { return document.querySelector('[data-testid="' + id + '"]'); };
  var source = q('persona-profile-source');
  return {
    source: source ? source.getAttribute('data-source') : null,
    short: q('persona-edit-short') ? q('persona-edit-short').value : null,
    long: q('persona-edit-long') ? q('persona-edit-long').value : null,
    traits: q('persona-edit-traits') ? q('persona-edit-traits').value : null,
    topics: Array.from(document.querySelectorAll('[data-testid="persona-edit-topic-name"]')).map(function (e) { return e.value; }),
    heartbeat: q('persona-edit-heartbeat') ? q('persona-edit-heartbeat').value : null,
  };`;

async function closeEditor(ctx) {
  await (await ctx.session.findElement(css("persona-edit-cancel"))).click();
  await waitFor(async () => (await ctx.session.findElements(css("persona-editor"))).length === 0, { message: "the editor to close" });
}

async function personaScenario(ctx) {
  await createPersona(ctx, NOOR);
  await selectPersona(ctx, NOOR.name);

  log("waiting for the local model to fill in traits and topics");
  await openEditor(ctx);
  const filled = await waitFor(
    async () => {
      const e = await ctx.session.execute(READ_EDITOR);
      return e.source && e.source !== "pending" ? e : null;
    },
    { timeout: FILL_TIMEOUT_MS, interval: 1000, message: "the persona fill to finish (llm or fallback)" },
  );
  log(`  fill: ${filled.source}; traits ${JSON.stringify(filled.traits)}; topics ${JSON.stringify(filled.topics)}; long ${JSON.stringify(filled.long.slice(0, 160))}`);
  check(filled.short === NOOR.description, `the human's words are kept verbatim (got ${JSON.stringify(filled.short)})`);
  check(filled.source === "llm" || filled.source === "fallback", `a settled fill (got ${filled.source})`);
  if (filled.source === "llm") check(filled.traits.length > 0 || filled.topics.length > 0, "the model filled traits or topics");
  await shot(ctx, "persona-filled");

  log("editing traits, a topic and the heartbeat");
  const traits = await ctx.session.findElement(css("persona-edit-traits"));
  await traits.clear();
  await traits.sendKeys("cheerful, patient");
  await (await ctx.session.findElement(css("persona-edit-add-topic"))).click();
  const names = await ctx.session.findElements(css("persona-edit-topic-name"));
  await names.at(-1).sendKeys("compost");
  const heartbeat = await ctx.session.findElement(css("persona-edit-heartbeat"));
  await heartbeat.clear();
  await heartbeat.sendKeys("45");
  await shot(ctx, "persona-editing");
  await (await ctx.session.findElement(css("persona-edit-save"))).click();
  await waitFor(async () => (await ctx.session.findElements(css("persona-editor"))).length === 0, { message: "the editor to save and close" });
  await openEditor(ctx);
  const edited = await waitFor(async () => {
    const e = await ctx.session.execute(READ_EDITOR);
    return e.traits !== null ? e : null;
  }, { message: "the editor to load again" });
  check(edited.traits === "cheerful, patient", `traits saved (got ${JSON.stringify(edited.traits)})`);
  check(edited.topics.includes("compost"), `topic saved (got ${JSON.stringify(edited.topics)})`);
  check(edited.heartbeat === "45", `heartbeat saved (got ${edited.heartbeat})`);
  check(edited.source === "human", `marked as edited by the human (got ${edited.source})`);
  await closeEditor(ctx);

  log("pausing Noor for an hour");
  await (await ctx.session.findElement(css("persona-pause"))).click();
  await (await ctx.session.waitForElement(css("persona-pause-confirm"))).click();
  await ctx.session.waitForElement(css("persona-paused-chip"));
  await ctx.session.waitForElement(`${personaItem(NOOR.name)} ${css("persona-paused")}`);
  const text = "Are you awake? I wanted to ask about the seedlings";
  const input = await ctx.session.waitForElement(css("composer-input"));
  await input.sendKeys(text);
  await (await ctx.session.findElement(css("send-button"))).click();
  const message = await ctx.session.waitForElement(css("message", '[data-role="human"]'));
  log("  the message waits; marking it 'always' in the prompt");
  await (await ctx.session.findElement(`${css("message-context")} option[value="always"]`)).click();
  await waitFor(async () => (await message.attribute("data-context")) === "always", { message: "the context status to be saved" });
  await ctx.session.waitForElement(css("recall-message"));
  await shot(ctx, "paused-message-waiting");
  log("  recalling it into the composer");
  await (await ctx.session.findElement(css("recall-message"))).click();
  await waitFor(async () => (await ctx.session.findElements(css("message"))).length === 0, { message: "the recalled message to leave the chat" });
  const draft = await ctx.session.execute(`return document.querySelector('[data-testid="composer-input"]').value;`);
  check(draft === text, `the recalled text is back in the composer (got ${JSON.stringify(draft)})`);
  await shot(ctx, "recalled");

  log("resuming, sending, and reading another chat while Noor answers");
  await (await ctx.session.findElement(css("persona-resume"))).click();
  await waitFor(async () => (await ctx.session.findElements(css("persona-paused-chip"))).length === 0, { message: "the pause to end" });
  await (await ctx.session.findElement(css("send-button"))).click();
  await ctx.session.waitForElement(css("message", '[data-role="human"]'));
  await selectPersona(ctx, "Ei");
  const badge = await ctx.session.waitForElement(`${personaItem(NOOR.name)} ${css("unread-badge")}`, REPLY_TIMEOUT_MS);
  log(`  unread badge on Noor: ${JSON.stringify(await badge.text())}`);
  await shot(ctx, "unread-count");
  await selectPersona(ctx, NOOR.name);
  await waitFor(async () => (await ctx.session.findElements(`${personaItem(NOOR.name)} ${css("unread-badge")}`)).length === 0, {
    message: "the unread count to clear once the chat is open",
  });

  log("archiving and unarchiving Noor");
  await (await ctx.session.findElement(css("persona-archive"))).click();
  await waitFor(async () => (await ctx.session.findElements(personaItem(NOOR.name))).length === 0, { message: "Noor to leave the list" });
  await (await ctx.session.findElement(css("archived-toggle"))).click();
  await (await ctx.session.waitForElement(css("archived-persona", `[data-name="${NOOR.name}"]`))).click();
  await shot(ctx, "archived-list");
  await (await ctx.session.waitForElement(css("persona-unarchive"))).click();
  await ctx.session.waitForElement(personaItem(NOOR.name));
  await shot(ctx, "unarchived");
}

async function main() {
  const cfg = config();
  const started = Date.now();
  const ctx = await startSession(cfg, "memory");
  try {
    // The memory scenario first: its checks must see only what Lia learned.
    await scenario(ctx);
    await personaScenario(ctx);
  } catch (error) {
    await saveFailureState(ctx);
    throw error;
  } finally {
    await endSession(ctx);
  }
  log(`PASSED (memory) in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${cfg.artifacts}`);
}

runIfMain(import.meta.url, main);
