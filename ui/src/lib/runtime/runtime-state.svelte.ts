//! The runtime's side of the UI: tool proposals waiting for Confirm /
//! Reject, the questions waiting for the user's answer, the results (with ledger receipts) of executed tool calls, the
//! Saved items list, the metadata service setting and the per-tool switches.

import { errorMessage, toBackendError, type Backend } from "../backend";
import type { AppEvent } from "../bindings/AppEvent";
import type { ItemView } from "../bindings/ItemView";
import type { MetadataServiceView } from "../bindings/MetadataServiceView";
import type { ToolSettingView } from "../bindings/ToolSettingView";
import type { ProposalView } from "../bindings/ProposalView";
import type { AwaitingInputView } from "../bindings/AwaitingInputView";
import type { ToolResultView } from "../bindings/ToolResultView";
import type { Notices } from "../app/notices.svelte";

export interface ProposalEntry {
  proposal: ProposalView;
  busy: boolean;
  /** Why the last Confirm failed (expired, reused…), shown on the card. */
  error: { code: string; message: string } | null;
}

/** An executed tool call, placed in the chat after the message with `afterSeq`. */
export interface ResultEntry {
  result: ToolResultView;
  afterSeq: number;
}

const RUNTIME_EVENTS = new Set(["tool_proposed", "proposal_settled", "tool_executed", "items_changed", "input_awaited", "input_settled"]);

export function isRuntimeEvent(event: AppEvent): boolean {
  return RUNTIME_EVENTS.has(event.type);
}

export class RuntimeState {
  proposals = $state<Record<string, ProposalEntry>>({});
  results = $state<Record<string, ResultEntry[]>>({});
  /** The question each conversation waits on (AWAITING_INPUT), by persona id. */
  questions = $state<Record<string, AwaitingInputView>>({});

  items = $state<ItemView[]>([]);
  itemsQuery = $state("");
  itemsLoading = $state(false);
  itemsLoaded = $state(false);
  itemsError = $state<string | null>(null);

  metadata = $state<MetadataServiceView | null>(null);
  tools = $state<ToolSettingView[]>([]);
  /** The tool whose switch is being saved. */
  toolBusy = $state<string | null>(null);

  private itemsRequest = 0;

  constructor(
    private readonly backend: Backend,
    private readonly notices: Notices,
    /** The seq of the newest message in a conversation (to place results). */
    private readonly lastSeq: (personaId: string) => number,
  ) {}

  handle(event: AppEvent): void {
    switch (event.type) {
      case "tool_proposed":
        this.proposals[event.proposal.persona_id] = { proposal: event.proposal, busy: false, error: null };
        break;
      case "proposal_settled": {
        const entry = this.proposals[event.persona_id];
        // A Confirm in flight settles the card itself (it keeps refusals on it).
        if (entry && entry.proposal.nonce === event.nonce && !entry.busy && !entry.error) delete this.proposals[event.persona_id];
        break;
      }
      case "tool_executed":
        this.addResult(event.result);
        break;
      case "items_changed":
        if (this.itemsLoaded) void this.loadItems();
        break;
      case "input_awaited":
        this.questions[event.awaiting.persona_id] = event.awaiting;
        break;
      case "input_settled":
        if (this.questions[event.persona_id]?.correlation_id === event.correlation_id) delete this.questions[event.persona_id];
        break;
    }
  }

  private addResult(result: ToolResultView): void {
    const list = (this.results[result.persona_id] ??= []);
    // The same call arrives twice (its event and Confirm's answer); the steps
    // of one plan share a correlation id but not a receipt.
    const same = (r: ToolResultView) =>
      r.correlation_id === result.correlation_id && r.tool === result.tool && (r.receipt?.seq ?? null) === (result.receipt?.seq ?? null);
    if (list.some((r) => same(r.result))) return;
    this.results[result.persona_id].push({ result, afterSeq: this.lastSeq(result.persona_id) });
  }

  /** Reads the pending proposal and the waiting question of a conversation (after opening it). */
  async loadPending(personaId: string): Promise<void> {
    try {
      const [proposal, question] = await Promise.all([this.backend.pendingProposal(personaId), this.backend.awaitingInput(personaId)]);
      if (proposal) this.proposals[personaId] = { proposal, busy: false, error: null };
      else delete this.proposals[personaId];
      if (question) this.questions[personaId] = question;
      else delete this.questions[personaId];
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  async confirm(personaId: string): Promise<void> {
    const entry = this.proposals[personaId];
    if (!entry || entry.busy) return;
    entry.busy = true;
    entry.error = null;
    try {
      const result = await this.backend.confirmProposal(personaId, entry.proposal.nonce);
      delete this.proposals[personaId];
      this.addResult(result);
    } catch (error) {
      const e = toBackendError(error);
      const current = this.proposals[personaId];
      if (current) {
        current.busy = false;
        current.error = { code: e.code, message: e.message };
      } else {
        this.notices.push("error", e.message);
      }
    }
  }

  async reject(personaId: string): Promise<void> {
    const entry = this.proposals[personaId];
    if (!entry || entry.busy) return;
    entry.busy = true;
    try {
      await this.backend.rejectProposal(personaId);
      delete this.proposals[personaId];
    } catch (error) {
      entry.busy = false;
      this.notices.push("error", errorMessage(error));
    }
  }

  /** Drops a card that can no longer be confirmed (expired, reused). */
  dismiss(personaId: string): void {
    delete this.proposals[personaId];
  }

  async loadItems(): Promise<void> {
    const request = ++this.itemsRequest;
    this.itemsLoading = true;
    try {
      const query = this.itemsQuery.trim();
      const items = await this.backend.listItems(query === "" ? null : query);
      if (request !== this.itemsRequest) return;
      this.items = items;
      this.itemsError = null;
      this.itemsLoaded = true;
    } catch (error) {
      if (request === this.itemsRequest) this.itemsError = errorMessage(error);
    } finally {
      if (request === this.itemsRequest) this.itemsLoading = false;
    }
  }

  async loadMetadata(): Promise<void> {
    try {
      this.metadata = await this.backend.getMetadataService();
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  async loadTools(): Promise<void> {
    try {
      this.tools = await this.backend.listToolSettings();
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  /** Switches a tool on or off; on failure the list keeps the stored state. */
  async setToolEnabled(tool: string, enabled: boolean): Promise<boolean> {
    if (this.toolBusy) return false;
    this.toolBusy = tool;
    try {
      this.tools = await this.backend.setToolEnabled(tool, enabled);
      return true;
    } catch (error) {
      this.notices.push("error", errorMessage(error));
      return false;
    } finally {
      this.toolBusy = null;
    }
  }

  /** Rejects with a `BackendError` (the form shows it). */
  async saveMetadata(baseUrl: string, apiKey: string): Promise<void> {
    this.metadata = await this.backend.setMetadataService(baseUrl, apiKey);
  }
}
