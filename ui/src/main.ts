// Start-up marks, read by the startup benchmark (tests/bench/startup.mjs);
// imports are evaluated first, so this one is "the bundle has run".
performance.mark("ledgermind:script");
import "./app.css";
import { mount } from "svelte";
import App from "./App.svelte";
import { createBackend } from "./lib/backend";
import { loadDictionary } from "./lib/i18n/i18n";
import { prefs } from "./lib/prefs/prefs.svelte";

// Before the first render: the font stack depends on it (see app.css).
if (/Linux/.test(navigator.userAgent) && !/Android/.test(navigator.userAgent)) {
  document.documentElement.dataset.platform = "linux";
}

const target = document.getElementById("app");
if (!target) throw new Error("#app is missing from index.html");

// The dictionary of the chosen language, and the backend, before the first render.
const [{ backend, preview }] = await Promise.all([createBackend(), loadDictionary(prefs.lang)]);
const app = mount(App, { target, props: { backend, preview } });
performance.mark("ledgermind:mounted");
requestAnimationFrame(() => performance.mark("ledgermind:first-frame"));
export default app;
