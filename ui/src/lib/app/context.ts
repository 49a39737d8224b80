import { getContext, setContext } from "svelte";
import type { AppState } from "./app-state.svelte";

export const APP_STATE = Symbol("ledgermind.app-state");

export function setAppState(state: AppState): AppState {
  return setContext(APP_STATE, state);
}

export function getAppState(): AppState {
  const state = getContext<AppState | undefined>(APP_STATE);
  if (!state) throw new Error("AppState missing: render inside <App> or pass it in the context");
  return state;
}
