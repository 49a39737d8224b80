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
import { config, createPersona, log, openTab, runIfMain, saveFailureState, shot, startSession } from "./app.e2e.mjs";
import { sleep, waitFor } from "./webdriver.mjs";

const repo = resolve(new URL("../..", import.meta.url).pathname);
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

/** Resident memory (RSS and PSS, MB) of the app's processes, and their CPU time over `ms` (% of one core). */
async function idleCost(app, ms = IDLE_MS) {
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
  const memory = (field) =>
    pids.reduce((sum, pid) => {
      try {
        const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/smaps_rollup`, "utf8"));
        return sum + (m ? Number(m[1]) : 0);
      } catch {
        return sum;
      }
    }, 0);
  const mb = (kb) => Math.round(kb / 102.4) / 10;
  return { processes: pids.length, rss_mb: mb(memory("Rss")), pss_mb: mb(memory("Pss")), cpu_percent: Math.round(cpu * 100) / 100 };
}

/** Idle measurements, each IDLE_MS long (20 s unless E2E_IDLE_MS says otherwise). */
const IDLE_MS = Number(process.env.E2E_IDLE_MS ?? 20_000);
/** A whole voice turn on a two-core machine: Whisper tiny.en on a 30 s window, the persona's reply on SmolLM2, espeak-ng. */
const TURN_MS = Number(process.env.E2E_VOICE_TURN_MS ?? 240_000);

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
  // The typed voice events themselves, recorded in the page as the shell
  // emits them (`voice://event`): a short reply's speaking state lasts less
  // than one WebDriver round trip under load, so polling the overlay misses
  // it. Every state is logged with the time since the turn began; a Failed
  // event ends the wait at once with its message.
  let turnStarted = Date.now();
  let cursor = 0;
  const recordVoiceEvents = () =>
    js(`if (!window.__voiceEvents) {
          window.__voiceEvents = [];
          const handler = window.__TAURI_INTERNALS__.transformCallback((e) => window.__voiceEvents.push(e.payload));
          return window.__TAURI_INTERNALS__.invoke('plugin:event|listen', { event: 'voice://event', target: { kind: 'Any' }, handler }).then(() => true);
        }
        return true;`);
  const voiceState = async (wanted, timeout, message) =>
    waitFor(
      async () => {
        const fresh = await js(`return (window.__voiceEvents ?? []).slice(${cursor})`);
        for (const event of fresh) {
          cursor++;
          if (event.type === "failed" && wanted !== "error" && wanted !== "muted") throw new Error(`the voice turn failed: ${event.message}`);
          if (event.type === "heard") log(`  heard: ${JSON.stringify(event.text)}`);
          if (event.type === "turn_ended") log(`  turn ended: ${JSON.stringify(event)}`);
          if (event.type !== "state") continue;
          log(`  voice state: ${event.state} (+${((Date.now() - turnStarted) / 1000).toFixed(1)} s)`);
          if (event.state === wanted) return true;
          // A turn back to idle before the reply was spoken will never speak it.
          if (event.state === "idle" && wanted === "speaking") throw new Error("the voice turn ended without a spoken reply");
        }
        return false;
      },
      { timeout, interval: 100, message },
    );
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
    const shortcutLine = await js(`return document.querySelector('${css("desktop-settings")}').innerText`);
    if (/could not be registered|not available/i.test(shortcutLine)) throw new Error(`the shortcut should be active here: ${shortcutLine}`);
    await js(`document.querySelector('${css("voice-rate")}').scrollIntoView(); return true;`);
    await shot(ctx, "voice-settings");
    await openTab(ctx, "chat");

    log("Talk in the tray runs a voice turn: listening, thinking, speaking, done");
    await recordVoiceEvents();
    turnStarted = Date.now();
    await panel.click("Talk");
    await voiceState("listening", 30_000, "the overlay to listen");
    await waitFor(async () => Number(await js(`return document.querySelector('[role=meter]').getAttribute('aria-valuenow')`)) > 20, {
      timeout: 10_000,
      message: "the level meter to move",
    });
    await shot(ctx, "voice-listening");
    if (!(await menuLabel("Stop talking"))) throw new Error("the tray's Talk should read Stop talking during a turn");
    await voiceState("thinking", 20_000, "the overlay to think");
    await shot(ctx, "voice-thinking");
    await voiceState("speaking", TURN_MS, "the reply to be spoken");
    const heard = await overlayText("voice-heard");
    if (!/train/i.test(heard)) throw new Error(`the overlay should show what was heard (about trains): ${JSON.stringify(heard)}`);
    await waitFor(async () => (await overlayText("voice-spoken")).length > 8, { message: "the reply as spoken" });
    await shot(ctx, "voice-speaking");
    await voiceState("idle", TURN_MS, "the reply to finish");
    await shot(ctx, "voice-done");
    await waitFor(async () => (await menuLabel("Talk"))?.label === "Talk", { message: "Talk to read Talk again" });
    log("the voice turn is in the chat like a typed one");
    const chatText = (role) => js(`return [...document.querySelectorAll('[data-testid=message][data-role=${role}]')].map((m) => m.innerText).join(' ')`);
    await waitFor(async () => /train/i.test(await chatText("human")), {
      timeout: 10_000,
      message: "the heard words in the conversation",
    });
    // The reply's first words (after the overlay's "Reply:") are the persona's message in the chat.
    const words = (text) => text.toLowerCase().match(/[\p{L}\p{N}']+/gu) ?? [];
    const spokenFirst = words(await overlayText("voice-spoken")).slice(1, 5);
    await waitFor(async () => words(await chatText("persona")).join(" ").includes(spokenFirst.join(" ")), {
      timeout: 10_000,
      message: `the spoken reply (${spokenFirst.join(" ")}…) in the conversation`,
    });
    await shot(ctx, "voice-turn-in-chat");

    log("Stop cuts the reply short and says so");
    // The reply may be over before Stop lands (a one-sentence reply lasts
    // about a second): up to three turns, each stopped as soon as it speaks.
    let stateLine = "";
    for (let attempt = 1; attempt <= 3 && !/interrupted/i.test(stateLine); attempt++) {
      turnStarted = Date.now();
      await panel.click("Talk");
      await voiceState("speaking", TURN_MS, "the reply to be spoken");
      await js(`document.querySelector('${css("voice-stop")}')?.click(); return true;`);
      await voiceState("idle", 10_000, "Stop to end the turn");
      stateLine = await overlayText("voice-state");
      log(`  attempt ${attempt}: ${stateLine}`);
    }
    if (!/interrupted/i.test(stateLine)) throw new Error(`the overlay should say the reply was interrupted: ${stateLine}`);
    await shot(ctx, "voice-interrupted");
    await js(`window.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape' })); return true;`);
    await waitFor(async () => (await overlayState()) === null, { message: "Esc to close the overlay" });

    log(`idle cost, window shown and hidden in the tray, alternated (${IDLE_MS / 1000} s each)`);
    const idle = { shown: [], hidden: [] };
    // After a conversation goes quiet the engine works in the background
    // (memory extraction on the local model): measure idle only once the app
    // has used under 5 % of a core for 5 s (at most two minutes of waiting).
    const settleStarted = Date.now();
    await waitFor(async () => (await idleCost(cfg.app, 5_000)).cpu_percent < 5, { timeout: 120_000, interval: 0, message: "the app to go idle" });
    log(`  idle after ${((Date.now() - settleStarted) / 1000).toFixed(0)} s of background work`);
    for (let round = 0; round < 2; round++) {
      idle.shown.push(await idleCost(cfg.app));
      log(`  shown: ${JSON.stringify(idle.shown.at(-1))}`);
      if (round === 0) log("closing the window keeps Ledgermind in the tray");
      await closeWindow(ctx);
      await sleep(5_000);
      idle.hidden.push(await idleCost(cfg.app));
      log(`  hidden: ${JSON.stringify(idle.hidden.at(-1))}`);
      if (round === 0) {
        log("Show in the tray brings the hidden window back");
        await panel.click("Show Ledgermind");
        await waitFor(() => windowVisible(), { timeout: 10_000, message: "Show to bring the window back" });
        await shot(ctx, "shown-again");
        await sleep(5_000);
      }
    }
    writeFileSync(join(cfg.artifacts, "tray-idle.json"), JSON.stringify(idle, null, 2));

    log("the global shortcut, held, talks with the window hidden");
    turnStarted = Date.now();
    execFileSync("xdotool", ["keydown", "ctrl+shift+space"]);
    await waitFor(async () => !!(await menuLabel("Stop talking")), { timeout: 10_000, message: "the shortcut to start a turn" });
    await sleep(3_500);
    execFileSync("xdotool", ["keyup", "ctrl+shift+space"]);
    await waitFor(async () => (await menuLabel("Talk"))?.label === "Talk", { timeout: TURN_MS, message: "the shortcut's turn to end" });
    log(`  the shortcut's turn took ${((Date.now() - turnStarted) / 1000).toFixed(1)} s`);
    if (windowVisible()) throw new Error("the shortcut's turn should not show the window");

    log("a second launch shows the running copy and exits");
    const second = spawnSync(cfg.app, [], { env: process.env, timeout: 20_000 });
    if (second.status !== 0) throw new Error(`the second launch exited with ${second.status} (signal ${second.signal})`);
    await waitFor(() => windowVisible(), { timeout: 10_000, message: "the second launch to show the window" });
    if (appProcesses(cfg.app).length === 0) throw new Error("the running copy is gone after the second launch");
    await waitFor(async () => ["idle", "error"].includes(await overlayState()), { message: "the overlay to show the shortcut's turn" });
    await shot(ctx, "shortcut-turn-while-hidden");
    const third = await overlayText("voice-heard");
    if (!/train/i.test(third)) throw new Error(`the shortcut's turn should have heard the question: ${JSON.stringify(third)}`);

    log("Mute is a check item, and a muted microphone says so");
    await panel.click("Mute microphone");
    await waitFor(async () => (await panel.menu()).some((e) => e.label === "Mute microphone" && e.toggle === 1), {
      message: "Mute to be checked",
    });
    await panel.click("Talk");
    await voiceState("muted", 10_000, "the overlay to say the microphone is muted");
    if (!/muted/i.test(await overlayText("voice-error"))) throw new Error("the overlay should say the microphone is muted");
    await shot(ctx, "voice-muted");
    await panel.click("Mute microphone");
    await waitFor(async () => (await panel.menu()).some((e) => e.label === "Mute microphone" && e.toggle === 0), {
      message: "Mute to be unchecked",
    });

    log("Quit exits the app");
    await panel.click("Quit Ledgermind");
    await waitFor(() => !appRunning(cfg.app), { timeout: 30_000, message: "the app to exit after Quit" });
    log("idle figures (tray-idle.json):");
    for (const way of ["shown", "hidden"]) log(`  ${way}: ${idle[way].map((m) => `${m.rss_mb} MB RSS, ${m.pss_mb} MB PSS, ${m.cpu_percent} % CPU`).join(" | ")}`);
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
