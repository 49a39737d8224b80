//! Short-lived messages shown in the corner (announced politely to screen readers).

export type NoticeKind = "info" | "success" | "error";
export interface Notice {
  id: number;
  kind: NoticeKind;
  text: string;
}

export class Notices {
  items = $state<Notice[]>([]);
  private nextId = 1;

  push(kind: NoticeKind, text: string, ttlMs = kind === "error" ? 9000 : 5000): number {
    const id = this.nextId++;
    this.items.push({ id, kind, text });
    if (this.items.length > 4) this.items.shift();
    if (ttlMs > 0 && typeof setTimeout !== "undefined") setTimeout(() => this.dismiss(id), ttlMs);
    return id;
  }

  dismiss(id: number): void {
    this.items = this.items.filter((n) => n.id !== id);
  }
}
