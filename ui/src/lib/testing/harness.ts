//! Test helpers: an AppState over the in-memory backend, ready to render.

import { AppState } from "../app/app-state.svelte";
import { APP_STATE } from "../app/context";
import { MockBackend, type MockOptions } from "../backend/mock";

export interface Harness {
  backend: MockBackend;
  app: AppState;
  /** Pass as `render(Component, { context })`. */
  context: Map<unknown, unknown>;
}

/** A started AppState (personas loaded, Ei selected) over a fast MockBackend. */
export async function startApp(options: MockOptions = {}): Promise<Harness> {
  const backend = new MockBackend({ firstTokenDelayMs: 20, tokenDelayMs: 5, ...options });
  const app = new AppState(backend);
  await app.start();
  return { backend, app, context: new Map<unknown, unknown>([[APP_STATE, app]]) };
}
