// End-to-end scenario for the trustworthy ledger through the real
// window: chat with a persona, delete one of the human's messages for good,
// export the whole profile encrypted from Settings, then restore the export
// into an empty home with the CLI and check that it verifies, holds the
// persona, and does not hold the deleted words anywhere.

import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import {
  config,
  createPersona,
  endSession,
  log,
  openTab,
  readMessages,
  sendAndAwaitReply,
  shot,
  startSession,
  verifyLedger,
  waitForPersona,
  runIfMain,
} from "./app.e2e.mjs";
import { waitFor } from "./webdriver.mjs";

const PERSONA = { name: "Noor", description: "A discreet friend" };
const SECRET = "my spare key hides under the blue flowerpot";
const PASSPHRASE = "correct horse battery staple";

const css = (testid, extra = "") => `[data-testid="${testid}"]${extra}`;
const repo = resolve(new URL("../..", import.meta.url).pathname);
const cliBin = join(repo, "target/debug/ledgermind");
// The CLI restore plays "a new machine": its own private keychain. The
// in-app import then restores the same export on this machine, beside the
// original (each copy keeps its own signed tree head in the keychain).
const cli = join(repo, "scripts/with-keychain.sh");

function filesContaining(dir, needle) {
  const hits = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) hits.push(...filesContaining(path, needle));
    else if (readFileSync(path).includes(needle)) hits.push(path);
  }
  return hits;
}

export async function main() {
  const cfg = config();
  const started = Date.now();
  const ctx = await startSession(cfg, "profile");
  const home = process.env.LEDGERMIND_HOME;
  const restored = mkdtempSync(join(tmpdir(), "ledgermind-restored-"));
  const exportFile = join(tmpdir(), `ledgermind-e2e-${process.pid}.lmx`);
  try {
    await createPersona(ctx, PERSONA);
    await sendAndAwaitReply(ctx, SECRET);

    log("deleting the human's message for good");
    const bubble = await ctx.session.waitForElement(css("message", '[data-role="human"]'));
    await (await ctx.session.findElement(css("forget-message"), bubble)).click();
    await shot(ctx, "forget-confirm");
    await (await ctx.session.waitForElement(css("forget-confirm"))).click();
    await waitFor(async () => !(await readMessages(ctx)).some((m) => m.text.includes(SECRET)), {
      message: "the message to leave the conversation",
    });
    await shot(ctx, "forgotten");
    if (home) {
      const hits = filesContaining(home, Buffer.from(SECRET));
      if (hits.length) throw new Error(`the deleted words are still in ${hits.join(", ")}`);
      log("  the deleted words are in no file of the profile");
    }

    log("exporting the profile from Settings");
    await openTab(ctx, "settings");
    const path = await ctx.session.waitForElement(css("export-path"));
    await path.clear();
    await path.sendKeys(exportFile);
    await (await ctx.session.findElement(css("export-passphrase"))).sendKeys(PASSPHRASE);
    await (await ctx.session.findElement(css("export-repeat"))).sendKeys(PASSPHRASE);
    await (await ctx.session.findElement(css("export-button"))).click();
    const done = await ctx.session.waitForElement(css("export-done"), 60_000);
    log(`  ${await done.text()}`);
    await shot(ctx, "exported");
    await verifyLedger(ctx);

    log("restoring the export into an empty home with the CLI");
    const passFile = join(restored, "..", `pass-${process.pid}`);
    writeFileSync(passFile, PASSPHRASE);
    let personas;
    try {
      // One private keychain for the whole restore: import, verify, list.
      const q = (x) => `'${String(x).replace(/'/g, "'\\''")}'`;
      const script = [
        `${q(cliBin)} --home ${q(restored)} import ${q(exportFile)} --passphrase-file ${q(passFile)} >&2`,
        `${q(cliBin)} --home ${q(restored)} verify >&2`,
        `${q(cliBin)} --home ${q(restored)} persona list`,
      ].join(" && ");
      personas = execFileSync(cli, ["bash", "-c", script], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "inherit"],
        env: { ...process.env, LEDGERMIND_FORCE_PRIVATE_KEYCHAIN: "1", LEDGERMIND_IN_PRIVATE_BUS: "" },
      });
    } finally {
      rmSync(passFile, { force: true });
    }
    if (!personas.includes(PERSONA.name)) throw new Error(`the restored profile lacks ${PERSONA.name}:\n${personas}`);
    const hits = filesContaining(restored, Buffer.from(SECRET));
    if (hits.length) throw new Error(`the restored profile holds the deleted words in ${hits.join(", ")}`);
    log("  restored: verifies, has the persona, and not the deleted words");

    log("importing the same export inside the app, over the profile in use");
    await openTab(ctx, "settings");
    const importPath = await ctx.session.waitForElement(css("import-path"));
    await importPath.sendKeys(exportFile);
    await (await ctx.session.findElement(css("import-passphrase"))).sendKeys(PASSPHRASE);
    await (await ctx.session.findElement(css("import-button"))).click();
    await shot(ctx, "import-confirm");
    await (await ctx.session.waitForElement(css("import-replace"), 60_000)).click();
    const staged = await ctx.session.waitForElement(css("import-staged"), 60_000);
    log(`  ${await staged.text()}`);
    await shot(ctx, "import-staged");
  } catch (error) {
    await shot(ctx, "failure");
    throw error;
  } finally {
    await endSession(ctx);
  }
  // The restart opens the imported profile (the "Restart now" button would
  // relaunch the app outside the driver's reach; quitting and reopening is
  // the same path).
  const reopened = await startSession(cfg, "profile-imported");
  try {
    await waitForPersona(reopened, PERSONA.name);
    await verifyLedger(reopened);
    await shot(reopened, "imported-open");
    if (home) {
      const kept = readdirSync(home).filter((n) => n.startsWith("replaced-"));
      if (kept.length !== 1) throw new Error(`the replaced profile must be kept aside once, found ${JSON.stringify(kept)}`);
      if (readdirSync(home).includes("import-staged")) throw new Error("the staging folder is left behind");
      const hits = filesContaining(home, Buffer.from(SECRET));
      if (hits.length) throw new Error(`after the import the deleted words are in ${hits.join(", ")}`);
      log(`  the imported profile opened, verifies, and the previous one is kept in ${kept[0]}`);
    }
  } catch (error) {
    await shot(reopened, "failure");
    throw error;
  } finally {
    await endSession(reopened);
    rmSync(restored, { recursive: true, force: true });
    rmSync(exportFile, { force: true });
  }
  log(`PASSED (profile) in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${cfg.artifacts}`);
}

runIfMain(import.meta.url, main);
