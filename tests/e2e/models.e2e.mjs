// The model picker in the real window: the profile starts on the tiny model;
// Settings recommends a model for the memory spared, downloads the default
// model from a local server that answers the way the Hugging Face hub does
// (scripts/e2e.sh points HF_ENDPOINT at it; the file is the one setup
// verified), shows the progress, checks the hash, and "Use for replies"
// moves Ei onto it; Ei then answers on it.
//
//   LEDGERMIND_APP=/path/to/ledgermind-desktop node tests/e2e/models.e2e.mjs

import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { config, log, openTab, runIfMain, selectPersona, sendAndAwaitReply, shot, waitForPersona, withSession } from "./app.e2e.mjs";
import { waitFor } from "./webdriver.mjs";

const repo = resolve(new URL("../..", import.meta.url).pathname);
const css = (testid) => `[data-testid="${testid}"]`;
const MODEL_ID = "qwen2.5-coder-1.5b";
const MODEL_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf";
const row = (id) => `${css("model-choice")}[data-model="${id}"]`;

function check(condition, message) {
  if (!condition) throw new Error(message);
}

/** The local hub: target/debug/examples/hf_serve on HF_ENDPOINT's port. */
async function startHub() {
  const endpoint = process.env.HF_ENDPOINT;
  check(endpoint, "scripts/e2e.sh sets HF_ENDPOINT for this scenario");
  const file = join(process.env.LEDGERMIND_CACHE ?? join(homedir(), ".cache/ledgermind"), "models", MODEL_FILE);
  check(existsSync(file), `${file} is missing: scripts/setup.sh installs it`);
  const port = new URL(endpoint).port;
  const bin = join(process.env.CARGO_TARGET_DIR ?? join(repo, "target"), "debug/examples/hf_serve");
  check(existsSync(bin), `${bin} is missing: cargo build --workspace --all-targets builds it`);
  const child = spawn(bin, ["--port", port, file], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  child.stdout.on("data", (d) => (out += d));
  // It hashes the 1.1 GB file before it listens.
  await waitFor(async () => out.includes("HF_ENDPOINT="), { timeout: 120_000, message: "the local hub to start" });
  log(`local hub: ${out.trim().split("\n").join("; ")}`);
  return child;
}

async function text(ctx, selector) {
  return ctx.session.execute(`return document.querySelector(${JSON.stringify(selector)})?.innerText ?? ""`);
}

export async function models(ctx) {
  await waitForPersona(ctx, "Ei");
  await openTab(ctx, "settings");
  const panel = await ctx.session.waitForElement(css("models-panel"));
  await ctx.session.execute(`document.querySelector('${css("models-panel")}').scrollIntoView(); return true;`);
  await waitFor(async () => (await text(ctx, css("models-recommendation"))).length > 0, { message: "a recommendation" });
  const roomy = await text(ctx, css("models-recommendation"));
  log(`recommendation (whatever is free): ${roomy}`);
  check(/In use/.test(await text(ctx, row("smollm2-135m"))), "the model Ei uses (the tiny one here) is marked in use");
  check(!/In use/.test(await text(ctx, row(MODEL_ID))), `${MODEL_ID} is not installed here, so not in use`);
  await shot(ctx, "models-picker");
  // Little memory to spare: a small model is recommended.
  await ctx.session.execute(`const s = document.querySelector('${css("models-spare")}'); s.value = "1"; s.dispatchEvent(new Event("change")); return true;`);
  await waitFor(async () => /SmolLM2|0\.5B/.test(await text(ctx, css("models-recommendation"))), { message: "a small model recommended for 1 GB" });
  log(`recommendation (1 GB): ${await text(ctx, css("models-recommendation"))}`);
  await shot(ctx, "models-picker-1gb");
  void panel;

  const hub = await startHub();
  try {
    log(`downloading ${MODEL_ID} from the local hub`);
    await (await ctx.session.waitForElement(`${row(MODEL_ID)} ${css("model-download")}`)).click();
    await ctx.session.waitForElement(`${row(MODEL_ID)} ${css("model-progress")}`, 30_000);
    await waitFor(async () => /\d+ %/.test(await text(ctx, `${row(MODEL_ID)} ${css("model-progress")}`)), { message: "progress shown" });
    log(`progress: ${await text(ctx, `${row(MODEL_ID)} ${css("model-progress")}`)}`);
    await shot(ctx, "models-downloading");
    await ctx.session.waitForElement(`${row(MODEL_ID)} ${css("model-use")}`, 300_000);
    // Measured on this machine right after the download, and shown with it.
    const speed = await ctx.session.waitForElement(`${row(MODEL_ID)} ${css("model-speed")}`, 30_000);
    log(`speed shown: ${await speed.text()}`);
    check(/reads [\d.]+ tokens\/s, writes [\d.]+ tokens\/s/.test(await speed.text()), "the measured speed is shown");
    await shot(ctx, "models-installed");
  } finally {
    hub.kill("SIGINT");
  }
  await (await ctx.session.findElement(`${row(MODEL_ID)} ${css("model-use")}`)).click();
  await waitFor(async () => /In use/.test(await text(ctx, row(MODEL_ID))), { timeout: 120_000, message: `${MODEL_ID} in use` });
  await shot(ctx, "models-in-use");

  await openTab(ctx, "chat");
  await selectPersona(ctx, "Ei");
  const { reply } = await sendAndAwaitReply(ctx, "My sister Ana lives in Porto. Which city does my sister live in?", { timeout: 240_000 });
  log(`  Ei on ${MODEL_ID}: ${JSON.stringify(reply)}`);
  await shot(ctx, "models-reply");
  check(/porto/i.test(reply), `the reply on the downloaded model does not answer: ${JSON.stringify(reply)}`);

  // A model Ollama already downloaded (scripts/e2e.sh made Ollama's folder):
  // offered beside the catalog, used where Ollama keeps it, nothing downloaded.
  const OLLAMA_ID = "ollama:smollm2-custom:latest";
  await openTab(ctx, "settings");
  await ctx.session.waitForElement(row(OLLAMA_ID), 30_000);
  await ctx.session.execute(`document.querySelector('${row(OLLAMA_ID)}').scrollIntoView(); return true;`);
  const offered = await text(ctx, row(OLLAMA_ID));
  log(`Ollama's model offered: ${JSON.stringify(offered)}`);
  check(/in Ollama on this computer/.test(offered), "the Ollama model says where it is");
  await (await ctx.session.waitForElement(`${row(OLLAMA_ID)} ${css("model-use-ollama")}`)).click();
  await ctx.session.waitForElement(`${row(OLLAMA_ID)} ${css("model-use")}`, 30_000);
  await shot(ctx, "models-ollama");
}

export async function main() {
  const cfg = config();
  const started = Date.now();
  await withSession(cfg, "models", models);
  log(`PASSED in ${((Date.now() - started) / 1000).toFixed(1)} s; screenshots in ${cfg.artifacts}`);
}

runIfMain(import.meta.url, main);
