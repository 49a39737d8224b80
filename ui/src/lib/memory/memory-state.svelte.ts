//! "What they know about you": the human's memories, their groups, and the
//! LLM queue (pending, running, dead-lettered work; pause, resume, abort).

import { errorMessage, type Backend } from "../backend";
import type { MemoryView } from "../bindings/MemoryView";
import type { PersonaGroupsView } from "../bindings/PersonaGroupsView";
import type { QueueView } from "../bindings/QueueView";
import type { Notices } from "../app/notices.svelte";
import { t } from "../i18n/i18n";

export const KINDS = ["fact", "trait", "topic", "person", "quote"] as const;

/** Splits "Work, Family" into group names. */
export function parseGroups(text: string): string[] {
  return text
    .split(",")
    .map((g) => g.trim())
    .filter((g) => g.length > 0);
}

/** The text of a quote's message with the quoted span marked: [before, quote, after]. */
export function quoteParts(message: string, start: number, end: number): [string, string, string] {
  const chars = Array.from(message);
  return [chars.slice(0, start).join(""), chars.slice(start, end).join(""), chars.slice(end).join("")];
}

export class MemoryState {
  memories = $state<MemoryView[]>([]);
  loading = $state(false);
  loaded = $state(false);
  error = $state<string | null>(null);
  /** Only what this persona may see; null = everything (it is all the human's). */
  personaId = $state<string | null>(null);
  showSuperseded = $state(false);
  groups = $state<PersonaGroupsView | null>(null);
  queue = $state<QueueView | null>(null);
  /** Ids with an action in flight. */
  busy = $state<Record<string, boolean>>({});

  private readonly backend: Backend;
  private readonly notices: Notices;

  constructor(backend: Backend, notices: Notices) {
    this.backend = backend;
    this.notices = notices;
  }

  async load(): Promise<void> {
    this.loading = true;
    try {
      const [memories, groups] = await Promise.all([
        this.backend.listMemories(this.personaId, this.showSuperseded),
        this.personaId ? this.backend.personaGroups(this.personaId) : Promise.resolve(null),
      ]);
      this.memories = memories;
      this.groups = groups;
      this.error = null;
      this.loaded = true;
    } catch (error) {
      this.error = errorMessage(error);
    } finally {
      this.loading = false;
    }
    await this.refreshQueue();
  }

  /** A `memories_changed` event: reload what is on screen. */
  noteChanged(): void {
    if (this.loaded) void this.load();
  }

  async setPersona(personaId: string | null): Promise<void> {
    this.personaId = personaId;
    await this.load();
  }

  private async act<T>(id: string, action: () => Promise<T>, done: string): Promise<T | null> {
    this.busy[id] = true;
    try {
      const result = await action();
      this.notices.push("success", done);
      if (this.loaded) await this.load();
      return result;
    } catch (error) {
      this.notices.push("error", errorMessage(error));
      return null;
    } finally {
      delete this.busy[id];
    }
  }

  confirm(id: string) {
    return this.act(id, () => this.backend.confirmMemory(id), t("memory.confirmed"));
  }

  edit(id: string, text: string) {
    return this.act(id, () => this.backend.editMemory(id, text), t("memory.saved"));
  }

  forget(id: string) {
    return this.act(id, () => this.backend.forgetMemory(id), t("memory.forgotten"));
  }

  async saveGroups(primary: string, visible: string): Promise<void> {
    if (!this.personaId) return;
    try {
      this.groups = await this.backend.setPersonaGroups(this.personaId, primary, parseGroups(visible));
      this.notices.push("success", t("memory.groups.saved"));
      await this.load();
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  async refreshQueue(): Promise<void> {
    try {
      this.queue = await this.backend.queueView();
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  async pause(): Promise<void> {
    await this.queueAction(() => this.backend.pauseQueue());
  }

  async resume(): Promise<void> {
    await this.queueAction(() => this.backend.resumeQueue());
  }

  /** Per-item priority of pending background work; replies always run first. */
  async setPriority(id: string, priority: string): Promise<void> {
    await this.queueAction(async () => {
      await this.backend.setQueuePriority(id, priority);
      this.notices.push("success", t("queue.priorityChanged"));
    });
  }

  async abort(): Promise<void> {
    await this.queueAction(async () => {
      if (!(await this.backend.abortCurrent())) this.notices.push("info", t("queue.nothingRunning"));
    });
  }

  private async queueAction(action: () => Promise<void>): Promise<void> {
    try {
      await action();
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
    await this.refreshQueue();
  }
}
