// The default local model in the real window: a persona is told a few
// things, talked to about something else, then asked about what it was told
// three messages earlier, in English and in Portuguese. The answers must
// hold the fact, and the Portuguese question must be answered in Portuguese.
//
//   LEDGERMIND_APP=/path/to/ledgermind-desktop node tests/e2e/answers.e2e.mjs

import { config, createPersona, log, runIfMain, selectPersona, sendAndAwaitReply, shot, waitForPersona, withSession } from "./app.e2e.mjs";

/** The default model reads a longer prompt than the tiny one on a 2-core CI machine. */
const REPLY_TIMEOUT_MS = 180_000;

const PERSONA = { name: "Lia", description: "A warm friend who likes to chat" };

export const CONVERSATIONS = [
  {
    language: "en",
    told: ["My name is Marta and I live in Lisbon.", "My brother Tomás is a doctor."],
    filler: "I had a long day at work today.",
    question: "Which city do I live in?",
    expect: /lisbo/i,
  },
  {
    language: "pt-BR",
    told: ["Meu cachorro se chama Tobias e ele tem cinco anos.", "Eu trabalho como professora de música."],
    filler: "Hoje choveu o dia inteiro aqui.",
    question: "Qual é o nome do meu cachorro?",
    expect: /tobias/i,
  },
];

/** Everyday words only Portuguese uses: a reply with none of them is not Portuguese. */
const PORTUGUESE_WORDS = new Set(["o", "os", "um", "uma", "é", "seu", "sua", "que", "de", "da", "não", "você", "chama", "nome", "ele", "está"]);
const isPortuguese = (text) => text.toLowerCase().split(/[^\p{L}]+/u).some((w) => PORTUGUESE_WORDS.has(w));

function check(condition, message) {
  if (!condition) throw new Error(message);
}

export async function answers(ctx) {
  await waitForPersona(ctx, "Ei");
  await createPersona(ctx, PERSONA);
  await selectPersona(ctx, PERSONA.name);
  for (const c of CONVERSATIONS) {
    for (const line of c.told) await sendAndAwaitReply(ctx, line, { timeout: REPLY_TIMEOUT_MS });
    await sendAndAwaitReply(ctx, c.filler, { timeout: REPLY_TIMEOUT_MS });
    const { reply } = await sendAndAwaitReply(ctx, c.question, { timeout: REPLY_TIMEOUT_MS });
    await shot(ctx, `answer-${c.language}`);
    log(`  ${c.language} question ${JSON.stringify(c.question)} → ${JSON.stringify(reply)}`);
    check(c.expect.test(reply), `the ${c.language} answer does not hold what was told three messages earlier: ${JSON.stringify(reply)}`);
    if (c.language === "pt-BR") check(isPortuguese(reply), `the Portuguese question was not answered in Portuguese: ${JSON.stringify(reply)}`);
  }
}

export async function main() {
  const cfg = config();
  const started = Date.now();
  await withSession(cfg, "answers", answers);
  log(`PASSED in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${cfg.artifacts}`);
}

runIfMain(import.meta.url, main);
