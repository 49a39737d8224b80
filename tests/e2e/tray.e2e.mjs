// End-to-end scenario for living in the tray, through the real window and a
// stand-in panel on the test's D-Bus (tests/e2e/tray-watcher.py): the tray
// registers with its menu, the persona list follows the engine, Talk runs a
// voice turn (e2e.sh feeds a WAV file spoken by espeak-ng as the microphone:
// LEDGERMIND_TEST_VOICE_INPUT) that the overlay shows and the chat keeps,
// Stop cuts a reply, closing the window hides it, the global shortcut
// (held with xdotool) talks with the window hidden, a second launch and the
// tray's Show bring the window back, Mute blocks the microphone, and Quit
// exits cleanly (e2e.sh then verifies the ledger).

import { execFileSync, spawn, spawnSync } from "node:child_process";
import { createInterface } from "node:readline";
import { readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { config, createPersona, log, openTab, runIfMain, saveFailureState, shot, startSession } from "../app.e2e.mjs";
import { sleep, waitFor } from "../webdriver.mjs";

const repo = resolve(new URL("../../..", import.meta.url).pathname);
const css = (testid) => `[data-testid="${testid}"]`;

/** The stand-in panel, with a line protocol over its stdin and stdout. */
function startWatcher() {
  const child = spawn(process.env.LEDGERMIND_SYSTEM_PYTHON ?? "/usr/bin/python3", [join(repo, "tests/e2e/tray-watcher.py")], { stdio: ["pipe", "pipe", "inherit"] });
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

/** The app's process and its children (WebKit's web and network processes). */
function appProcesses(app) {
  const main = spawnSync("pgrep", ["-o", "-f", app], { encoding: "utf8" }).stdout.trim();
  if (!main) return [];
  const all = [main];
  for (let i = 0; i < all.length; i++) {
    const kids = spawnSync("pgrep", ["-P", all[i]], { encoding: "utf8" }).stdout.trim();
    if (kids) all.push(...kids.split("\n"));
  }
  return all;
}

/** Idle cost over `ms`: PSS (MB) summed over the app's processes and their CPU time (% of one core). */
async function idleCost(app, ms = 10_000) {
  const pids = appProcesses(app);
  const ticks = () =>
    pids.reduce((sum, pid) => {
      try {
        const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        return sum + Number(fields[11]) + Number(fields[12]);
      } catch {
        return sum;
      }
    }, 0);
  const before = ticks();
  await sleep(ms);
  const cpu = ((ticks() - before) / 100 / (ms / 1000)) * 100; // USER_HZ = 100
  const pss = pids.reduce((sum, pid) => {
    try {
      const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"));
      return sum + (m ? Number(m[1]) : 0);
    } catch {
      return sum;
    }
  }, 0);
  return { processes: pids.length, pss_mb: Math.round(pss / 102.4) / 10, cpu_percent: Math.round(cpu * 100) / 100 };
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
  const js = (code) => ctx.session.execute(code);
  const overlayState = () => js(`return document.querySelector('${css("voice-overlay")}')?.dataset.state ?? null`);
  const overlayText = (id) => js(`return document.querySelector('${css(id)}')?.innerText ?? ""`);
  const menuLabel = async (prefix) => (await panel.menu()).find((e) => e.label.startsWith(prefix));
  try {
    log("the tray registers with its menu");
    // It may have registered while the session opened.
    if (!panel.seen.some((line) => line.startsWith("REGISTERED"))) await panel.next("REGISTERED", 30_000);
    const labels = async () => (await panel.menu()).map((e) => e.label);
    await waitFor(async () => (await labels()).includes("Quit Ledgermind"), { timeout: 10_000, message: "the tray menu" });
    const menu = await panel.menu();
    for (const label of ["Show Ledgermind", "Talk", "Mute microphone", "Talk to", "Quit Ledgermind"]) {
      if (!menu.some((e) => e.label === label)) throw new Error(`the tray menu lacks "${label}": ${JSON.stringify(menu)}`);
    }
    if (!menu.find((e) => e.label === "Talk").enabled) throw new Error("Talk is disabled although the speech model is installed");

    log("a new persona appears under Talk to");
    await createPersona(ctx, { name: "Iris", description: "A calm friend who likes trains" });
    await waitFor(async () => (await panel.menu()).some((e) => e.label === "Iris"), {
      timeout: 15_000,
      message: "Iris to be listed in the tray",
    });
    log("choosing Iris under Talk to");
    await panel.click("Iris");
    await waitFor(async () => (await panel.menu()).some((e) => e.label === "Iris" && e.toggle === 1), {
      message: "Iris to be checked under Talk to",
    });

    log("Settings shows the tray, shortcut and voice settings");
    await openTab(ctx, "settings");
    await ctx.session.waitForElement(css("desktop-settings"));
    await js(`document.querySelector('${css("desktop-settings")}').scrollIntoView(); return true;`);
    await shot(ctx, "desktop-settings");
    await js(`document.querySelector('${css("voice-rate")}').scrollIntoView(); return true;`);
    await shot(ctx, "voice-settings");
    await openTab(ctx, "chat");

    log("Talk in the tray runs a voice turn: listening, thinking, speaking, done");
    await panel.click("Talk");
    await waitFor(async () => (await overlayState()) === "listening", { timeout: 10_000, message: "the overlay to listen" });
    await waitFor(async () => Number(await js(`return document.querySelector('[role=meter]').getAttribute('aria-valuenow')`)) > 20, {
      timeout: 10_000,
      message: "the level meter to move",
    });
    await shot(ctx, "voice-listening");
    if (!(await menuLabel("Stop talking"))) throw new Error("the tray's Talk should read Stop talking during a turn");
    await waitFor(async () => (await overlayState()) === "thinking", { timeout: 20_000, message: "the overlay to think" });
    await shot(ctx, "voice-thinking");
    await waitFor(async () => (await overlayState()) === "speaking", { timeout: 120_000, message: "the reply to be spoken" });
    const heard = await overlayText("voice-heard");
    if (!/train/i.test(heard)) throw new Error(`the overlay should show what was heard (about trains): ${JSON.stringify(heard)}`);
    await waitFor(async () => (await overlayText("voice-spoken")).length > 8, { message: "the reply as spoken" });
    await shot(ctx, "voice-speaking");
    await waitFor(async () => (await overlayState()) === "idle", { timeout: 120_000, message: "the reply to finish" });
    await shot(ctx, "voice-done");
    await waitFor(async () => (await menuLabel("Talk"))?.label === "Talk", { message: "Talk to read Talk again" });
    log("the voice turn is in the chat like a typed one");
    await waitFor(async () => /train/i.test(await js("return [...document.querySelectorAll('[data-testid=message][data-role=human]')].map((m) => m.innerText).join(' ')")), {
      timeout: 10_000,
      message: "the heard words in the conversation",
    });

    log("Stop cuts the reply short and says so");
    await panel.click("Talk");
    await waitFor(async () => (await overlayState()) === "speaking", { timeout: 120_000, message: "the second reply to be spoken" });
    await (await ctx.session.waitForElement(css("voice-stop"))).click();
    await waitFor(async () => (await overlayState()) === "idle", { timeout: 10_000, message: "Stop to end the turn" });
    const stateLine = await overlayText("voice-state");
    if (!/interrupted/i.test(stateLine)) throw new Error(`the overlay should say the reply was interrupted: ${stateLine}`);
    await shot(ctx, "voice-interrupted");
    await js(`window.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape' })); return true;`);
    await waitFor(async () => (await overlayState()) === null, { message: "Esc to close the overlay" });

    log("idle cost with the window shown, then hidden in the tray (same run)");
    await sleep(5_000);
    const shown = await idleCost(cfg.app);
    log("closing the window keeps Ledgermind in the tray");
    await closeWindow(ctx);
    await sleep(5_000);
    const hidden = await idleCost(cfg.app);
    log(`  idle, window shown: ${JSON.stringify(shown)}; hidden in the tray: ${JSON.stringify(hidden)}`);
    writeFileSync(join(cfg.artifacts, "tray-idle.json"), JSON.stringify({ shown, hidden }, null, 2));

    log("the global shortcut, held, talks with the window hidden");
    execFileSync("xdotool", ["keydown", "ctrl+shift+space"]);
    await waitFor(async () => !!(await menuLabel("Stop talking")), { timeout: 10_000, message: "the shortcut to start a turn" });
    await sleep(3_500);
    execFileSync("xdotool", ["keyup", "ctrl+shift+space"]);
    await waitFor(async () => (await menuLabel("Talk"))?.label === "Talk", { timeout: 180_000, message: "the shortcut's turn to end" });
    if (windowVisible()) throw new Error("the shortcut's turn should not show the window");

    log("a second launch shows the running copy and exits");
    const second = spawnSync(cfg.app, [], { env: process.env, timeout: 20_000 });
    if (second.status !== 0) throw new Error(`the second launch exited with ${second.status} (signal ${second.signal})`);
    await waitFor(() => windowVisible(), { timeout: 10_000, message: "the second launch to show the window" });
    await waitFor(async () => ["idle", "error"].includes(await overlayState()), { message: "the overlay to show the shortcut's turn" });
    await shot(ctx, "shortcut-turn-while-hidden");
    const third = await overlayText("voice-heard");
    if (!/train/i.test(third)) throw new Error(`the shortcut's turn should have heard the question: ${JSON.stringify(third)}`);

    log("Show in the tray brings the hidden window back");
    await closeWindow(ctx);
    await panel.click("Show Ledgermind");
    await waitFor(() => windowVisible(), { timeout: 10_000, message: "Show to bring the window back" });

    log("Mute is a check item, and a muted microphone says so");
    await panel.click("Mute microphone");
    await waitFor(async () => (await panel.menu()).some((e) => e.label === "Mute microphone" && e.toggle === 1), {
      message: "Mute to be checked",
    });
    await panel.click("Talk");
    await waitFor(async () => (await overlayState()) === "muted", { message: "the overlay to say the microphone is muted" });
    await shot(ctx, "voice-muted");

    log("Quit exits the app");
    await panel.click("Quit Ledgermind");
    await waitFor(() => !appRunning(cfg.app), { timeout: 30_000, message: "the app to exit after Quit" });
  } catch (error) {
    await saveFailureState(ctx);
    throw error;
  } finally {
    await ctx.session.delete().catch(() => {});
    panel.stop();
  }
  await sleep(200);
}

runIfMain(import.meta.url, main);
