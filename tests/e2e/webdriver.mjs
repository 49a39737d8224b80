// A dependency-free W3C WebDriver client (Node 20, global fetch): just the
// calls the end-to-end scenario needs. Works against tauri-driver (which
// proxies to WebKitWebDriver on Linux) and any W3C driver such as chromedriver.

import { mkdir, writeFile } from "node:fs/promises";
import { dirname } from "node:path";

/** The W3C key under which element references travel. */
export const ELEMENT_KEY = "element-6066-11e4-a52e-4f735466cecf";

/** Special keys for `sendKeys` (W3C WebDriver §17.4.2). */
export const Keys = Object.freeze({
  ENTER: "\uE007",
  ESCAPE: "\uE00C",
  SHIFT: "\uE008",
  TAB: "\uE004",
  BACKSPACE: "\uE003",
});

export class WebDriverError extends Error {
  /**
   * @param {string} error  W3C error code, e.g. "no such element"
   * @param {string} message
   * @param {{ method?: string, path?: string, status?: number }} [where]
   */
  constructor(error, message, where = {}) {
    super(`${error}: ${message}${where.method ? ` (${where.method} ${where.path} → ${where.status})` : ""}`);
    this.name = "WebDriverError";
    this.error = error;
  }
}

/** Errors that mean "not there yet" while polling. */
const TRANSIENT = new Set(["no such element", "stale element reference", "element not interactable"]);

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Polls `predicate` until it returns a truthy value, which is returned.
 * Transient WebDriver errors (element missing or stale) count as "not yet".
 * @template T
 * @param {() => Promise<T> | T} predicate
 * @param {{ timeout?: number, interval?: number, message?: string | (() => string) }} [options]
 * @returns {Promise<T>}
 */
export async function waitFor(predicate, { timeout = 10_000, interval = 100, message = "condition" } = {}) {
  const deadline = Date.now() + timeout;
  let lastError = null;
  for (;;) {
    try {
      const value = await predicate();
      if (value) return value;
      lastError = null;
    } catch (error) {
      if (!(error instanceof WebDriverError && TRANSIENT.has(error.error))) throw error;
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const what = typeof message === "function" ? message() : message;
      throw new Error(`Timed out after ${timeout} ms waiting for ${what}${lastError ? ` (last error: ${lastError.message})` : ""}`);
    }
    await sleep(interval);
  }
}

/** A reference to an element in the current page. */
export class Element {
  /** @param {Session} session @param {string} id @param {string} [selector] */
  constructor(session, id, selector = "") {
    this.session = session;
    this.id = id;
    this.selector = selector;
  }

  /** The JSON form WebDriver expects in script arguments. */
  toJSON() {
    return { [ELEMENT_KEY]: this.id };
  }

