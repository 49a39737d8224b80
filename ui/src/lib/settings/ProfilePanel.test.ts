import { render, screen, waitFor, within } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import ChatView from "../chat/ChatView.svelte";
import { startApp } from "../testing/harness";
import ImportPanel from "./ImportPanel.svelte";
import ProfilePanel from "./ProfilePanel.svelte";
import StatusPanel from "./StatusPanel.svelte";

describe("profile: export and erasure", () => {
  it("exports only with a repeated passphrase of 8+ characters and reports what was written", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    const exportProfile = vi.spyOn(backend, "exportProfile");
    render(ProfilePanel, { context });
    const path = screen.getByTestId("export-path");
    await user.clear(path);
    await user.type(path, "/tmp/me.lmx");
    await user.type(screen.getByTestId("export-passphrase"), "correct horse");
    await user.type(screen.getByTestId("export-repeat"), "correct hors");
    expect(screen.getByTestId("export-button")).toBeDisabled();
    expect(screen.getByRole("alert")).toHaveTextContent("The passphrases differ.");
    await user.type(screen.getByTestId("export-repeat"), "e");
    await user.click(screen.getByTestId("export-button"));
    expect(await screen.findByTestId("export-done")).toHaveTextContent("/tmp/me.lmx");
    expect(exportProfile).toHaveBeenCalledWith("/tmp/me.lmx", "correct horse");
    // The passphrase does not stay in the form.
    expect(screen.getByTestId("export-passphrase")).toHaveValue("");
  });

  it("a message deleted for good leaves the conversation after a confirmation", async () => {
    const user = userEvent.setup();
    const { app, context } = await startApp({ autoReply: false });
    render(ChatView, { context });
    await app.send(app.selectedId!, "forget me please");
    const bubble = (await screen.findByText("forget me please")).closest("[data-testid=message]") as HTMLElement;
    await user.click(within(bubble).getByTestId("forget-message"));
    await user.click(within(bubble).getByTestId("forget-confirm"));
    await waitFor(() => expect(screen.queryByText("forget me please")).toBeNull());
  });

  it("a persona is archived, then deleted with what the person told it", async () => {
    const user = userEvent.setup();
    const { app, backend, context } = await startApp({ autoReply: false });
    const remove = vi.spyOn(backend, "deletePersona");
    const ada = await app.createPersona("Ada", "A tutor");
    render(ChatView, { context });
    await user.click(await screen.findByTestId("persona-archive"));
    await user.click(await screen.findByTestId("persona-delete"));
    await user.click(screen.getByTestId("delete-with-human-data"));
    await user.click(screen.getByTestId("persona-delete-confirm"));
    await waitFor(() => expect(app.personas.some((p) => p.id === ada.id)).toBe(false));
    expect(remove).toHaveBeenCalledWith(ada.id, true);
    expect(app.selectedId).not.toBe(ada.id);
  });

  it("a GGUF model can be chosen by its path, not only dropped", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    const importModel = vi.spyOn(backend, "importModel");
    render(StatusPanel, { context });
    await user.type(await screen.findByTestId("model-file"), "/models/tiny.gguf{Enter}");
    await waitFor(() => expect(importModel).toHaveBeenCalledWith("/models/tiny.gguf"));
  });

  it("a GGUF model can be chosen in the in-app file chooser with the keyboard alone", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    const importModel = vi.spyOn(backend, "importModel");
    render(StatusPanel, { context });
    await user.click(await screen.findByTestId("model-browse"));
    const names = () => screen.getAllByTestId("chooser-entry").map((e) => e.dataset.name);
    // Home: folders first; the text file is not a model.
    await waitFor(() => expect(names()).toEqual(["Downloads", "models"]));
    expect(screen.getByTestId("chooser-list")).toHaveFocus();
    await user.keyboard("{Enter}");
    await waitFor(() => expect(names()).toEqual(["tiny-model.gguf"]));
    expect(screen.getByTestId("chooser-path")).toHaveValue("/home/you/Downloads");
    // Up again: the folder we came from stays selected.
    await user.keyboard("{Backspace}");
    await waitFor(() => expect(names()).toEqual(["Downloads", "models"]));
    expect(screen.getAllByTestId("chooser-entry")[0]).toHaveAttribute("aria-selected", "true");
    await user.keyboard("{ArrowDown}{Enter}");
    await waitFor(() => expect(names()).toEqual(["other.Q4_K_M.gguf"]));
    expect(screen.getByTestId("chooser-entry")).toHaveTextContent("400 MB");
    await user.keyboard("{Enter}");
    await waitFor(() => expect(importModel).toHaveBeenCalledWith("/home/you/models/other.Q4_K_M.gguf"));
    expect(screen.queryByTestId("file-chooser")).toBeNull();
    // A path that does not exist says so; Escape closes without choosing.
    await user.click(screen.getByTestId("model-browse"));
    const path = await screen.findByTestId("chooser-path");
    await user.clear(path);
    await user.type(path, "/nowhere{Enter}");
    expect(await screen.findByTestId("chooser-error")).toHaveTextContent("/nowhere does not exist");
    await user.keyboard("{Escape}");
    expect(screen.queryByTestId("file-chooser")).toBeNull();
    expect(importModel).toHaveBeenCalledTimes(1);
  });

  it("imports an export after checking it, asks before replacing a profile in use, then offers a restart", async () => {
    const user = userEvent.setup();
    const { app, backend, context } = await startApp({ autoReply: false });
    await app.createPersona("Ada", "A tutor");
    render(ImportPanel, { context });
    await user.type(screen.getByTestId("import-path"), "/tmp/me.lmx");
    await user.type(screen.getByTestId("import-passphrase"), "wrong one");
    await user.click(screen.getByTestId("import-button"));
    expect(await screen.findByTestId("import-error")).toHaveTextContent("wrong passphrase");
    expect(backend.staged).toHaveLength(0);
    await user.type(screen.getByTestId("import-passphrase"), "{Control>}a{/Control}correct horse");
    await user.click(screen.getByTestId("import-button"));
    // The profile has a persona of the person's own: replacing needs a confirmation.
    await user.click(await screen.findByTestId("import-replace"));
    expect(await screen.findByTestId("import-staged")).toHaveTextContent("42 events");
    expect(backend.staged).toEqual([{ profile_id: "imported-profile", events: 42, replaces_current: true }]);
    expect(screen.getByTestId("import-passphrase")).toHaveValue("");
    await user.click(screen.getByTestId("import-restart"));
    await waitFor(() => expect(backend.restarts).toBe(1));
  });
});
