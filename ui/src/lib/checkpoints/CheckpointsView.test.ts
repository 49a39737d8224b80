import { render, screen, waitFor, within } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import App from "../../App.svelte";
import { MockBackend } from "../backend/mock";
import { startApp } from "../testing/harness";
import CheckpointsView from "./CheckpointsView.svelte";

const slotRow = (slot: number) => screen.getAllByTestId("checkpoint-slot").find((el) => el.dataset.slot === String(slot))!;
const inSlot = (slot: number, testid: string) => within(slotRow(slot)).queryByTestId(testid);
/** Browsers reflect `inert` to the attribute; jsdom only keeps the property Svelte sets. */
const isInert = (el: Element) => Boolean((el as HTMLElement & { inert?: boolean }).inert) || el.hasAttribute("inert");
const names = (personas: { name: string }[]) => personas.map((p) => p.name);

describe("CheckpointsView", () => {
  it("shows 15 slots; auto-saves can be restored but have no delete button", async () => {
    const { backend, context } = await startApp();
    await backend.autosaveIfChanged();
    render(CheckpointsView, { context });

    await waitFor(() => expect(slotRow(0)).toHaveAttribute("data-filled", "true"));
    expect(screen.getAllByTestId("checkpoint-slot").map((el) => Number(el.dataset.slot))).toEqual([...Array(15).keys()]);
    expect(screen.getByText("Auto-saves (every 60 s while something changed)")).toBeInTheDocument();
    expect(screen.getByText("Manual saves")).toBeInTheDocument();

    expect(inSlot(0, "checkpoint-restore")).toBeInTheDocument();
    for (let slot = 0; slot < 10; slot++) {
      expect(inSlot(slot, "checkpoint-delete")).toBeNull();
      expect(inSlot(slot, "checkpoint-name-input")).toBeNull();
    }
    expect(within(slotRow(1)).getByText("empty")).toBeInTheDocument();
    expect(inSlot(1, "checkpoint-restore")).toBeNull();
    // The core refuses too.
    await expect(backend.deleteCheckpoint(0)).rejects.toMatchObject({ code: "CHECKPOINT_SLOT_PROTECTED" });
  });

  it("saves a named manual slot, and asks before overwriting it", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    render(CheckpointsView, { context });

    await user.type(await screen.findByLabelText("Name for slot 10"), "before-bo");
    expect(inSlot(10, "checkpoint-restore")).toBeNull();
    await user.click(inSlot(10, "checkpoint-save")!);

    await waitFor(() => expect(slotRow(10)).toHaveAttribute("data-filled", "true"));
    expect(await backend.listCheckpoints()).toMatchObject([{ slot: 10, manual: true, name: "before-bo" }]);
    expect(inSlot(10, "checkpoint-save")).toHaveTextContent("Overwrite");
    expect(inSlot(10, "checkpoint-restore")).toBeInTheDocument();
    expect(inSlot(10, "checkpoint-delete")).toBeInTheDocument();

    // Overwrite: nothing happens until confirmed; Escape cancels.
    await user.clear(screen.getByLabelText("Name for slot 10"));
    await user.type(screen.getByLabelText("Name for slot 10"), "second");
    await user.click(inSlot(10, "checkpoint-save")!);
    expect(screen.getByText("Replace “before-bo” in slot 10 with the current state?")).toBeInTheDocument();
    expect(inSlot(10, "checkpoint-confirm")).toHaveFocus();
    await user.keyboard("{Escape}");
    expect(inSlot(10, "checkpoint-confirm")).toBeNull();
    expect((await backend.listCheckpoints())[0].name).toBe("before-bo");

    await user.click(inSlot(10, "checkpoint-save")!);
    await user.click(inSlot(10, "checkpoint-confirm")!);
    await waitFor(async () => expect((await backend.listCheckpoints())[0].name).toBe("second"));

    // Delete asks too, then empties the slot.
    await user.click(inSlot(10, "checkpoint-delete")!);
    await user.click(inSlot(10, "checkpoint-confirm")!);
    await waitFor(() => expect(slotRow(10)).toHaveAttribute("data-filled", "false"));
    expect(await backend.listCheckpoints()).toEqual([]);
  });

  it("restore brings the saved state back, and the banner's Undo restore undoes it", async () => {
    const user = userEvent.setup();
    const { backend, app, context } = await startApp();
    const ada = await app.createPersona("Ada", "");
    await backend.sendMessage(ada.id, "Hello Ada");
    await backend.idle();
    await backend.saveCheckpoint(10, "before-bo");
    await app.createPersona("Bo", "");
    expect(names(app.sortedPersonas)).toEqual(["Ei", "Ada", "Bo"]);
    render(CheckpointsView, { context });

    await waitFor(() => expect(inSlot(10, "checkpoint-restore")).toBeInTheDocument());
    await user.click(inSlot(10, "checkpoint-restore")!);

    const banner = await screen.findByTestId("restore-banner");
    expect(banner).toHaveTextContent("Restored slot 10 — nothing was deleted.");
    await waitFor(() => expect(names(app.sortedPersonas)).toEqual(["Ei", "Ada"]));
    // Bo was open: the chat moves to a persona that exists.
    expect(app.selected?.name).toBe("Ei");
    // The restore is itself an event: nothing was removed from the ledger.
    const events = await backend.listEvents(null, 100);
    expect(events[0].kind).toBe("checkpoint_restored");
    expect(events.some((e) => e.kind === "persona_created" && e.payload?.includes('"Bo"'))).toBe(true);

    await user.click(screen.getByTestId("undo-restore"));
    await waitFor(() => expect(names(app.sortedPersonas)).toEqual(["Ei", "Ada", "Bo"]));
    await waitFor(() => expect(screen.getByTestId("restore-banner")).toHaveAttribute("data-kind", "undone"));
    expect(screen.queryByTestId("undo-restore")).toBeNull();
    await app.select(ada.id);
    expect(app.messages[ada.id].map((m) => m.content)).toContain("Hello Ada");
  });

  it("holds the whole window between checkpoint_started and checkpoint_created", async () => {
    const backend = new MockBackend({ firstTokenDelayMs: 10, tokenDelayMs: 2 });
    render(App, { props: { backend } });
    const composer = await screen.findByTestId("composer-input");
    const shell = document.querySelector(".shell")!;
    expect(screen.queryByTestId("checkpoint-busy")).toBeNull();
    expect(composer).toBeEnabled();

    backend.emit({ type: "checkpoint_started", op: "save", slot: null });
    const overlay = await screen.findByTestId("checkpoint-busy");
    expect(overlay).toHaveAttribute("aria-busy", "true");
    expect(overlay).toHaveTextContent("Saving a checkpoint…");
    expect(shell).toHaveAttribute("aria-busy", "true");
    expect(isInert(shell)).toBe(true);
    expect(composer).toBeDisabled();

    backend.emit({
      type: "checkpoint_created",
      checkpoint: { slot: 0, manual: false, seq: 1, name: "Auto-save", created_at: new Date().toISOString() },
    });
    await waitFor(() => expect(screen.queryByTestId("checkpoint-busy")).toBeNull());
    expect(shell).toHaveAttribute("aria-busy", "false");
    expect(isInert(shell)).toBe(false);
    expect(composer).toBeEnabled();

    // A failure ends the hold too, and says what went wrong.
    backend.emit({ type: "checkpoint_started", op: "restore", slot: 12 });
    expect(await screen.findByTestId("checkpoint-busy")).toHaveTextContent("Restoring slot 12…");
    backend.emit({ type: "checkpoint_failed", op: "restore", slot: 12, error: { code: "CHECKPOINT_SLOT_EMPTY", message: "Checkpoint slot 12 is empty." } });
    await waitFor(() => expect(screen.queryByTestId("checkpoint-busy")).toBeNull());
    expect(await screen.findByText(/Checkpoint slot 12 is empty\./)).toBeInTheDocument();
  });

  it("Alt+4 opens the panel", async () => {
    const user = userEvent.setup();
    const backend = new MockBackend();
    render(App, { props: { backend } });
    await screen.findByTestId("persona-item");
    await user.keyboard("{Alt>}4{/Alt}");
    expect(screen.getByTestId("nav-checkpoints")).toHaveAttribute("aria-selected", "true");
    expect(await screen.findByRole("heading", { name: "Checkpoints" })).toBeInTheDocument();
  });
});
