// End-to-end scenario for the runtime (issue #6) through the real window with
// the real local model (SmolLM2-135M):
//   1. plain chat still streams;
//   2. "save the movie Inception": the model calls save_movie; the receipt
//      shows in the chat and the item in Saved items;
//   3. "delete the movie Inception": the model proposes delete_memory; the
//      card shows the exact arguments; Confirm → executed once → receipt;
//   4. "delete all my memories" (deterministic intent) → proposal → Reject;
//   5. the same again, left to expire → Confirm is refused (CONFIRMATION_EXPIRED).
//
// Run with a short confirmation lifetime (test-only variable):
//   LEDGERMIND_TEST_CONFIRMATION_TTL_SECS=25 E2E_PORT=4470 LEDGERMIND_E2E_SPECS=runtime \
//     scripts/with-keychain.sh scripts/e2e.sh

import { pathToFileURL } from "node:url";
import { config, endSession, log, openTab, readMessages, selectPersona, sendAndAwaitReply, shot, startSession, waitForPersona } from "./app.e2e.mjs";
import { sleep, waitFor } from "./webdriver.mjs";

const MODEL_TIMEOUT_MS = 120_000;
const css = (testid, extra = "") => `[data-testid="${testid}"]${extra}`;
const TTL_S = Number(process.env.LEDGERMIND_TEST_CONFIRMATION_TTL_SECS || "0");

function check(condition, message) {
  if (!condition) throw new Error(message);
}

async function count(ctx, selector) {
  return (await ctx.session.findElements(selector)).length;
}

/** Types a message and sends it (no waiting for a reply). */
async function send(ctx, text) {
  log(`sending: ${JSON.stringify(text)}`);
  const input = await ctx.session.waitForElement(css("composer-input"));
  await input.sendKeys(text);
  const button = await ctx.session.findElement(css("send-button"));
  await waitFor(() => button.enabled(), { message: "the send button to be enabled" });
  await button.click();
}

/** The newest system line in the chat (tool results, refusals, proposals). */
async function lastSystemLine(ctx) {
  const messages = await readMessages(ctx);
  return messages.filter((m) => m.role === "system").at(-1)?.text ?? "";
}

async function failedReplies(ctx) {
  return ctx.session.execute(
    `return Array.from(document.querySelectorAll('[data-testid="message-failed"]')).map(function (el) { return el.textContent.trim(); });`,
  );
}

/** Sends a command and waits for the model's tool call to finish (a receipt card). */
async function commandWithReceipt(ctx, text, tool) {
  const before = await count(ctx, css("tool-result"));
  await send(ctx, text);
  const started = Date.now();
  await waitFor(
    async () => {
      const failed = await failedReplies(ctx);
      if (failed.length > 0) throw new Error(`the reply failed: ${failed.at(-1)}`);
      if ((await count(ctx, css("tool-result"))) > before) return true;
      const line = await lastSystemLine(ctx);
      if (line.includes("refused") || line.includes("failed")) throw new Error(`the tool call was refused: ${line}`);
      return null;
    },
    { timeout: MODEL_TIMEOUT_MS, interval: 100, message: `the ${tool} receipt` },
  );
  const cards = await ctx.session.findElements(css("tool-result"));
  const card = cards.at(-1);
  const got = await card.attribute("data-tool");
  const summary = (await (await card.find(css("tool-result-summary"))).text()).trim();
  log(`  the model called ${got} after ${((Date.now() - started) / 1000).toFixed(1)} s: ${JSON.stringify(summary)}`);
  check(got === tool, `expected the model to call ${tool}, it called ${got}`);
  const receipt = await card.find(css("tool-receipt"));
  log(`  receipt: event #${await receipt.attribute("data-seq")} (${await receipt.attribute("data-kind")})`);
  return { summary, receipt };
}

/** Waits for the proposal card; returns its tool and exact arguments. */
async function awaitProposal(ctx, timeout = MODEL_TIMEOUT_MS) {
  const card = await ctx.session.waitForElement(css("proposal-card"), timeout);
  const tool = await card.attribute("data-tool");
  const args = (await (await card.find(css("proposal-args"))).text()).trim();
  log(`  proposal: ${tool} ${args.replace(/\s+/g, " ")}`);
  return { card, tool, args };
}

async function savedItems(ctx) {
  await openTab(ctx, "items");
  await waitFor(async () => (await count(ctx, css("items-list"))) + (await count(ctx, css("items-empty"))) > 0, {
    message: "the Saved items view to load",
  });
  const titles = await ctx.session.execute(
    `return Array.from(document.querySelectorAll('[data-testid="item-title"]')).map(function (el) { return el.textContent.trim(); });`,
  );
  return titles;
}

