import { fireEvent, render, screen, waitFor } from "@testing-library/svelte";
import { describe, expect, it } from "vitest";
import LibraryView from "./LibraryView.svelte";
import Citations from "./Citations.svelte";
import PassageDialog from "./PassageDialog.svelte";
import { startApp } from "../testing/harness";

describe("LibraryView", () => {
  it("lists imported documents with their status and pages, searches them and removes one", async () => {
    const { app, context } = await startApp();
    render(LibraryView, { context });
    expect(await screen.findByTestId("library-empty")).toBeInTheDocument();

    await app.library.importPaths(["/docs/manual.pdf", "/docs/notes.md"]);
    const rows = await screen.findAllByTestId("library-document");
    expect(rows.map((r) => r.dataset.name)).toEqual(["manual.pdf", "notes.md"]);
    expect(rows[0]).toHaveTextContent("indexed");
    expect(app.notices.items.map((n) => n.text)).toContain("Import finished: 2 of 2 files.");

    await fireEvent.input(screen.getByTestId("library-search"), { target: { value: "manual" } });
    await fireEvent.submit(screen.getByTestId("library-search").closest("form")!);
    const hit = await screen.findByTestId("library-hit");
    expect(hit).toHaveTextContent("manual.pdf, p. 1");

    await fireEvent.click(screen.getAllByTestId("library-remove")[0]);
    await waitFor(() => expect(screen.getAllByTestId("library-document").map((r) => r.dataset.name)).toEqual(["notes.md"]));
    expect(screen.queryByTestId("library-hit")).not.toBeInTheDocument();
  });

  it("shows a running import with its progress and a cancel button", async () => {
    const { app, context } = await startApp();
    render(LibraryView, { context });
    app.handle({
      type: "document_import",
      progress: { import_id: "i1", done: 1, total: 3, current: "/docs/b.pdf", last_status: "indexed", last_error: null, chunks: 12, finished: false, cancelled: false },
    });
    const running = await screen.findByTestId("library-import");
    expect(running).toHaveTextContent("Importing 1 of 3 files (12 passages)");
    expect(running).toHaveTextContent("Reading b.pdf");
    expect(screen.getByTestId("library-cancel")).toBeInTheDocument();
  });

  it("says why a drop imported nothing", async () => {
    const { app, context } = await startApp();
    render(LibraryView, { context });
    app.handle({
      type: "document_import",
      progress: { import_id: "i2", done: 0, total: 1, current: null, last_status: "failed", last_error: "The embedding model is not loaded.", chunks: 0, finished: true, cancelled: false },
    });
    await waitFor(() => expect(app.notices.items.map((n) => n.text)).toContain("Nothing was imported: The embedding model is not loaded."));
    expect(app.notices.items.map((n) => n.text)).not.toContain("Import finished: 0 of 1 files.");
  });
});

describe("Citations", () => {
  it("shows a reply's citations and opens the cited passage", async () => {
    const { app, backend, context } = await startApp();
    await app.library.importPaths(["/docs/manual.pdf"]);
    const [doc] = await backend.listDocuments();
    render(Citations, { context, props: { messageId: "m1" } });
    render(PassageDialog, { context });
    backend.cite("p1", "m1", [
      { label: 1, document_id: doc.id, chunk_id: doc.id * 1000, document: doc.path, place: "manual.pdf, p. 1", page: 1, section: null, snippet: "a document" },
    ]);
    const cited = await screen.findByTestId("citation");
    expect(cited).toHaveTextContent("[1] manual.pdf, p. 1");
    await fireEvent.click(cited);
    expect(await screen.findByTestId("passage-text")).toHaveTextContent("manual.pdf: a document dropped in the preview.");
  });
});
