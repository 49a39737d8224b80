import { render, screen, waitFor, within } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import ChatView from "../chat/ChatView.svelte";
import { startApp } from "../testing/harness";
import PersonaSidebar from "./PersonaSidebar.svelte";
import { isPaused, toRfc3339 } from "./persona-actions";

describe("persona management", () => {
  it("a description is filled by the model and everything is editable, keeping the person's words", async () => {
    const user = userEvent.setup();
    const { app, context } = await startApp({ autoReply: false });
    await app.createPersona("Marta", "a baker from Lisbon");
    render(ChatView, { context });

    await user.click(screen.getByTestId("persona-edit"));
    const editor = await screen.findByTestId("persona-editor");
    // The mock's fill lands a moment later; the editor takes it.
    await waitFor(() => expect(within(editor).getByTestId("persona-profile-source").dataset.source).toBe("llm"));
    expect(within(editor).getByTestId("persona-edit-short")).toHaveValue("a baker from Lisbon");
    expect(within(editor).getByTestId("persona-edit-traits")).toHaveValue("curious, kind");
    expect(within(editor).getAllByTestId("persona-edit-topic")).toHaveLength(1);
    expect(within(editor).getByTestId("persona-edit-name")).toHaveFocus();

    const traits = within(editor).getByTestId("persona-edit-traits");
    await user.clear(traits);
    await user.type(traits, "warm, patient");
    await user.click(within(editor).getByTestId("persona-edit-add-topic"));
    const names = within(editor).getAllByTestId("persona-edit-topic-name");
    await user.type(names[1], "sourdough");
    await user.clear(within(editor).getByTestId("persona-edit-group"));
    await user.type(within(editor).getByTestId("persona-edit-group"), "Family");
    await user.click(within(editor).getByTestId("persona-edit-save"));
    await waitFor(() => expect(screen.queryByTestId("persona-editor")).not.toBeInTheDocument());

    const saved = await app.backend.personaProfile(app.selected!.id);
    expect(saved.traits).toEqual(["warm", "patient"]);
    expect(saved.topics.map((t) => t.name)).toContain("sourdough");
    expect(saved.group_primary).toBe("Family");
    expect(saved.short_description).toBe("a baker from Lisbon");
    expect(saved.profile_source).toBe("human");
    // Back on the Edit button.
    expect(screen.getByTestId("persona-edit")).toHaveFocus();
  });

  it("a bad number keeps the form and says why; Escape closes it", async () => {
    const user = userEvent.setup();
    const { app, context } = await startApp({ autoReply: false });
    await app.createPersona("Rui", "");
    render(ChatView, { context });
    await user.click(screen.getByTestId("persona-edit"));
    const editor = await screen.findByTestId("persona-editor");
    await waitFor(() => expect(within(editor).getByTestId("persona-edit-heartbeat")).toHaveValue("30"));
    const heartbeat = within(editor).getByTestId("persona-edit-heartbeat");
    await user.clear(heartbeat);
    await user.type(heartbeat, "soon");
    await user.click(within(editor).getByTestId("persona-edit-save"));
    expect(await within(editor).findByTestId("persona-edit-error")).toHaveTextContent("whole number");
    expect(heartbeat).toHaveValue("soon");
    await user.keyboard("{Escape}");
    expect(screen.queryByTestId("persona-editor")).not.toBeInTheDocument();
  });

  it("pauses until a time and resumes; the sidebar shows it", async () => {
    const user = userEvent.setup();
    const { app, context } = await startApp({ autoReply: false });
    await app.createPersona("Ada", "");
    render(PersonaSidebar, { context });
    render(ChatView, { context });
    await user.click(screen.getByTestId("persona-pause"));
    expect(screen.getByTestId("persona-pause-until")).toHaveFocus();
    await user.click(screen.getByTestId("persona-pause-confirm"));
    await waitFor(() => expect(screen.getByTestId("persona-paused-chip")).toBeInTheDocument());
    expect(isPaused(app.selected!)).toBe(true);
    expect(screen.getByTestId("persona-paused")).toHaveTextContent("paused");
    expect(screen.getByTestId("chat-paused")).toBeInTheDocument();
    await user.click(screen.getByTestId("persona-resume"));
    await waitFor(() => expect(screen.queryByTestId("persona-paused-chip")).not.toBeInTheDocument());
    expect(isPaused(app.selected!)).toBe(false);
  });

  it("archived personas are listed apart and can be brought back", async () => {
    const user = userEvent.setup();
    const { app, context } = await startApp({ autoReply: false });
    const bo = await app.createPersona("Bo", "");
    await app.archivePersona(bo.id, true);
    render(PersonaSidebar, { context });
    expect(screen.getAllByTestId("persona-item").map((el) => el.dataset.name)).toEqual(["Ei"]);
    const toggle = screen.getByTestId("archived-toggle");
    expect(toggle).toHaveTextContent("Archived (1)");
    await user.click(toggle);
    await user.click(screen.getByTestId("archived-persona"));
    expect(app.selectedId).toBe(bo.id);
    render(ChatView, { context });
    await user.click(screen.getByTestId("persona-unarchive"));
    await waitFor(() => expect(screen.getAllByTestId("persona-item").map((el) => el.dataset.name)).toEqual(["Ei", "Bo"]));
    expect(toggle).toHaveTextContent("Archived (0)");
  });
});

describe("chat state", () => {
  it("sets a message's context status from its bubble", async () => {
    const user = userEvent.setup();
    const { app, context } = await startApp({ autoReply: false });
    render(ChatView, { context });
    await app.send(app.selectedId!, "remember this always");
    const select = (await screen.findByTestId("message-context")) as HTMLSelectElement;
    expect(select.value).toBe("default");
    await user.selectOptions(select, "always");
    await waitFor(() => expect(screen.getByTestId("message").dataset.context).toBe("always"));
    await user.selectOptions(screen.getByTestId("message-context"), "never");
    await waitFor(() => expect(screen.getByTestId("message").dataset.context).toBe("never"));
  });

  it("recalls a message whose reply has not started back into the composer", async () => {
    const user = userEvent.setup();
    const { app, context } = await startApp({ autoReply: false });
    render(ChatView, { context });
    await user.type(screen.getByTestId("composer-input"), "I ment to say{Enter}");
    const recall = await screen.findByTestId("recall-message");
    await user.click(recall);
    await waitFor(() => expect(screen.queryAllByTestId("message")).toHaveLength(0));
    expect(screen.getByTestId("composer-input")).toHaveValue("I ment to say");
    expect(screen.getByTestId("composer-input")).toHaveFocus();
    expect(app.awaiting[app.selectedId!]).toBeUndefined();
  });

  it("a reply that arrives while the chat is not being read is marked new until it is read", async () => {
    const { app, context } = await startApp();
    render(ChatView, { context });
    const id = app.selectedId!;
    app.view = "ledger";
    await app.send(id, "hello there");
    expect(await screen.findByTestId("message-unread", {}, { timeout: 3000 })).toHaveTextContent("new");
    expect(app.personas.find((p) => p.id === id)?.unread).toBe(1);
    app.view = "chat";
    await app.markRead(id);
    await waitFor(() => expect(screen.queryByTestId("message-unread")).not.toBeInTheDocument());
    expect(app.personas.find((p) => p.id === id)?.unread).toBe(0);
  });

  it("converts a local date and time to UTC", () => {
    expect(toRfc3339("not a date")).toBeNull();
    expect(toRfc3339("2030-01-02T03:04")).toMatch(/^2030-01-0[12]T\d\d:04:00\.000Z$/);
  });
});