  #path(suffix) {
    return `/element/${this.id}${suffix}`;
  }

  click() {
    return this.session.command("POST", this.#path("/click"), {});
  }
  /** Types `text` (may contain `Keys.*`). */
  sendKeys(text) {
    return this.session.command("POST", this.#path("/value"), { text: String(text) });
  }
  clear() {
    return this.session.command("POST", this.#path("/clear"), {});
  }
  /** @returns {Promise<string>} the rendered text */
  text() {
    return this.session.command("GET", this.#path("/text"));
  }
  /** @returns {Promise<string | null>} */
  attribute(name) {
    return this.session.command("GET", this.#path(`/attribute/${encodeURIComponent(name)}`));
  }
  /** @returns {Promise<unknown>} a DOM property, e.g. "value" */
  property(name) {
    return this.session.command("GET", this.#path(`/property/${encodeURIComponent(name)}`));
  }
  /** @returns {Promise<boolean>} */
  displayed() {
    return this.session.command("GET", this.#path("/displayed"));
  }
  /** @returns {Promise<boolean>} */
  enabled() {
    return this.session.command("GET", this.#path("/enabled"));
  }
  /** @returns {Promise<Element>} */
  find(css) {
    return this.session.findElement(css, this);
  }
  /** @returns {Promise<Element[]>} */
  findAll(css) {
    return this.session.findElements(css, this);
  }
}

/** One WebDriver session. */
export class Session {
  /** @param {string} baseUrl @param {string} id @param {Record<string, unknown>} capabilities */
  constructor(baseUrl, id, capabilities) {
    this.baseUrl = baseUrl;
    this.id = id;
    this.capabilities = capabilities;
  }

  /**
   * Opens a session.
   * @param {string} baseUrl e.g. http://127.0.0.1:4444
   * @param {Record<string, unknown>} capabilities the `capabilities` object ({ alwaysMatch: … })
   * @param {{ timeout?: number }} [options] how long to wait for the driver to answer
   */
  static async create(baseUrl, capabilities, { timeout = 60_000 } = {}) {
    const base = baseUrl.replace(/\/+$/, "");
    const value = await request(base, "POST", "/session", { capabilities }, timeout);
    if (!value || typeof value.sessionId !== "string") {
      throw new WebDriverError("session not created", `unexpected answer: ${JSON.stringify(value)}`);
    }
    return new Session(base, value.sessionId, value.capabilities ?? {});
  }

  /** Sends a command scoped to this session and returns its `value`. */
  command(method, path, body, timeout = 60_000) {
    return request(this.baseUrl, method, `/session/${this.id}${path}`, body, timeout);
  }

  navigate(url) {
    return this.command("POST", "/url", { url });
  }

  /** @returns {Promise<Element>} */
  async findElement(css, from = null) {
    const path = from ? `/element/${from.id}/element` : "/element";
    const value = await this.command("POST", path, { using: "css selector", value: css });
    return new Element(this, value[ELEMENT_KEY], css);
  }

  /** @returns {Promise<Element[]>} */
  async findElements(css, from = null) {
    const path = from ? `/element/${from.id}/elements` : "/elements";
    const value = await this.command("POST", path, { using: "css selector", value: css });
    return value.map((v) => new Element(this, v[ELEMENT_KEY], css));
  }

  /** Waits until `css` matches an element and returns it (polling every `interval` ms). */
  waitForElement(css, timeout = 10_000, interval = 100) {
    return waitFor(() => this.findElement(css), { timeout, interval, message: `element ${css}` });
  }

  /** Runs `script` (a function body; use `arguments[i]`) in the page. Element args are passed as references. */
  execute(script, args = []) {
    return this.command("POST", "/execute/sync", { script, args });
  }

  /** @returns {Promise<string[]>} the handles of the app's open windows */
  windowHandles() {
    return this.command("GET", "/window/handles");
  }

  /** Makes `handle` the window later commands go to. */
  switchToWindow(handle) {
    return this.command("POST", "/window", { handle });
  }

  /** @returns {Promise<string[]>} the serialized DOM */
  source() {
    return this.command("GET", "/source");
  }

  title() {
    return this.command("GET", "/title");
  }

  /** @returns {Promise<Buffer>} a PNG of the viewport */
  async screenshot() {
    // WebKitWebDriver occasionally never answers a screenshot under Xvfb;
    // a screenshot is evidence, not a step, so give up on it quickly.
    const base64 = await this.command("GET", "/screenshot", undefined, 15_000);
    return Buffer.from(base64, "base64");
  }

  async saveScreenshot(path) {
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, await this.screenshot());
    return path;
  }

  /** Ends the session (closing the app under tauri-driver). Never throws. */
  async delete() {
    try {
      await request(this.baseUrl, "DELETE", `/session/${this.id}`, undefined, 30_000);
    } catch (error) {
      console.warn(`warning: could not delete the session: ${error.message}`);
    }
  }

  waitFor(predicate, options) {
    return waitFor(predicate, options);
  }
}

/** Waits until a WebDriver server answers /status (tauri-driver takes a moment to start). */
export async function waitForDriver(baseUrl, timeout = 30_000) {
  const base = baseUrl.replace(/\/+$/, "");
  return waitFor(
    async () => {
      try {
        const response = await fetch(`${base}/status`, { signal: AbortSignal.timeout(2_000) });
        return response.ok;
      } catch {
        return false;
      }
    },
    { timeout, interval: 250, message: `a WebDriver server at ${base}` },
  );
}

async function request(base, method, path, body, timeout) {
  let response;
  try {
    response = await fetch(`${base}${path}`, {
      method,
      headers: body === undefined ? {} : { "content-type": "application/json; charset=utf-8" },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(timeout),
    });
  } catch (error) {
    const reason = error?.cause?.code ?? error?.name ?? "network error";
    throw new WebDriverError("unknown error", `cannot reach the WebDriver server at ${base} (${reason}): ${error.message}`, {
      method,
      path,
      status: 0,
    });
  }
  const text = await response.text();
  let json;
  try {
    json = text ? JSON.parse(text) : {};
  } catch {
    throw new WebDriverError("unknown error", `non-JSON answer: ${text.slice(0, 300)}`, { method, path, status: response.status });
  }
  const value = json.value;
  if (!response.ok || (value && typeof value === "object" && typeof value.error === "string")) {
    throw new WebDriverError(value?.error ?? "unknown error", value?.message ?? text.slice(0, 300), {
      method,
      path,
      status: response.status,
    });
  }
  return value ?? null;
}
