// Start-up marks, read by the startup benchmark (tests/bench/startup.mjs);
// imports are evaluated first, so this one is "the bundle has run".
performance.mark("ledgermind:script");
import "./app.css";
import { mount } from "svelte";
import App from "./App.svelte";
import { createBackend } from "./lib/backend";

// Before the first render: the font stack depends on it (see app.css).
if (/Linux/.test(navigator.userAgent) && !/Android/.test(navigator.userAgent)) {
  document.documentElement.dataset.platform = "linux";
}

const target = document.getElementById("app");
if (!target) throw new Error("#app is missing from index.html");

const { backend, preview } = await createBackend();
const app = mount(App, { target, props: { backend, preview } });
performance.mark("ledgermind:mounted");
requestAnimationFrame(() => performance.mark("ledgermind:first-frame"));
export default app;
