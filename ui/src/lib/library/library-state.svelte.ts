//! The document library: the documents with their status, the imports in
//! progress (cancellable), the Library view's search, and the passages each
//! reply cited.

import { errorMessage, type Backend } from "../backend";
import type { AppEvent } from "../bindings/AppEvent";
import type { CitationView } from "../bindings/CitationView";
import type { DocumentHitView } from "../bindings/DocumentHitView";
import type { DocumentItemView } from "../bindings/DocumentItemView";
import type { ImportProgressView } from "../bindings/ImportProgressView";
import type { PassageView } from "../bindings/PassageView";
import type { Notices } from "../app/notices.svelte";
import { t } from "../i18n/i18n";

type LibraryEvent = Extract<AppEvent, { type: "document_import" | "documents_changed" | "reply_citations" }>;

export function isLibraryEvent(event: AppEvent): event is LibraryEvent {
  return event.type === "document_import" || event.type === "documents_changed" || event.type === "reply_citations";
}

/** Document formats the library reads (the file chooser offers these). */
export const DOCUMENT_EXTENSIONS = ["pdf", "docx", "odt", "epub", "html", "htm", "md", "markdown", "txt", "csv"];

export class LibraryState {
  documents = $state<DocumentItemView[]>([]);
  loaded = $state(false);
  error = $state<string | null>(null);
  /** Imports by id, while running and the last finished one. */
  imports = $state<Record<string, ImportProgressView>>({});
  query = $state("");
  hits = $state<DocumentHitView[]>([]);
  searching = $state(false);
  /** Citations by message id (loaded on first show, or pushed with the reply). */
  citations = $state<Record<string, CitationView[]>>({});
  passage = $state<PassageView | null>(null);
  busy = $state<Record<number, boolean>>({});

  private readonly backend: Backend;
  private readonly notices: Notices;
  private readonly asked = new Set<string>();

  constructor(backend: Backend, notices: Notices) {
    this.backend = backend;
    this.notices = notices;
  }

  handle(event: LibraryEvent): void {
    switch (event.type) {
      case "document_import": {
        const p = event.progress;
        this.imports[p.import_id] = p;
        if (p.finished && p.done === 0 && p.last_status === "failed" && p.last_error) {
          this.notices.push("error", t("library.importFailed", { error: p.last_error }));
          void this.refresh();
        } else if (p.finished) {
          this.notices.push(
            p.cancelled ? "info" : "success",
            t(p.cancelled ? "library.importCancelled" : "library.importDone", { done: p.done, total: p.total }),
          );
          void this.refresh();
        }
        return;
      }
      case "documents_changed":
        if (this.loaded) void this.refresh();
        return;
      case "reply_citations":
        this.citations[event.message_id] = event.citations;
        this.asked.add(event.message_id);
        return;
    }
  }

  /** Imports still running. */
  get running(): ImportProgressView[] {
    return Object.values(this.imports).filter((p) => !p.finished);
  }

  async refresh(): Promise<void> {
    try {
      this.documents = await this.backend.listDocuments();
      this.loaded = true;
      this.error = null;
    } catch (error) {
      this.error = errorMessage(error);
    }
  }

  /** Imports files and folders; with `watch`, the folders stay watched (changes are picked up while the app runs and at start). */
  async importPaths(paths: string[], watch = false): Promise<void> {
    if (paths.length === 0) return;
    try {
      await this.backend.importDocuments(paths, watch);
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  async cancel(importId: string): Promise<void> {
    try {
      await this.backend.cancelImport(importId);
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  async remove(doc: DocumentItemView): Promise<void> {
    this.busy[doc.id] = true;
    try {
      await this.backend.removeDocument(doc.id);
      this.documents = this.documents.filter((d) => d.id !== doc.id);
      this.hits = this.hits.filter((h) => h.document_id !== doc.id);
      this.notices.push("success", t("library.removed", { name: doc.name }));
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    } finally {
      delete this.busy[doc.id];
    }
  }

  async setGroups(doc: DocumentItemView, groups: string[]): Promise<void> {
    try {
      await this.backend.setDocumentGroups(doc.id, groups);
      await this.refresh();
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  async search(): Promise<void> {
    const q = this.query.trim();
    if (!q) {
      this.hits = [];
      return;
    }
    this.searching = true;
    try {
      this.hits = await this.backend.searchDocuments(q, 8);
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    } finally {
      this.searching = false;
    }
  }

  /** Loads a reply's citations once (history shown after a restart). */
  async loadCitations(messageId: string): Promise<void> {
    if (this.asked.has(messageId)) return;
    this.asked.add(messageId);
    try {
      const found = await this.backend.messageCitations(messageId);
      if (found.length > 0) this.citations[messageId] = found;
    } catch {
      // No library, or it cannot be read: the reply simply shows no citations.
    }
  }

  async openPassage(chunkId: number): Promise<void> {
    try {
      this.passage = await this.backend.documentPassage(chunkId);
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  closePassage(): void {
    this.passage = null;
  }
}
