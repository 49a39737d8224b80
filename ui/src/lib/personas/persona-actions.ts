//! Persona management and chat state over the app state: the
//! archived list, pause / resume, per-message context status, recall, and
//! queue priority. Each resolves false (or null) with a notice when the
//! core refuses, so nothing the person typed is lost.

import type { AppState } from "../app/app-state.svelte";
import { errorMessage } from "../backend";
import type { MessageView } from "../bindings/MessageView";
import type { PersonaView } from "../bindings/PersonaView";
import { formatTime, t } from "../i18n/i18n";

/** Whether `persona` is paused now (its pause may have ended already). */
export function isPaused(persona: Pick<PersonaView, "paused_until">, now = Date.now()): boolean {
  if (!persona.paused_until) return false;
  const until = Date.parse(persona.paused_until);
  return !Number.isNaN(until) && until > now;
}

/** `datetime-local` value (local time, minutes) for a moment `ms` from now. */
export function localInputValue(date: Date): string {
  const pad = (n: number) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

/** Parses a `datetime-local` value as local time into RFC 3339 UTC; null when invalid. */
export function toRfc3339(local: string): string | null {
  const ms = Date.parse(local);
  return Number.isNaN(ms) ? null : new Date(ms).toISOString();
}

/** Loads the archived personas into the app's list (the sidebar filters them). */
export async function loadArchived(app: AppState): Promise<void> {
  try {
    for (const p of await app.backend.listArchivedPersonas()) app.upsertPersona(p);
  } catch (error) {
    app.notices.push("error", errorMessage(error));
  }
}

export async function pausePersona(app: AppState, personaId: string, untilRfc3339: string): Promise<boolean> {
  try {
    const p = await app.backend.pausePersona(personaId, untilRfc3339);
    app.upsertPersona(p);
    app.notices.push("info", t("personas.pausedNotice", { name: p.name, time: formatTime(p.paused_until ?? "", true) }));
    return true;
  } catch (error) {
    app.notices.push("error", errorMessage(error));
    return false;
  }
}

export async function resumePersona(app: AppState, personaId: string): Promise<boolean> {
  try {
    const p = await app.backend.pausePersona(personaId, null);
    app.upsertPersona(p);
    app.notices.push("success", t("personas.resumed", { name: p.name }));
    return true;
  } catch (error) {
    app.notices.push("error", errorMessage(error));
    return false;
  }
}

export async function unarchive(app: AppState, persona: PersonaView): Promise<boolean> {
  const ok = await app.archivePersona(persona.id, false);
  if (ok) app.notices.push("success", t("personas.unarchived", { name: persona.name }));
  return ok;
}

export async function setContextStatus(app: AppState, message: MessageView, status: string): Promise<boolean> {
  try {
    app.addMessage(await app.backend.setMessageContext(message.id, status));
    return true;
  } catch (error) {
    app.notices.push("error", errorMessage(error));
    return false;
  }
}

/** Takes back a message whose reply has not started; resolves with its text, or null. */
export async function recallMessage(app: AppState, message: MessageView): Promise<string | null> {
  try {
    const text = await app.backend.recallMessage(message.id);
    const list = app.messages[message.persona_id];
    if (list) app.messages[message.persona_id] = list.filter((m) => m.id !== message.id);
    delete app.awaiting[message.persona_id];
    app.notices.push("info", t("chat.recalled"));
    return text;
  } catch (error) {
    app.notices.push("error", errorMessage(error));
    return null;
  }
}
