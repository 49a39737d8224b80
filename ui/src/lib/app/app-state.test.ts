import { AppState } from "./app-state.svelte";
import { render, screen } from "@testing-library/svelte";
import { describe, expect, it } from "vitest";
import DropOverlay from "../shell/DropOverlay.svelte";
import { startApp } from "../testing/harness";

describe("AppState", () => {
  it("shows the drop overlay while dragging and imports dropped .gguf models", async () => {
    const { app, context } = await startApp();
    render(DropOverlay, { context });
    expect(screen.queryByTestId("drop-overlay")).not.toBeInTheDocument();

    await app.onDragDrop({ type: "enter", paths: ["/models/tiny.gguf"] });
    expect(await screen.findByTestId("drop-overlay")).toHaveTextContent("Drop to import");

    await app.onDragDrop({ type: "drop", paths: ["/models/tiny.gguf"] });
    expect(app.dragging).toBe(false);
    expect(app.models.map((m) => m.spec)).toContain("local:tiny");
    expect(app.notices.items.map((n) => n.text)).toContain("Model “tiny (local)” imported.");
  });

  it("leaves dropped documents to the core and says they are being added", async () => {
    const { app } = await startApp();
    await app.onDragDrop({ type: "drop", paths: ["/home/me/notes.pdf"] });
    expect(app.models.map((m) => m.spec)).not.toContain("local:notes");
    expect(app.notices.items.map((n) => n.text)).toEqual(["Documents and folders are being added to the library."]);
  });

  it("a page made anew opens the chat that was open (kept by the shell, not in browser storage)", async () => {
    const { app, backend } = await startApp();
    const iris = await app.createPersona("Iris", "");
    expect(app.selectedId).toBe(iris.id);
    const again = new AppState(backend);
    await again.start();
    expect(again.selectedId).toBe(iris.id);
  });

  it("merges events that race the command results without duplicates", async () => {
    const { app, backend } = await startApp({ autoReply: false });
    const personaId = app.selectedId!;
    // The core may emit message_added before send_message returns.
    await app.send(personaId, "hi");
    expect(app.messages[personaId].map((m) => m.content)).toEqual(["hi"]);
    const again = app.messages[personaId][0];
    backend.emit({ type: "message_added", message: { ...again } });
    expect(app.messages[personaId]).toHaveLength(1);
  });

  it("tracks the queue and the ledger size from events", async () => {
    const { app, backend } = await startApp();
    backend.emit({ type: "queue_changed", busy: true, pending: 2 });
    expect(app.queue).toEqual({ busy: true, pending: 2 });
    backend.emit({ type: "ledger_appended", seq: 41, kind: "message_added" });
    expect(app.eventCount).toBe(41);
  });
});
