// End-to-end scenario for living in the tray, through the real window and a
// stand-in panel on the test's D-Bus (tests/e2e/tray-watcher.py): the tray
// registers with its menu, the persona list follows the engine, Talk runs a
// voice turn (e2e.sh feeds a WAV file spoken by espeak-ng as the microphone:
// LEDGERMIND_TEST_VOICE_INPUT) that the overlay shows and the chat keeps,
// Stop cuts a reply, closing the window hides it, the global shortcut
// (held with xdotool) talks with the window hidden, a second launch and the
// tray's Show bring the window back, Mute blocks the microphone, and Quit
// exits cleanly (e2e.sh then verifies the ledger).
//
// Bad input, each with its message and the app running on: the shortcut held
// by another X client at start (tests/e2e/x11-keys.py), the persona's model
// failing in the middle of a voice turn (an account whose server is down),
// and, in a second launch on the same data, no tray host (closing quits,
// Settings says so) and no microphone (the test's WAV file taken away: the
// machine's real devices, of which a CI machine has none).

import { execFileSync, spawn, spawnSync } from "node:child_process";
import { createServer } from "node:http";
import { createInterface } from "node:readline";
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { addAccount, config, createPersona, log, openTab, runIfMain, saveFailureState, selectPersona, shot, startSession, waitForPersona } from "./app.e2e.mjs";
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