export async function runtimeScenario(ctx) {
  await waitForPersona(ctx, "Ei");
  await selectPersona(ctx, "Ei");

  // 1. Plain chat streams (no tool is plausible: the message is asked for directly).
  const plain = await sendAndAwaitReply(ctx, "Hi! How are you today?");
  log(`  plain reply streamed at ${plain.lengths.length} lengths`);

  // 2. The model calls save_movie.
  const saved = await commandWithReceipt(ctx, "save the movie Inception", "save_movie");
  check(saved.summary.includes("Inception"), `the saved title is not Inception: ${saved.summary}`);
  await shot(ctx, "saved-movie-receipt");
  let titles = await savedItems(ctx);
  log(`  saved items: ${JSON.stringify(titles)}`);
  check(titles.some((t) => t.includes("Inception")), "Inception is not in Saved items");
  await shot(ctx, "saved-items");
  await openTab(ctx, "chat");

  // 3. The model proposes delete_memory; Confirm runs it once, with a receipt.
  await send(ctx, "delete the movie Inception");
  const proposal = await awaitProposal(ctx);
  check(proposal.tool === "delete_memory" || proposal.tool === "forget", `unexpected proposal ${proposal.tool}`);
  check(proposal.args.includes("item_id"), "the card does not show the exact arguments");
  await shot(ctx, "proposal-delete");
  const results = await count(ctx, css("tool-result"));
  await (await ctx.session.findElement(css("proposal-confirm"))).click();
  await waitFor(
    async () => {
      if ((await count(ctx, css("tool-result"))) > results) return "done";
      if ((await count(ctx, css("proposal-error"))) > 0) {
        const e = await ctx.session.findElement(css("proposal-error"));
        throw new Error(`confirm refused: ${await e.attribute("data-code")} ${await e.text()}`);
      }
      return null;
    },
    { timeout: 30_000, message: "the confirmed call's receipt" },
  ).catch(async (error) => {
    log(`  ${error.message}; last system line: ${await lastSystemLine(ctx)}`);
    throw error;
  });
  const receipt = (await ctx.session.findElements(css("tool-receipt"))).at(-1);
  log(`  executed with receipt event #${await receipt.attribute("data-seq")} (${await receipt.attribute("data-kind")})`);
  await shot(ctx, "confirmed-receipt");
  titles = await savedItems(ctx);
  check(!titles.some((t) => t.includes("Inception")), "Inception is still in Saved items after the confirmed delete");
  await openTab(ctx, "chat");

  // 4. Deterministic intent → proposal → Reject (keyboard: Escape on the card's button).
  await send(ctx, "delete all my memories");
  const all = await awaitProposal(ctx, 15_000);
  check(all.tool === "delete_all_memories", `expected delete_all_memories, got ${all.tool}`);
  await shot(ctx, "proposal-delete-all");
  await (await ctx.session.findElement(css("proposal-reject"))).click();
  await waitFor(async () => (await count(ctx, css("proposal-card"))) === 0, { message: "the card to close after Reject" });
  await waitFor(async () => (await lastSystemLine(ctx)).includes("Rejected"), { message: "the rejection line" });
  log(`  rejected: ${await lastSystemLine(ctx)}`);
  await shot(ctx, "rejected");

  // 5. Expiry: the same proposal, left past its lifetime, is refused.
  if (TTL_S > 0) {
    await send(ctx, "apaga tudo");
    await awaitProposal(ctx, 15_000);
    log(`  waiting ${TTL_S + 2} s for the proposal to expire`);
    await sleep((TTL_S + 2) * 1000);
    const expiry = await ctx.session.findElement(css("proposal-expiry"));
    log(`  card says: ${(await expiry.text()).trim()}`);
    await (await ctx.session.findElement(css("proposal-confirm"))).click();
    const error = await ctx.session.waitForElement(css("proposal-error"), 15_000);
    const code = await error.attribute("data-code");
    log(`  confirm after expiry: ${code} — ${(await error.text()).trim()}`);
    check(code === "CONFIRMATION_EXPIRED", `expected CONFIRMATION_EXPIRED, got ${code}`);
    await shot(ctx, "expired");
    await (await ctx.session.findElement(css("proposal-dismiss"))).click();
  } else {
    log("  (expiry step skipped: set LEDGERMIND_TEST_CONFIRMATION_TTL_SECS)");
  }
  const personas = await ctx.session.execute(
    `return Array.from(document.querySelectorAll('[data-testid="persona-item"]')).length;`,
  );
  check(personas >= 1, "the persona list is empty: something deleted everything");
}

async function main() {
  const cfg = config();
  const ctx = await startSession(cfg, "runtime");
  try {
    await runtimeScenario(ctx);
    log("runtime scenario PASSED");
  } catch (error) {
    await shot(ctx, "failure");
    throw error;
  } finally {
    await endSession(ctx);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error) => {
    console.error(`[e2e] FAILED: ${error.stack ?? error}`);
    process.exit(1);
  });
}
