import type { Backend } from "./backend";
import { TauriBackend } from "./tauri";

declare global {
  interface Window {
    __TAURI_INTERNALS__?: unknown;
  }
}

/**
 * The Tauri backend inside the desktop shell; in a plain browser, the
 * in-memory fake (`preview`), loaded only there: the desktop bundle's first
 * screen does not carry it.
 */
export async function createBackend(): Promise<{ backend: Backend; preview: boolean }> {
  if (typeof window !== "undefined" && window.__TAURI_INTERNALS__) {
    return { backend: new TauriBackend(), preview: false };
  }
  const { MockBackend } = await import("./mock");
  return { backend: new MockBackend({ seed: true }), preview: true };
}

export type { Backend, DragDropEvent } from "./backend";
export { BackendError, errorMessage, toBackendError } from "./backend";
