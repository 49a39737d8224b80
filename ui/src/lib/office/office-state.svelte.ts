//! The office in the UI: session breaks written by "New" during this run
//! (the chat shows where the next reply's context starts).

import { errorMessage, type Backend } from "../backend";
import type { HandoverView } from "../bindings/HandoverView";
import { t } from "../i18n/i18n";
import type { Notices } from "../app/notices.svelte";

export interface SessionBreak {
  /** The handover's seq: the marker sits after the ended session's messages. */
  afterSeq: number;
  handover: HandoverView;
}

export class OfficeState {
  /** Session breaks by persona id, oldest first. */
  breaks = $state<Record<string, SessionBreak[]>>({});
  /** Persona ids whose session is being ended right now. */
  ending = $state<Record<string, boolean>>({});

  constructor(
    private readonly backend: Backend,
    private readonly notices: Notices,
  ) {}

  /** Loads the persona's past session boundaries (its handovers). */
  async loadBreaks(personaId: string): Promise<void> {
    try {
      const list = await this.backend.listHandovers(personaId);
      this.breaks[personaId] = list.map((handover) => ({ afterSeq: handover.seq, handover }));
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  /** "New": ends the persona's session. Resolves the handover, or null when there was nothing to hand over or it failed. */
  async newSession(personaId: string): Promise<HandoverView | null> {
    if (this.ending[personaId]) return null;
    this.ending[personaId] = true;
    try {
      const handover = await this.backend.endSession(personaId);
      if (!handover) {
        this.notices.push("info", t("office.session.empty"));
        return null;
      }
      this.breaks[personaId] = [...(this.breaks[personaId] ?? []), { afterSeq: handover.seq, handover }];
      this.notices.push("success", t("office.session.ended"));
      return handover;
    } catch (error) {
      this.notices.push("error", errorMessage(error));
      return null;
    } finally {
      this.ending[personaId] = false;
    }
  }
}
