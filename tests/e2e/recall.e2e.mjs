// End-to-end scenario for a persona that remembers something said hundreds
// of messages earlier, on the real app with the real local model: a
// conversation of four months (400 messages, imported through the CLI as a
// person moving from another app would) holds one line about a
// grandmother's farm near its start, and other lines about the same
// grandmother, other farms and other towns later on. Asked about the farm in
// the window, the persona's reply shows that early line under "Memories
// used".

import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { dirname, join } from "node:path";

import {
  config,
  endSession,
  log,
  readMessages,
  runIfMain,
  saveFailureState,
  selectPersona,
  sendAndAwaitAnswer,
  shot,
  startSession,
  waitForPersona,
} from "./app.e2e.mjs";
import { waitFor } from "./webdriver.mjs";

const PERSONA = "Rosa";
const FACT = "When I was a kid I spent every summer at my grandmother's farm in Quixadá, picking cashews with my cousins.";
const QUESTION = "Where was my grandmother's farm?";
const EXPECTED = "Quixadá";
const MESSAGES = 400;
const FACT_AT = 10;
/** Four months: one message every eight hours. */
const START_S = Date.UTC(2026, 2, 1) / 1000;
const STEP_S = 8 * 3600;
const REPLY_TIMEOUT_MS = 600_000;

// Small talk of the kind a long chat is made of; some of it names the same
// grandmother, other farms and other towns, so the line asked about is not
// the only one that shares words with the question.
const SUBJECTS = ["My sister", "My grandmother", "My neighbour", "My boss", "My cousin Davi", "My friend Lúcia", "The bus driver", "My dog"];
const DOINGS = [
  "told me a long story about her trip to Fortaleza",
  "asked me to help with the groceries on Saturday",
  "loves the crossword in the Sunday paper",
  "was complaining about the rain all week",
  "bought a new bicycle that is far too big",
  "sent me photos of a farm fair in Sobral",
  "wants to learn to bake bread this winter",
  "watched the football match with me until late",
  "found an old recipe for cashew cake in a drawer",
  "keeps forgetting where the car keys are",
];
const REPLIES = [
  "That sounds like quite a week!",
  "Oh, I would love to hear more about that.",
  "Ha, that made me smile.",
  "How did that go in the end?",
  "That is so kind of them.",
  "I hope the weather gets better soon.",
];

function conversation() {
  const rows = [];
  let h = 0;
  for (let i = 0; i < MESSAGES; i++) {
    const human = i % 2 === 0;
    let text;
    if (human && i === FACT_AT) {
      text = FACT;
    } else if (human) {
      text = `${SUBJECTS[h % SUBJECTS.length]} ${DOINGS[(h * 7 + Math.floor(h / 8)) % DOINGS.length]}.`;
      h++;
    } else {
      text = REPLIES[(i * 5) % REPLIES.length];
    }
    rows.push({ id: `m${i}`, speaker: human ? "human" : PERSONA, text, timestamp: START_S + i * STEP_S });
  }
  return rows;
}

function cli(cfg, args) {
  const bin = join(dirname(cfg.app), "ledgermind");
  return execFileSync(bin, args, { encoding: "utf8", env: process.env, timeout: 600_000 });
}

async function scenario(ctx) {
  await waitForPersona(ctx, PERSONA);
  await selectPersona(ctx, PERSONA);
  const history = await readMessages(ctx);
  log(`  the chat holds ${history.length} messages before the question`);
  await shot(ctx, "long-history");

  const last = await sendAndAwaitAnswer(ctx, QUESTION, { timeout: REPLY_TIMEOUT_MS });
  const messages = await readMessages(ctx);
  const reply = messages.at(-1);
  log(`  reply (${last.role}): ${JSON.stringify(reply.text)}`);
  if (last.role !== "persona") throw new Error(`the question got a ${last.role} message, not a reply`);

  const toggles = await waitFor(
    async () => {
      const found = await ctx.session.findElements('[data-testid="memories-used-toggle"]');
      return found.length >= 1 ? found : null;
    },
    { timeout: 15_000, message: 'a "Memories used" toggle under the reply' },
  );
  await toggles.at(-1).click();
  const usedText = await waitFor(
    async () => {
      const lists = await ctx.session.findElements('[data-testid="memories-used"]');
      return lists.length ? (await lists.at(-1).text()) || null : null;
    },
    { timeout: 15_000, message: "the memories the reply used" },
  );
  log(`  memories used: ${JSON.stringify(usedText.slice(0, 400))}`);
  await shot(ctx, "memories-used");
  if (!usedText.includes(EXPECTED)) {
    throw new Error(`the line about the farm (said ${MESSAGES - FACT_AT} messages earlier) is not among the memories used`);
  }
}

async function main() {
  const cfg = config();
  const started = Date.now();
  if (!cfg.app || !process.env.LEDGERMIND_HOME) throw new Error("this scenario needs LEDGERMIND_APP and LEDGERMIND_HOME (scripts/e2e.sh sets both)");
  // Before the window opens, as a person importing an old chat would.
  const file = join(process.env.LEDGERMIND_HOME, "old-chat.json");
  writeFileSync(file, JSON.stringify(conversation()));
  log(`importing ${MESSAGES} messages into a new persona ${PERSONA} through the CLI`);
  cli(cfg, ["persona", "create", PERSONA, "--description", "A warm friend who remembers"]);
  log(`  ${cli(cfg, ["import-conversation", PERSONA, file, "--json"]).trim().slice(0, 300)}`);
  const ctx = await startSession(cfg, "recall");
  try {
    await scenario(ctx);
  } catch (error) {
    await saveFailureState(ctx);
    throw error;
  } finally {
    await endSession(ctx);
  }
  log(`PASSED (recall) in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${cfg.artifacts}`);
}

runIfMain(import.meta.url, main);
