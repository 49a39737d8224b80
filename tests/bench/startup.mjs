// Cold start to interactive window, and idle memory (RSS and PSS of the app
// plus its WebKit processes), for Ledgermind against a minimal Tauri 2 app
// built the same way, alternating A B A B … in the same run.
//
//   LEDGERMIND_APP=… MINIMAL_APP=… node tests/bench/startup.mjs [rounds]
// (scripts/bench.sh runs it under Xvfb with tauri-driver.)
import { readFileSync, readdirSync } from "node:fs";
import { Session, sleep } from "../e2e/webdriver.mjs";

const driver = process.env.LEDGERMIND_WEBDRIVER || "http://127.0.0.1:4444";
const rounds = Number(process.argv[2] || 5);
const apps = [
  { name: "ledgermind", path: process.env.LEDGERMIND_APP, ready: '[data-testid="persona-item"]' },
  { name: "minimal", path: process.env.MINIMAL_APP, ready: "#ready" },
];

function children(pid) {
  const out = [];
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid === pid) out.push(Number(d));
    } catch { /* process ended */ }
  }
  return out;
}

function tree(pid) {
  const all = [pid];
  for (let i = 0; i < all.length; i++) all.push(...children(all[i]));
  return all;
}

function findPid(path) {
  for (const d of readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/cmdline`, "utf8").split("\0")[0] === path) return Number(d);
    } catch { /* gone */ }
  }
  return null;
}

function memoryKb(pids) {
  let rss = 0, pss = 0;
  for (const p of pids) {
    try {
      const roll = readFileSync(`/proc/${p}/smaps_rollup`, "utf8");
      rss += Number(/^Rss:\s+(\d+)/m.exec(roll)?.[1] || 0);
      pss += Number(/^Pss:\s+(\d+)/m.exec(roll)?.[1] || 0);
    } catch { /* gone */ }
  }
  return { rss, pss };
}

async function once(app) {
  const t0 = performance.now();
  const session = await Session.create(driver, { alwaysMatch: { "tauri:options": { application: app.path } } });
  // Polled every 5 ms: a coarser poll adds up to its interval to whichever
  // app is not ready at the first look.
  await session.waitForElement(app.ready, 60_000, 5);
  const readyMs = performance.now() - t0;
  // Where the time went inside the page, from the navigation's start:
  // the HTML, the scripts having run (DOMContentLoaded), and our own marks.
  const page = await session
    .execute(`const n = performance.getEntriesByType("navigation")[0];
      const mark = (m) => performance.getEntriesByName(m)[0]?.startTime ?? null;
      return { html: n?.responseEnd ?? null, dom: n?.domContentLoadedEventEnd ?? null,
               script: mark("ledgermind:script"), mounted: mark("ledgermind:mounted"), frame: mark("ledgermind:first-frame"), start: mark("ledgermind:start"),
               personas: mark("ledgermind:personas"), painted: mark("ledgermind:painted"), now: performance.now() };`)
    .catch(() => null);
  await sleep(4_000); // settle to idle
  const pid = findPid(app.path);
  const mem = pid ? memoryKb(tree(pid)) : { rss: NaN, pss: NaN };
  // BENCH_DETAIL=1: each process's PSS (where the memory is).
  if (pid && process.env.BENCH_DETAIL) {
    const parts = tree(pid).map((p) => {
      const comm = (() => { try { return readFileSync(`/proc/${p}/comm`, "utf8").trim(); } catch { return "?"; } })();
      return `${comm} ${Math.round(memoryKb([p]).pss / 1024)}`;
    });
    console.log(`  ${app.name} PSS MB by process: ${parts.join(", ")}`);
  }
  await session.delete().catch(() => {});
  await sleep(1_000);
  return { readyMs, page, ...mem };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const results = Object.fromEntries(apps.map((a) => [a.name, []]));
for (let r = 0; r < rounds + 1; r++) {
  for (const app of apps) {
    const m = await once(app);
    if (r > 0) results[app.name].push(m); // round 0 warms the disk cache
  }
}
const summary = {};
for (const app of apps) {
  const xs = results[app.name];
  summary[app.name] = {
    ready_ms: median(xs.map((x) => x.readyMs)),
    rss_mb: median(xs.map((x) => x.rss)) / 1024,
    pss_mb: median(xs.map((x) => x.pss)) / 1024,
  };
}
const a = summary.ledgermind, b = summary.minimal;
console.log(`rounds: ${rounds} (+1 warm-up), medians`);
for (const [n, s] of Object.entries(summary)) {
  console.log(`${n.padEnd(11)} ready ${s.ready_ms.toFixed(0)} ms   RSS ${s.rss_mb.toFixed(0)} MB   PSS ${s.pss_mb.toFixed(0)} MB`);
}
for (const app of apps) {
  const pages = results[app.name].map((x) => x.page).filter(Boolean);
  if (pages.length === 0) continue;
  const med = (k) => {
    const xs = pages.map((p) => p[k]).filter((v) => v !== null);
    return xs.length ? median(xs).toFixed(0) : "-";
  };
  // "before the page" = from asking the driver for a session to the page's own time origin.
  const before = median(results[app.name].filter((x) => x.page).map((x) => x.readyMs - x.page.now));
  console.log(
    `${app.name.padEnd(11)} before the page ${before.toFixed(0)} ms; in the page: html ${med("html")}  bundle run ${med("script")}` +
      `  mounted ${med("mounted")}  first frame ${med("frame")}  scripts done ${med("dom")}  app start ${med("start")}  personas ${med("personas")}  painted ${med("painted")}  ready seen ${med("now")} ms`,
  );
}
console.log(`ratio ledgermind/minimal: ready ${(a.ready_ms / b.ready_ms).toFixed(2)}x  RSS ${(a.rss_mb / b.rss_mb).toFixed(2)}x  PSS ${(a.pss_mb / b.pss_mb).toFixed(2)}x`);
