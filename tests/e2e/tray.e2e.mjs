// End-to-end scenario for living in the tray, through the real window and a
// stand-in panel on the test's D-Bus (tests/e2e/tray-watcher.py): the tray
// registers with its menu, closing the window hides it, the global shortcut
// (pressed with xdotool) and the tray's Show bring it back, a second launch
// shows the running copy instead of starting another, the persona list
// follows the engine, and Quit exits cleanly (e2e.sh then verifies the ledger).

import { execFileSync, spawn, spawnSync } from "node:child_process";
import { createInterface } from "node:readline";
import { join, resolve } from "node:path";
import { config, createPersona, log, openTab, runIfMain, saveFailureState, shot, startSession } from "./app.e2e.mjs";
import { sleep, waitFor } from "./webdriver.mjs";

const repo = resolve(new URL("../..", import.meta.url).pathname);
const css = (testid) => `[data-testid="${testid}"]`;

/** The stand-in panel, with a line protocol over its stdin and stdout. */
function startWatcher() {
  const child = spawn("python3", [join(repo, "tests/e2e/tray-watcher.py")], { stdio: ["pipe", "pipe", "inherit"] });
  const seen = [];
  const waiters = [];
  createInterface({ input: child.stdout }).on("line", (line) => {
    log(`  panel: ${line.length > 300 ? `${line.slice(0, 300)}…` : line}`);
    seen.push(line);
    for (const w of [...waiters]) if (line.startsWith(w.prefix)) {
      waiters.splice(waiters.indexOf(w), 1);
      w.resolve(line);
    }
  });
  const next = (prefix, timeout = 10_000) =>
    new Promise((resolveLine, reject) => {
      const waiter = { prefix, resolve: resolveLine };
      waiters.push(waiter);
      setTimeout(() => {
        if (waiters.includes(waiter)) reject(new Error(`the panel never said ${prefix}`));
      }, timeout);
    });
  const send = async (line, expect) => {
    const answer = next(expect);
    child.stdin.write(`${line}\n`);
    return answer;
  };
  return {
    child,
    seen,
    next,
    async menu() {
      const line = await send("menu", "MENU ");
      return JSON.parse(line.slice("MENU ".length)).map(([id, label, enabled, toggle]) => ({ id, label, enabled, toggle }));
    },
    async click(label) {
      const line = await send(`click ${label}`, "CLICKED");
      if (!line.startsWith("CLICKED")) throw new Error(`no tray entry ${label}`);
    },
    stop() {
      child.stdin.end();
      child.kill();
    },
  };
}

/** Whether the app's window is mapped on the X display. */
function windowVisible() {
  const found = spawnSync("xdotool", ["search", "--onlyvisible", "--name", "^Ledgermind$"], { encoding: "utf8" });
  return found.status === 0 && found.stdout.trim().length > 0;
}

function appRunning(app) {
  return spawnSync("pgrep", ["-f", app]).status === 0;
}

async function closeWindow(ctx) {
  // What the window manager's close button sends: a close request to the window.
  await ctx.session.execute("window.__TAURI_INTERNALS__.invoke('plugin:window|close', { label: 'main' }); return true;");
  await waitFor(() => !windowVisible(), { timeout: 10_000, message: "the window to hide into the tray" });
  if (!appRunning(ctx.cfg.app)) throw new Error("closing the window quit the app instead of keeping it in the tray");
}

export async function main() {
  const cfg = config();
  const panel = startWatcher();
  await panel.next("READY");
  const ctx = await startSession(cfg, "tray");
  try {
    log("the tray registers with its menu");
    await panel.next("REGISTERED", 30_000);
    const labels = async () => (await panel.menu()).map((e) => e.label);
    await waitFor(async () => (await labels()).includes("Quit Ledgermind"), { timeout: 10_000, message: "the tray menu" });
    const menu = await panel.menu();
    for (const label of ["Show Ledgermind", "Mute microphone", "Talk to", "Quit Ledgermind"]) {
      if (!menu.some((e) => e.label === label)) throw new Error(`the tray menu lacks "${label}": ${JSON.stringify(menu)}`);
    }
    const talk = menu.find((e) => e.label.startsWith("Talk ("));
    if (!talk || talk.enabled) throw new Error(`Talk should say the voice engine is missing and be disabled: ${JSON.stringify(talk)}`);

    log("a new persona appears under Talk to");
    await createPersona(ctx, { name: "Iris", description: "A calm friend who likes trains" });
    await waitFor(async () => (await panel.menu()).some((e) => e.label === "Iris" && e.toggle === 1), {
      timeout: 15_000,
      message: "Iris to be listed and chosen in the tray",
    });

    log("Settings shows the tray and shortcut settings");
    await openTab(ctx, "settings");
    await ctx.session.waitForElement(css("desktop-settings"));
    await ctx.session.execute(`document.querySelector('${css("desktop-settings")}').scrollIntoView(); return true;`);
    await shot(ctx, "desktop-settings");
    await openTab(ctx, "chat");

    log("closing the window keeps Ledgermind in the tray");
    await closeWindow(ctx);

    log("the global shortcut brings it back");
    execFileSync("xdotool", ["key", "ctrl+shift+space"]);
    await waitFor(() => windowVisible(), { timeout: 10_000, message: "the shortcut to show the window" });
    await waitFor(
      async () => (await ctx.session.execute("return document.body.innerText")).includes("voice engine"),
      { timeout: 5_000, message: "the notice that voice is not installed" },
    );
    await shot(ctx, "summoned-by-shortcut");

    log("a second launch shows the running copy and exits");
    await closeWindow(ctx);
    const second = spawnSync(cfg.app, [], { env: process.env, timeout: 20_000 });
    if (second.status !== 0) throw new Error(`the second launch exited with ${second.status} (signal ${second.signal})`);
    await waitFor(() => windowVisible(), { timeout: 10_000, message: "the second launch to show the window" });

    log("Show in the tray brings the hidden window back");
    await closeWindow(ctx);
    await panel.click("Show Ledgermind");
    await waitFor(() => windowVisible(), { timeout: 10_000, message: "Show to bring the window back" });

    log("Mute is a check item");
    await panel.click("Mute microphone");
    await waitFor(async () => (await panel.menu()).some((e) => e.label === "Mute microphone" && e.toggle === 1), {
      message: "Mute to be checked",
    });

    log("Quit exits the app");
    await panel.click("Quit Ledgermind");
    await waitFor(() => !appRunning(cfg.app), { timeout: 30_000, message: "the app to exit after Quit" });
  } catch (error) {
    await saveFailureState(ctx);
    throw error;
  } finally {
    await ctx.session.delete();
    panel.stop();
  }
  await sleep(200);
}

runIfMain(import.meta.url, main);