/** Another X client holding a key combination until `release()`. */
async function holdKeys(combo) {
  const child = spawn(process.env.LEDGERMIND_SYSTEM_PYTHON ?? "/usr/bin/python3", [join(repo, "tests/e2e/x11-keys.py"), "grab", combo], {
    stdio: ["pipe", "pipe", "inherit"],
  });
  const first = await new Promise((resolveLine, reject) => {
    createInterface({ input: child.stdout }).once("line", resolveLine);
    child.once("exit", (code) => reject(new Error(`x11-keys.py exited with ${code}`)));
  });
  if (first !== "GRABBED") throw new Error(`the other X client could not grab ${combo}: ${first}`);
  const exited = new Promise((done) => child.once("exit", done));
  return {
    release: () => {
      child.stdin.end();
      return exited;
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

/** Each thread of the app's processes: its name, CPU ticks and context switches (each one a wake-up). */
function threadCounters(pids) {
  const threads = new Map();
  for (const pid of pids) {
    let process = "?";
    let tids = [];
    try {
      process = readFileSync(`/proc/${pid}/comm`, "utf8").trim();
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
        const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
        const status = readFileSync(`/proc/${pid}/task/${tid}/status`, "utf8");
        const switches = [...status.matchAll(/^(?:non)?voluntary_ctxt_switches:\s+(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0);
        threads.set(`${pid}/${tid}`, {
          name: `${process}/${stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"))}`,
          ticks: Number(fields[11]) + Number(fields[12]),
          wakeups: switches,
        });
      } catch {
        // The thread ended meanwhile.
      }
    }
  }
  return threads;
}

/**
 * Resident memory (RSS and PSS, MB) of the app's processes, their CPU time
 * over `ms` (% of one core), their wake-ups a second, and the threads that
 * woke (by name) so a remaining cost can be traced.
 */
async function idleCost(app, ms = IDLE_MS) {
  const pids = appProcesses(app);
  const before = threadCounters(pids);
  await sleep(ms);
  const after = threadCounters(pids);
  let ticks = 0;
  let wakeups = 0;
  const byThread = new Map();
  for (const [key, now] of after) {
    const then = before.get(key);
    if (!then) continue;
    const woke = now.wakeups - then.wakeups;
    ticks += now.ticks - then.ticks;
    wakeups += woke;
    if (woke > 0) byThread.set(now.name, (byThread.get(now.name) ?? 0) + woke);
  }
  const cpu = (ticks / 100 / (ms / 1000)) * 100; // USER_HZ = 100
  const perSecond = (n) => Math.round((n / (ms / 1000)) * 10) / 10;
  const woken = [...byThread].sort((a, b) => b[1] - a[1]).slice(0, 6).map(([name, n]) => `${name} ${perSecond(n)}/s`);
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
  return {
    processes: pids.length,
    rss_mb: mb(memory("Rss")),
    pss_mb: mb(memory("Pss")),
    cpu_percent: Math.round(cpu * 100) / 100,
    wakeups_per_s: perSecond(wakeups),
    woken,
  };
}

/** Idle measurements, each IDLE_MS long (20 s unless E2E_IDLE_MS says otherwise). */
const IDLE_MS = Number(process.env.E2E_IDLE_MS ?? 20_000);
/** A whole voice turn on a two-core machine: Whisper tiny.en on a 30 s window, the persona's reply on SmolLM2, espeak-ng. */
const TURN_MS = Number(process.env.E2E_VOICE_TURN_MS ?? 240_000);

/**
 * After the hidden window's web view was released, Show (or a second
 * launch) makes a new one: WebDriver's commands go to it from then on.
 */
async function followWindow(ctx) {
  const handle = await waitFor(
    async () => {
      const handles = await ctx.session.windowHandles().catch(() => []);
      return handles.length > 0 ? handles.at(-1) : null;
    },
    { timeout: 20_000, message: "the window made anew to be driveable" },
  );
  await ctx.session.switchToWindow(handle);
  await waitFor(async () => (await ctx.session.execute("return document.readyState").catch(() => null)) === "complete", {
    timeout: 20_000,
    message: "the new window's page to load",
  });
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
  log("another program holds Ctrl+Shift+Space before Ledgermind starts");
  const otherProgram = await holdKeys("ctrl+shift+space");
  const ctx = await startSession(cfg, "tray");
  const js = (code) => ctx.session.execute(code);
  const errorNotices = () => js(`return [...document.querySelectorAll('.notices .notice.error')].map((n) => n.innerText).join(' | ')`);
  const overlayState = () => js(`return document.querySelector('${css("voice-overlay")}')?.dataset.state ?? null`);
  const overlayText = (id) => js(`return document.querySelector('${css(id)}')?.innerText ?? ""`);
  const menuLabel = async (prefix) => (await panel.menu()).find((e) => e.label.startsWith(prefix));
  // The typed voice events themselves, recorded in the page as the shell
  // emits them (`voice://event`): a short reply's speaking state lasts less
  // than one WebDriver round trip under load, so polling the overlay misses
  // it. Every state is logged with the time since the turn began; a Failed
  // event ends the wait at once with its message.
  let turnStarted = Date.now();
  /** @type {import("node:http").Server | null} */
  let failingServer = null;
  let cursor = 0;
  const recordVoiceEvents = () =>
    js(`if (!window.__voiceEvents) {
          window.__voiceEvents = [];
          const handler = window.__TAURI_INTERNALS__.transformCallback((e) => window.__voiceEvents.push(e.payload));
          return window.__TAURI_INTERNALS__.invoke('plugin:event|listen', { event: 'voice://event', target: { kind: 'Any' }, handler }).then(() => true);
        }
        return true;`);
  // Past events are not waited on again: a new turn starts from here.
  const skipVoiceEvents = async () => {
    cursor = await js("return (window.__voiceEvents ?? []).length");
  };
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
    log("the window says at once that the shortcut is taken");
    const takenNotice = await waitFor(async () => {
      const text = await errorNotices();
      return /another program already uses/i.test(text) && text;
    }, { timeout: 60_000, message: "a notice that another program holds the shortcut" });
    log(`  notice: ${takenNotice}`);
    await shot(ctx, "shortcut-taken-notice");

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

    log("Settings says why the shortcut is inactive; once the other program lets go, Save makes it work");
    await openTab(ctx, "settings");
    await ctx.session.waitForElement(css("desktop-settings"));
    await js(`document.querySelector('${css("desktop-settings")}').scrollIntoView(); return true;`);
    const problem = await (await ctx.session.waitForElement(css("shortcut-problem"))).text();
    if (!/another program already uses “Ctrl\+Shift\+Space”/i.test(problem)) throw new Error(`Settings should say another program holds the shortcut: ${problem}`);
    await shot(ctx, "shortcut-taken-settings");
    await otherProgram.release();
    await (await ctx.session.findElement(css("desktop-save"))).click();
    await waitFor(async () => !(await js(`return !!document.querySelector('${css("shortcut-problem")}')`)), {
      message: "the shortcut to be registered after Save",
    });
    await shot(ctx, "desktop-settings");
    const shortcutLine = await js(`return document.querySelector('${css("desktop-settings")}').innerText`);
    if (/could not be registered|not available|already uses/i.test(shortcutLine)) throw new Error(`the shortcut should be active here: ${shortcutLine}`);

    log("Start at login writes the autostart entry at once (hidden in the tray) and unticking removes it");
    const autostart = join(process.env.XDG_CONFIG_HOME ?? "", "autostart", "ledgermind.desktop");
    if (!process.env.XDG_CONFIG_HOME) throw new Error("scripts/e2e.sh gives the scenario its own XDG_CONFIG_HOME");
    if (existsSync(autostart)) throw new Error(`no autostart entry before the box is ticked: ${autostart}`);
    await (await ctx.session.findElement(css("start-at-login"))).click();
    await waitFor(async () => existsSync(autostart), { message: "the autostart entry to be written" });
    const entry = readFileSync(autostart, "utf8");
    if (!/^Exec=.*ledgermind-desktop"? --hidden$/m.test(entry)) throw new Error(`the entry should start the app hidden:\n${entry}`);
    await shot(ctx, "start-at-login-on");
    await (await ctx.session.findElement(css("start-at-login"))).click();
    await waitFor(async () => !existsSync(autostart), { message: "the autostart entry to be removed" });
    if ((await (await ctx.session.findElement(css("start-at-login"))).property("checked")) !== false) throw new Error("the box should be unticked");
    await js(`document.querySelector('${css("voice-rate")}').scrollIntoView(); return true;`);
    await shot(ctx, "voice-settings");
    await openTab(ctx, "chat");

    log("Talk in the tray runs a voice turn: listening, thinking, speaking, done");
    await recordVoiceEvents();
    // The meter's highest level, kept by the page between two polls: on a
    // loaded machine a short question can be over before a poll sees it.
    await js(`window.__meterMax = 0;
      new MutationObserver(() => {
        const m = document.querySelector('[role=meter]');
        if (m) window.__meterMax = Math.max(window.__meterMax, Number(m.getAttribute('aria-valuenow')) || 0);
      }).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ['aria-valuenow'] });
      return true;`);
    turnStarted = Date.now();
    await panel.click("Talk");
    await voiceState("listening", 30_000, "the overlay to listen");
    await waitFor(async () => Number(await js("return window.__meterMax")) > 20, {
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
    // The chat keeps the turn like a typed one, the cut reply marked as such.
    await waitFor(async () => (await js(`return document.querySelectorAll('${css("message-interrupted")}').length`)) > 0, {
      timeout: 15_000,
      message: "the chat to mark the reply that was cut off",
    });
    await shot(ctx, "voice-interrupted");
    await js(`window.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape' })); return true;`);
    await waitFor(async () => (await overlayState()) === null, { message: "Esc to close the overlay" });

    log("in Portuguese: with Português chosen in Settings the next turn is heard in Portuguese");
    const microphone = process.env.LEDGERMIND_TEST_VOICE_INPUT;
    if (!microphone) throw new Error("scripts/e2e.sh names the tray scenario's microphone file");
    const english = readFileSync(microphone);
    const chooseLanguage = async (value) => {
      await openTab(ctx, "settings");
      await ctx.session.waitForElement(css("voice-language"));
      await js(`const s = document.querySelector('${css("voice-language")}');
        s.scrollIntoView(); s.value = '${value}'; s.dispatchEvent(new Event('change', { bubbles: true })); return true;`);
      const notices = () => js(`return document.querySelectorAll('.notices .notice').length`);
      const before = await notices();
      await (await ctx.session.findElement(css("desktop-save"))).click();
      await waitFor(async () => (await notices()) > before, { message: `the voice language ${value} to be saved` });
    };
    await chooseLanguage("pt");
    await shot(ctx, "voice-language-portuguese");
    execFileSync("espeak-ng", ["-v", "pt-br", "-w", microphone, "Você gosta de trens?"]);
    await openTab(ctx, "chat");
    turnStarted = Date.now();
    await panel.click("Talk");
    await voiceState("speaking", TURN_MS, "the reply to the Portuguese question to be spoken");
    const heardPt = await overlayText("voice-heard");
    // The English-only recogniser writes Portuguese as English words
    // ("Voce gosta de trains"); the multilingual one keeps its accents.
    if (!/você|gosta/i.test(heardPt)) throw new Error(`the overlay should show the Portuguese question as heard: ${JSON.stringify(heardPt)}`);
    await voiceState("idle", TURN_MS, "the Portuguese reply to finish");
    log(`  reply: ${JSON.stringify(await overlayText("voice-spoken"))}`);
    await shot(ctx, "voice-portuguese");
    writeFileSync(microphone, english);
    await chooseLanguage("en");
    await openTab(ctx, "chat");
    await js(`window.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape' })); return true;`);
    await waitFor(async () => (await overlayState()) === null, { message: "Esc to close the overlay" });

    log(`idle cost, window shown and hidden in the tray, alternated (${IDLE_MS / 1000} s each)`);
    const idle = { shown: [], hidden: [] };
    // After a conversation goes quiet the engine works in the background
    // (memory extraction on the local model): measure idle only once the app
    // has used under 5 % of a core for 5 s (at most four minutes of waiting:
    // the background work after the voice turns once took more than two).
    const settleStarted = Date.now();
    await waitFor(async () => (await idleCost(cfg.app, 5_000)).cpu_percent < 5, { timeout: 240_000, interval: 0, message: "the app to go idle" });
    log(`  idle after ${((Date.now() - settleStarted) / 1000).toFixed(0)} s of background work`);
    for (let round = 0; round < 2; round++) {
      idle.shown.push(await idleCost(cfg.app));
      log(`  shown: ${JSON.stringify(idle.shown.at(-1))}`);
      if (round === 0) log("closing the window keeps Ledgermind in the tray");
      await closeWindow(ctx);
      // The web view is released 3 s after the window hides (LEDGERMIND_TRAY_RELEASE_MS).
      await sleep(6_000);
      idle.hidden.push(await idleCost(cfg.app));
      log(`  hidden: ${JSON.stringify(idle.hidden.at(-1))}`);
      if (round === 0) {
        log("Show in the tray brings the hidden window back");
        await panel.click("Show Ledgermind");
        await waitFor(() => windowVisible(), { timeout: 10_000, message: "Show to bring the window back" });
        await followWindow(ctx);
        cursor = 0;
        await recordVoiceEvents();
        await waitForPersona(ctx, "Iris");
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
    await followWindow(ctx);
    cursor = 0;
    await recordVoiceEvents();
    await waitFor(async () => ["idle", "error"].includes(await overlayState()), { message: "the overlay to show the shortcut's turn" });
    await shot(ctx, "shortcut-turn-while-hidden");
    const third = await overlayText("voice-heard");
    if (!/train/i.test(third)) throw new Error(`the shortcut's turn should have heard the question: ${JSON.stringify(third)}`);

    log("the persona's model fails in the middle of a voice turn: the overlay says why, the app goes on");
    // A server that answers but refuses the model (a server that is gone
    // altogether leaves the reply to the local model instead).
    failingServer = createServer((_req, res) => {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "model 'gone' not found" } }));
    });
    await new Promise((done) => failingServer.listen(0, "127.0.0.1", done));
    const failingUrl = `http://127.0.0.1:${failingServer.address().port}/v1`;
    await addAccount(ctx, { name: "offline", baseUrl: failingUrl, key: "sk-e2e-offline", model: "gone" });
    await openTab(ctx, "chat");
    await selectPersona(ctx, "Iris");
    const modelSelect = await ctx.session.waitForElement(css("model-select"));
    const localModel = await modelSelect.property("value");
    const chooseModel = async (value) => {
      await (await ctx.session.waitForElement(`[data-testid="model-select"] option[value="${value}"]`, 15_000)).click();
      await waitFor(async () => (await (await ctx.session.findElement(css("model-select"))).property("value")) === value, {
        message: `Iris to use ${value}`,
      });
    };
    await chooseModel("offline:gone");
    await js(`window.dispatchEvent(new KeyboardEvent('keydown', { key: 'Escape' })); return true;`);
    await skipVoiceEvents();
    turnStarted = Date.now();
    await panel.click("Talk");
    await voiceState("thinking", 30_000, "the failing turn to reach the persona");
    await voiceState("error", TURN_MS, "the overlay to show the failed reply");
    const failure = await overlayText("voice-error");
    log(`  overlay: ${failure}`);
    if (!/reply failed/i.test(failure)) throw new Error(`the overlay should say the reply failed: ${JSON.stringify(failure)}`);
    if (!/train/i.test(await overlayText("voice-heard"))) throw new Error("the failed turn should still show what was heard");
    await shot(ctx, "voice-engine-failed");
    await waitFor(async () => (await menuLabel("Talk"))?.label === "Talk", { message: "Talk to read Talk again after the failure" });
    if (!appRunning(cfg.app)) throw new Error("the app stopped after the failed turn");
    await chooseModel(localModel);

    log("Mute is a check item, and a muted microphone says so");
    await panel.click("Mute microphone");
    await waitFor(async () => (await panel.menu()).some((e) => e.label === "Mute microphone" && e.toggle === 1), {
      message: "Mute to be checked",
    });
    await skipVoiceEvents();
    await panel.click("Talk");
    await voiceState("muted", 10_000, "the overlay to say the microphone is muted");
    if (!/muted/i.test(await overlayText("voice-error"))) throw new Error("the overlay should say the microphone is muted");
    const leftover = (await overlayText("voice-heard")) + (await overlayText("voice-spoken"));
    if (leftover) throw new Error(`the muted overlay still shows an earlier turn's words: ${JSON.stringify(leftover)}`);
    await shot(ctx, "voice-muted");
    await panel.click("Mute microphone");
    await waitFor(async () => (await panel.menu()).some((e) => e.label === "Mute microphone" && e.toggle === 0), {
      message: "Mute to be unchecked",
    });

    log("Quit exits the app");
    await panel.click("Quit Ledgermind");
    await waitFor(() => !appRunning(cfg.app), { timeout: 30_000, message: "the app to exit after Quit" });
    log("idle figures (tray-idle.json):");
    for (const way of ["shown", "hidden"]) {
      for (const m of idle[way]) log(`  ${way}: ${m.processes} processes, ${m.rss_mb} MB RSS, ${m.pss_mb} MB PSS, ${m.cpu_percent} % CPU, ${m.wakeups_per_s} wake-ups/s (${m.woken.join(", ")})`);
    }
  } catch (error) {
    await saveFailureState(ctx);
    throw error;
  } finally {
    await ctx.session.delete().catch(() => {});
    panel.stop();
    await otherProgram.release().catch(() => {});
    failingServer?.close();
  }
  await withoutTrayOrMicrophone(cfg);
  await sleep(200);
}

/**
 * A second launch on the same data with no tray host on the bus and the
 * test's microphone file taken away: Settings says closing quits, the
 * shortcut's turn says there is no microphone, and closing the window quits.
 */
async function withoutTrayOrMicrophone(cfg) {
  const wav = process.env.LEDGERMIND_TEST_VOICE_INPUT;
  if (wav) renameSync(wav, `${wav}.away`);
  const ctx = await startSession(cfg, "notray");
  const js = (code) => ctx.session.execute(code);
  try {
    log("no tray host: Settings says closing quits");
    await waitForPersona(ctx, "Iris");
    await openTab(ctx, "settings");
    const hint = await (await ctx.session.waitForElement(css("no-tray"), 30_000)).text();
    if (!/closing the window quits/i.test(hint)) throw new Error(`Settings should say closing quits: ${hint}`);
    if ((await (await ctx.session.findElement(css("close-to-tray"))).property("disabled")) !== true) {
      throw new Error("close to tray should not be offered without a tray");
    }
    await js(`document.querySelector('${css("desktop-settings")}').scrollIntoView(); return true;`);
    await shot(ctx, "no-tray-settings");
    await openTab(ctx, "chat");

    log("no microphone: the shortcut's turn says so and the app goes on");
    execFileSync("xdotool", ["keydown", "ctrl+shift+space"]);
    await sleep(500);
    execFileSync("xdotool", ["keyup", "ctrl+shift+space"]);
    await waitFor(async () => /microphone/i.test(await js(`return document.querySelector('${css("voice-error")}')?.innerText ?? ""`)), {
      timeout: 30_000,
      message: "the overlay to say there is no microphone",
    });
    const said = await js(`return document.querySelector('${css("voice-error")}').innerText`);
    log(`  overlay: ${said}`);
    if (!/no microphone/i.test(said)) throw new Error(`the overlay should say there is no microphone: ${said}`);
    await shot(ctx, "no-microphone");
    if (!appRunning(cfg.app)) throw new Error("the app stopped after the turn without a microphone");

    log("no tray host: closing the window quits");
    // The page goes with the window, so WebDriver may answer with an error.
    await js("window.__TAURI_INTERNALS__.invoke('plugin:window|close', { label: 'main' }); return true;").catch(() => {});
    await waitFor(() => !appRunning(cfg.app), { timeout: 30_000, message: "closing the window to quit without a tray" });
  } catch (error) {
    await saveFailureState(ctx);
    throw error;
  } finally {
    await ctx.session.delete().catch(() => {});
    if (wav) renameSync(`${wav}.away`, wav);
  }
}

runIfMain(import.meta.url, main);
