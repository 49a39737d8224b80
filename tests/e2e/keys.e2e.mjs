// End-to-end scenario for a lost keychain through the real window: chat,
// quit, wipe the keychain's Ledgermind secrets, relaunch on the same data,
// see the banner (a send fails at once and keeps its text), start a new key
// epoch from the banner, chat again, and verify shows the epoch boundary.

import { execFileSync } from "node:child_process";
import {
  config,
  log,
  openTab,
  readMessages,
  runIfMain,
  sendAndAwaitAnswer,
  sendAndAwaitReply,
  shot,
  verifyLedger,
  waitForPersona,
  withSession,
} from "./app.e2e.mjs";
import { sleep, waitFor } from "./webdriver.mjs";

const css = (testid, extra = "") => `[data-testid="${testid}"]${extra}`;
const FIRST = "Hello Ei, please remember that I like green tea.";
const STUCK = "Are you still there after the keychain reset?";
const AGAIN = "Good, we are back. What do I like to drink?";

function check(condition, message) {
  if (!condition) throw new Error(message);
}

/** The number of Ledgermind secrets in the keychain this scenario runs under. */
function keychainSecrets() {
  try {
    const out = execFileSync("secret-tool", ["search", "--all", "service", "ledgermind"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    return (out.match(/^\[/gm) ?? []).length;
  } catch {
    return 0; // secret-tool exits 1 when nothing matches
  }
}

async function appExited(app) {
  for (let i = 0; i < 150; i++) {
    try {
      execFileSync("pgrep", ["-f", app], { stdio: "ignore" });
    } catch {
      return;
    }
    await sleep(200);
  }
  throw new Error("the app did not exit after the first session");
}

export async function main() {
  const cfg = config();
  const started = Date.now();
  await withSession(cfg, "before", async (ctx) => {
    await waitForPersona(ctx, "Ei");
    // Something signed before the keys go; "please remember" may be done
    // (a saved fact) rather than answered, and either will do.
    await sendAndAwaitAnswer(ctx, FIRST);
  });
  await appExited(cfg.app);

  const before = keychainSecrets();
  log(`wiping the keychain: ${before} Ledgermind secret(s)`);
  execFileSync("secret-tool", ["clear", "service", "ledgermind"]);
  check(keychainSecrets() === 0, "the keychain still holds Ledgermind secrets after the wipe");

  await withSession(cfg, "after", async (ctx) => {
    await waitForPersona(ctx, "Ei");
    const banner = await ctx.session.waitForElement(css("keys-banner"), 30_000);
    check((await banner.attribute("data-problem")) === "missing", "the banner does not say the keys are missing");
    log(`  banner: ${(await banner.text()).replace(/\s+/g, " ").slice(0, 160)}`);
    await shot(ctx, "banner");

    log("a send while the keys are missing fails at once and keeps its text");
    const input = await ctx.session.waitForElement(css("composer-input"));
    await input.sendKeys(STUCK);
    const t0 = Date.now();
    await (await ctx.session.findElement(css("send-button"))).click();
    await sleep(500); // the button is disabled while the send is in flight
    await waitFor(async () => (await (await ctx.session.findElement(css("send-button"))).enabled()), {
      timeout: 10_000,
      message: "the refused send to finish",
    });
    const took = Date.now() - t0;
    check(took < 10_000, `the refused send took ${took} ms`);
    check((await input.property("value")) === STUCK, "the composer lost the text of the refused message");
    check(!(await readMessages(ctx)).some((m) => m.text.includes(STUCK)), "a message was shown that could not be signed");
    log(`  refused in ${took} ms; the text is still in the composer`);
    await shot(ctx, "refused-kept");

    log("starting a new key epoch from the banner");
    await (await ctx.session.findElement(css("keys-rotate"))).click();
    await waitFor(async () => (await ctx.session.findElements(css("keys-banner"))).length === 0, {
      timeout: 20_000,
      message: "the banner to go away after the new epoch",
    });
    await shot(ctx, "epoch-started");

    await input.clear();
    const { reply } = await sendAndAwaitReply(ctx, AGAIN);
    check(reply.trim().length > 0, "no reply after the new epoch");

    const { text } = await verifyLedger(ctx);
    const epochs = await ctx.session.findElements(css("key-epoch"));
    check(epochs.length >= 1, `verify shows no key epoch boundary (${text})`);
    const line = await epochs[0].text();
    log(`  ${line}`);
    check(line.startsWith("Keys replaced on"), `the boundary line reads: ${line}`);
    await openTab(ctx, "ledger");
    await shot(ctx, "verify-boundary");
  });
  check(keychainSecrets() > 0, "the new keys are not in the keychain");
  log(`PASSED in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${cfg.artifacts}`);
}

runIfMain(import.meta.url, main);
