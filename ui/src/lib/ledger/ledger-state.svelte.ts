//! The ledger explorer: verification and the paged list of events.

import { errorMessage, type Backend } from "../backend";
import type { EventView } from "../bindings/EventView";
import type { ReceiptView } from "../bindings/ReceiptView";
import type { VerifyView } from "../bindings/VerifyView";
import type { Notices } from "../app/notices.svelte";

export const PAGE_SIZE = 50;

export type ReceiptEntry =
  | { status: "loading" }
  | { status: "ok"; receipt: ReceiptView }
  | { status: "error"; message: string };

export class LedgerState {
  events = $state<EventView[]>([]);
  loading = $state(false);
  loaded = $state(false);
  hasMore = $state(false);
  error = $state<string | null>(null);
  expanded = $state<Record<number, boolean>>({});
  /** Receipts of expanded events, by seq (fetched on first expand; they never change). */
  receipts = $state<Record<number, ReceiptEntry>>({});
  /** Events appended since the list was loaded. */
  newSince = $state(0);

  verifying = $state(false);
  verify = $state<VerifyView | null>(null);
  verifyError = $state<string | null>(null);

  private readonly backend: Backend;
  private readonly notices: Notices;

  constructor(backend: Backend, notices: Notices) {
    this.backend = backend;
    this.notices = notices;
  }

  noteAppended(seq: number): void {
    const newest = this.events[0]?.seq ?? 0;
    if (this.loaded && seq > newest) this.newSince = seq - newest;
  }

  /** Loads the newest page, replacing what is shown. */
  async refresh(): Promise<void> {
    this.loading = true;
    this.error = null;
    try {
      const page = await this.backend.listEvents(null, PAGE_SIZE);
      this.events = page;
      this.hasMore = page.length === PAGE_SIZE;
      this.loaded = true;
      this.newSince = 0;
    } catch (error) {
      this.error = errorMessage(error);
    } finally {
      this.loading = false;
    }
  }

  async loadMore(): Promise<void> {
    const oldest = this.events.at(-1)?.seq ?? null;
    if (oldest === null) return this.refresh();
    this.loading = true;
    this.error = null;
    try {
      const page = await this.backend.listEvents(oldest, PAGE_SIZE);
      const known = new Set(this.events.map((e) => e.seq));
      this.events.push(...page.filter((e) => !known.has(e.seq)));
      this.hasMore = page.length === PAGE_SIZE;
    } catch (error) {
      this.error = errorMessage(error);
    } finally {
      this.loading = false;
    }
  }

  toggle(seq: number): void {
    if (this.expanded[seq]) {
      delete this.expanded[seq];
    } else {
      this.expanded[seq] = true;
      void this.loadReceipt(seq);
    }
  }

  async loadReceipt(seq: number): Promise<void> {
    const known = this.receipts[seq];
    if (known && known.status !== "error") return;
    this.receipts[seq] = { status: "loading" };
    try {
      this.receipts[seq] = { status: "ok", receipt: await this.backend.getReceipt(seq) };
    } catch (error) {
      this.receipts[seq] = { status: "error", message: errorMessage(error) };
    }
  }

  async runVerify(): Promise<void> {
    this.verifying = true;
    this.verifyError = null;
    try {
      this.verify = await this.backend.verifyLedger();
    } catch (error) {
      this.verify = null;
      this.verifyError = errorMessage(error);
      this.notices.push("error", this.verifyError);
    } finally {
      this.verifying = false;
    }
  }
}
