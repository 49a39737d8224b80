import type { Backend } from "./backend";
import { MockBackend } from "./mock";
import { TauriBackend } from "./tauri";

declare global {
  interface Window {
    __TAURI_INTERNALS__?: unknown;
  }
}

/** The Tauri backend inside the desktop shell, the in-memory fake in a plain browser. */
export function createBackend(): Backend {
  if (typeof window !== "undefined" && window.__TAURI_INTERNALS__) {
    return new TauriBackend();
  }
  return new MockBackend({ seed: true });
}

export type { Backend, DragDropEvent } from "./backend";
export { BackendError, errorMessage, toBackendError } from "./backend";
