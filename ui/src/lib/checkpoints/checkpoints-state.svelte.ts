//! Save slots: 0–9 auto-saves (FIFO, oldest first), 10–14 manual. Also the
//! app-wide hold: between `checkpoint_started` and the event that closes the
//! operation nothing in the UI may be used.

import { errorMessage, type Backend } from "../backend";
import type { AppEvent } from "../bindings/AppEvent";
import type { CheckpointView } from "../bindings/CheckpointView";
import type { ReceiptView } from "../bindings/ReceiptView";
import type { Notices } from "../app/notices.svelte";
import { t } from "../i18n/i18n";

export const AUTO_SLOTS = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] as const;
export const MANUAL_SLOTS = [10, 11, 12, 13, 14] as const;

export type CheckpointOp = "save" | "delete" | "restore" | "undo";

/** A checkpoint operation the core is running (from `checkpoint_started`). */
export interface BusyOp {
  op: string;
  slot: number | null;
}

/** What the banner at the top of the panel says after a restore or an undo. */
export interface RestoreBanner {
  kind: "restored" | "undone";
  slot: number | null;
  receipt: ReceiptView;
}

type CheckpointEvent = Extract<AppEvent, { type: `checkpoint_${string}` }>;

/** A `checkpoint_started` this soon after our own call for the same op returned is a late echo. */
const LATE_ECHO_MS = 2000;

const key = (op: string, slot: number | null) => `${op}:${slot ?? "-"}`;

export function isCheckpointEvent(event: AppEvent): event is CheckpointEvent {
  return event.type.startsWith("checkpoint_");
}

export class CheckpointsState {
  /** Filled slots only, by slot number. */
  slots = $state<CheckpointView[]>([]);
  loading = $state(false);
  loaded = $state(false);
  error = $state<string | null>(null);

  /** Set between `checkpoint_started` and the created/restored/deleted/failed event. */
  busy = $state<BusyOp | null>(null);
  /** Our own call in flight, for the button that started it. */
  pending = $state<BusyOp | null>(null);
  banner = $state<RestoreBanner | null>(null);
  /** Name typed per manual slot, before it is saved. */
  drafts = $state<Record<number, string>>({});

  bySlot = $derived(new Map(this.slots.map((c) => [c.slot, c])));
  /** The newest auto-save's slot (the highest used one). */
  newestAuto = $derived(this.slots.filter((c) => !c.manual).reduce((max, c) => Math.max(max, c.slot), -1));

  private readonly backend: Backend;
  private readonly notices: Notices;
  private readonly reload: (receipt: ReceiptView) => Promise<void>;
  private settled = new Map<string, number>();

  /** `reload` puts the projected state back in the UI after a restore (called once per receipt). */
  constructor(backend: Backend, notices: Notices, reload: (receipt: ReceiptView) => Promise<void>) {
    this.backend = backend;
    this.notices = notices;
    this.reload = reload;
  }

  get held(): boolean {
    return this.busy !== null;
  }

  // ---- events ---------------------------------------------------------------

  handle(event: CheckpointEvent): void {
    switch (event.type) {
      case "checkpoint_started": {
        const k = key(event.op, event.slot);
        const settledAt = this.settled.get(k);
        const ours = this.pending && key(this.pending.op, this.pending.slot) === k;
        if (!ours && settledAt !== undefined && Date.now() - settledAt < LATE_ECHO_MS) return;
        this.busy = { op: event.op, slot: event.slot };
        break;
      }
      case "checkpoint_created":
        this.busy = null;
        this.upsert(event.checkpoint);
        // An auto-save may have shifted slots 0–9: read them back.
        if (!event.checkpoint.manual) void this.refresh();
        break;
      case "checkpoint_restored":
        this.busy = null;
        void this.reload(event.receipt);
        break;
      case "checkpoint_deleted":
        this.busy = null;
        this.slots = this.slots.filter((c) => c.slot !== event.slot);
        break;
      case "checkpoint_failed":
        this.busy = null;
        // Our own calls report their failure where they were made.
        if (!this.pending) this.notices.push("error", t("checkpoints.failed", { message: event.error.message }));
        break;
    }
  }

  private upsert(view: CheckpointView): void {
    const rest = this.slots.filter((c) => c.slot !== view.slot);
    this.slots = [...rest, view].sort((a, b) => a.slot - b.slot);
  }

  // ---- commands -------------------------------------------------------------

  async refresh(): Promise<void> {
    this.loading = true;
    this.error = null;
    try {
      this.slots = (await this.backend.listCheckpoints()).sort((a, b) => a.slot - b.slot);
      this.loaded = true;
    } catch (error) {
      this.error = errorMessage(error);
    } finally {
      this.loading = false;
    }
  }

  /** Saves manual slot `slot` under the drafted name (or its current one). */
  async save(slot: number): Promise<boolean> {
    const name = (this.drafts[slot] ?? this.bySlot.get(slot)?.name ?? "").trim();
    const view = await this.run("save", slot, () => this.backend.saveCheckpoint(slot, name));
    if (!view) return false;
    this.upsert(view);
    delete this.drafts[slot];
    this.notices.push("success", t("checkpoints.saved", { slot: String(slot), name: view.name }));
    return true;
  }

  async remove(slot: number): Promise<boolean> {
    const name = this.bySlot.get(slot)?.name ?? "";
    const done = await this.run("delete", slot, async () => {
      await this.backend.deleteCheckpoint(slot);
      return true;
    });
    if (!done) return false;
    this.slots = this.slots.filter((c) => c.slot !== slot);
    delete this.drafts[slot];
    this.notices.push("success", t("checkpoints.deleted", { slot: String(slot), name }));
    return true;
  }

  async restore(slot: number): Promise<boolean> {
    const receipt = await this.run("restore", slot, () => this.backend.restoreCheckpoint(slot));
    if (!receipt) return false;
    this.banner = { kind: "restored", slot, receipt };
    await this.reload(receipt);
    return true;
  }

  async undo(): Promise<boolean> {
    const slot = this.banner?.slot ?? null;
    const receipt = await this.run("undo", null, () => this.backend.undoRestore());
    if (!receipt) return false;
    this.banner = { kind: "undone", slot, receipt };
    await this.reload(receipt);
    return true;
  }

  dismissBanner(): void {
    this.banner = null;
  }

  private busyWith(k: string): boolean {
    return this.busy !== null && key(this.busy.op, this.busy.slot) === k;
  }

  /** Runs one call; a failure becomes a notice and `null`. */
  private async run<T>(op: CheckpointOp, slot: number | null, call: () => Promise<T>): Promise<T | null> {
    if (this.pending || this.busy) return null;
    this.pending = { op, slot };
    try {
      return await call();
    } catch (error) {
      this.notices.push("error", errorMessage(error));
      return null;
    } finally {
      this.pending = null;
      const k = key(op, slot);
      this.settled.set(k, Date.now());
      // The call has returned, so the operation is over even if its closing
      // event is still on the way (or was lost).
      if (this.busyWith(k)) this.busy = null;
    }
  }
}
