// End-to-end scenario for conversations on the bundled small model through
// the real window: tell the persona two facts, ask about them, and check the
// answers name them; then open "Why did it say that?" and check it shows the
// compact prompt that was sent (no ledger vocabulary in it).

import { config, createPersona, endSession, log, sendAndAwaitReply, shot, startSession, runIfMain } from "../app.e2e.mjs";

const PERSONA = { name: "Lia", description: "A warm friend" };
const css = (testid, extra = "") => `[data-testid="${testid}"]${extra}`;

function check(ok, message) {
  if (!ok) throw new Error(message);
}

export async function main() {
  const cfg = config();
  const started = Date.now();
  const ctx = await startSession(cfg, "conversation");
  try {
    await createPersona(ctx, PERSONA);
    await sendAndAwaitReply(ctx, "Hi! My name is Marta and I live in Lisbon.");
    await sendAndAwaitReply(ctx, "I work as a nurse at a children's hospital.");
    const where = await sendAndAwaitReply(ctx, "Where do I live?");
    check(/lisbon/i.test(where.reply), `the answer to "Where do I live?" does not name Lisbon: ${where.reply}`);
    const job = await sendAndAwaitReply(ctx, "What is my job?");
    check(/nurse/i.test(job.reply), `the answer to "What is my job?" does not name the job: ${job.reply}`);
    await shot(ctx, "facts-answered");

    log("opening \"Why did it say that?\" under the last reply");
    const toggles = await ctx.session.findElements(css("why-toggle"));
    check(toggles.length > 0, "no \"Why did it say that?\" under the replies");
    await toggles.at(-1).click();
    const profile = await ctx.session.waitForElement(css("why-sent-profile"), 15_000);
    const profileText = await profile.text();
    log(`  ${profileText}`);
    check(/compact/.test(profileText), `the reply frame does not name the compact profile: ${profileText}`);
    const sent = await (await ctx.session.findElement(css("why-sent"))).text();
    check(sent.includes("What is my job?"), "the prompt shown is not the one sent (the question is missing)");
    for (const word of ["message_added", "governance", "constitution", "frame_hash"]) {
      check(!sent.includes(word), `the compact prompt holds ledger vocabulary: ${word}`);
    }
    await shot(ctx, "why-compact-prompt");
  } catch (error) {
    await shot(ctx, "failure");
    throw error;
  } finally {
    await endSession(ctx);
  }
  log(`PASSED (conversation) in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${cfg.artifacts}`);
}

runIfMain(import.meta.url, main);
