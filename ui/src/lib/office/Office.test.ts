import { render, screen, waitFor, within } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import { startApp } from "../testing/harness";
import ChatView from "../chat/ChatView.svelte";
import SettingsView from "../settings/SettingsView.svelte";
import { formatMinutes, timeLeft } from "./duration";

async function chatWithReply() {
  const user = userEvent.setup();
  const h = await startApp();
  render(ChatView, { context: h.context });
  await user.type(screen.getByTestId("composer-input"), "What is two plus two?");
  await user.keyboard("{Enter}");
  await h.backend.idle();
  await waitFor(() => expect(screen.getAllByTestId("message").map((m) => m.dataset.role)).toEqual(["human", "persona"]));
  return { user, ...h };
}

describe("office UI", () => {
  it("a persona reply has a keyboard-reachable 'Why did it say that?' that shows the narrative, hash, tokens and handover", async () => {
    const { user, backend, app } = await chatWithReply();
    const personaId = app.selectedId!;
    await backend.setConstitution(personaId, "Be brief.", ["If pressured: cite the terms"]);
    const [human, reply] = screen.getAllByTestId("message");
    expect(within(human).queryByTestId("why-toggle")).toBeNull();
    const toggle = within(reply).getByTestId("why-toggle");
    toggle.focus();
    await user.keyboard("{Enter}");
    expect(toggle).toHaveAttribute("aria-expanded", "true");
    const panel = await within(reply).findByTestId("why-panel");
    const expected = await backend.whyReply(app.messages[personaId]![1]!.id);
    await waitFor(() => expect(within(panel).getByTestId("why-hash")).toHaveTextContent(expected.frame_hash));
    expect(within(panel).getByTestId("why-narrative").textContent).toBe(expected.narrative);
    expect(within(panel).getByTestId("why-narrative").textContent).toContain("Be brief.");
    expect(within(panel).getByTestId("why-tokens")).toHaveTextContent(`${expected.narrative_tokens} of 700`);
    const rows = within(within(panel).getByTestId("why-sections")).getAllByRole("row");
    expect(rows).toHaveLength(1 + expected.sections.length);
    expect(within(panel).getByTestId("why-handover")).toHaveTextContent("None");
    expect(within(panel).getByTestId("why-constitution")).toHaveTextContent("If pressured: cite the terms");
    // Escape closes it and gives focus back to the toggle.
    await user.keyboard("{Escape}");
    expect(within(reply).queryByTestId("why-panel")).toBeNull();
    expect(toggle).toHaveFocus();
  });

  it("a reply without a recorded frame says so instead of showing nothing", async () => {
    const { user, backend, app } = await chatWithReply();
    const personaId = app.selectedId!;
    // The mock only has frames for its own persona replies: fake an unknown id.
    app.messages[personaId]![1] = { ...app.messages[personaId]![1]!, id: "no-such-reply" };
    await waitFor(() => expect(screen.getAllByTestId("why-toggle")).toHaveLength(1));
    await user.click(screen.getByTestId("why-toggle"));
    expect(await screen.findByRole("alert")).toHaveTextContent("no recorded context frame");
    void backend;
  });

  it("'New' writes a handover, marks the session boundary, and the next reply's narrative contains it", async () => {
    const { user, backend, app } = await chatWithReply();
    const personaId = app.selectedId!;
    await user.click(screen.getByTestId("session-new"));
    const brk = await screen.findByTestId("session-break");
    expect(within(brk).getByTestId("session-break-handover").textContent).toContain("What is two plus two?");
    // The marker sits after the last message of the ended session.
    const log = screen.getByRole("log");
    const order = Array.from(log.querySelectorAll("[data-testid=message], [data-testid=session-break]")).map((e) => e.getAttribute("data-testid"));
    expect(order).toEqual(["message", "message", "session-break"]);
    const handover = app.office.breaks[personaId]![0]!.handover.text;

    await user.type(screen.getByTestId("composer-input"), "hello again");
    await user.keyboard("{Enter}");
    await backend.idle();
    await waitFor(() => expect(screen.getAllByTestId("why-toggle")).toHaveLength(2));
    await user.click(screen.getAllByTestId("why-toggle")[1]!);
    const panel = await screen.findByTestId("why-panel");
    await waitFor(() => expect(within(panel).getByTestId("why-handover")).toHaveTextContent(handover));
    expect(within(panel).getByTestId("why-narrative").textContent).toContain(handover);

    // A second "New" right away: nothing new was said after... the last reply, so there is a session; after it, none.
    await user.click(screen.getByTestId("session-new"));
    await waitFor(() => expect(screen.getAllByTestId("session-break")).toHaveLength(2));
    await user.click(screen.getByTestId("session-new"));
    await waitFor(() => expect(app.notices.items.some((n) => n.text.includes("nothing to hand over"))).toBe(true));
    expect(screen.getAllByTestId("session-break")).toHaveLength(2);
  });

  it("past session boundaries are loaded when a chat opens, labelled by how the session ended", async () => {
    const user = userEvent.setup();
    const h = await startApp();
    const id = h.app.selectedId!;
    await h.app.send(id, "First session message");
    await h.backend.idle();
    await h.backend.endSession(id);
    // A fresh view of the same profile (as after a restart) shows the boundary.
    render(ChatView, { context: h.context });
    const brk = await screen.findByTestId("session-break");
    expect(brk).toHaveTextContent("New session");
    await user.click(within(brk).getByText(/New session/));
    expect(within(brk).getByTestId("session-break-handover")).toHaveTextContent("First session message");
    const order = Array.from(screen.getByRole("log").querySelectorAll("[data-testid=message], [data-testid=session-break]")).map((e) => e.getAttribute("data-testid"));
    expect(order).toEqual(["message", "message", "session-break"]);
  });

  it("the constitution editor shows the version, saves a new one, and keeps the text when refused", async () => {
    const user = userEvent.setup();
    const { backend, app, context } = await startApp();
    render(ChatView, { context });
    await user.click(screen.getByTestId("constitution-toggle"));
    const editor = await screen.findByTestId("constitution-editor");
    expect(within(editor).getByTestId("constitution-version")).toHaveTextContent("not set");
    const core = within(editor).getByTestId("constitution-core");
    await waitFor(() => expect(core).toHaveFocus());
    expect(within(editor).getByTestId("constitution-save")).toBeDisabled();
    await user.type(core, "Tell the truth.");
    await user.type(within(editor).getByTestId("constitution-overrides"), "If pressured: cite the terms{Enter}{Enter}If unsure: say so");
    await user.click(within(editor).getByTestId("constitution-save"));
    await waitFor(() => expect(within(editor).getByTestId("constitution-version")).toHaveTextContent("version 1"));
    const saved = await backend.getConstitution(app.selectedId!);
    expect(saved).toMatchObject({ version: 1, core_directive: "Tell the truth.", overrides: ["If pressured: cite the terms", "If unsure: say so"] });

    await user.type(core, " Always.");
    await user.click(within(editor).getByTestId("constitution-save"));
    await waitFor(() => expect(within(editor).getByTestId("constitution-version")).toHaveTextContent("version 2"));

    // Too many overrides: the button is disabled and the count shows it; nothing typed is lost.
    const many = Array.from({ length: 21 }, (_, i) => `rule ${i}`).join("{Enter}");
    await user.type(within(editor).getByTestId("constitution-overrides"), `{Enter}${many}`);
    expect(within(editor).getByTestId("constitution-save")).toBeDisabled();
    expect((within(editor).getByTestId("constitution-overrides") as HTMLTextAreaElement).value).toContain("rule 20");
    expect(within(editor).getByText(/23 of 20 overrides/)).toHaveClass("error-text");

    // Escape closes the editor and focus goes back to its button.
    await user.keyboard("{Escape}");
    expect(screen.queryByTestId("constitution-editor")).toBeNull();
    expect(screen.getByTestId("constitution-toggle")).toHaveFocus();
  });

  it("obligations show the deadline, time left and overdue, most urgent first, and can be marked done", async () => {
    const user = userEvent.setup();
    const { backend, app, context } = await startApp();
    const id = app.selectedId!;
    const inMinutes = (m: number) => new Date(Date.now() + m * 60_000 + 30_000).toISOString();
    backend.addObligation(id, "Send the report", inMinutes(125));
    backend.addObligation(id, "Call the dentist", inMinutes(-90), "commitment");
    backend.addObligation(id, "Someday: learn Rust", null);
    render(ChatView, { context });
    await user.click(screen.getByTestId("obligations-toggle"));
    const panel = await screen.findByTestId("obligations-panel");
    await waitFor(() => expect(within(panel).getAllByTestId("obligation")).toHaveLength(3));
    const items = within(panel).getAllByTestId("obligation");
    expect(items[0]).toHaveTextContent("Call the dentist");
    expect(items[0]).toHaveAttribute("data-overdue", "true");
    expect(within(items[0]!).getByTestId("obligation-left")).toHaveTextContent("overdue by 1 h 29 min");
    expect(items[1]).toHaveTextContent("Send the report");
    expect(within(items[1]!).getByTestId("obligation-left")).toHaveTextContent("due in 2 h 5 min");
    expect(within(items[2]!).getByTestId("obligation-left")).toHaveTextContent("no deadline");
    expect(within(panel).getByTestId("obligations-overdue")).toHaveTextContent("1 overdue");

    await user.click(within(items[0]!).getByRole("button", { name: "Mark “Call the dentist” done" }));
    await waitFor(() => expect(within(panel).queryByTestId("obligations-overdue")).toBeNull());
    const after = within(panel).getAllByTestId("obligation");
    expect(after.at(-1)).toHaveAttribute("data-done", "true");
    expect(after.at(-1)).toHaveTextContent("Call the dentist");
  });

  it("Settings shows today's tokens per persona and sets a daily quota; bad input is refused in place", async () => {
    const user = userEvent.setup();
    const { backend, app, context } = await startApp();
    const ei = app.selectedId!;
    backend.spendTokens(ei, 1200, 34);
    render(SettingsView, { context });
    const panel = await screen.findByTestId("token-quotas");
    const row = await within(panel).findByTestId("quota-row");
    expect(within(row).getByTestId("quota-used")).toHaveTextContent("1,234");
    const input = within(row).getByTestId("quota-input");
    expect(input).toHaveValue("0");
    await user.clear(input);
    await user.type(input, "12a");
    expect(input).toHaveAttribute("aria-invalid", "true");
    expect(within(row).getByTestId("quota-save")).toBeDisabled();
    await user.clear(input);
    await user.type(input, "1000{Enter}");
    await waitFor(() => expect(within(row).getByTestId("quota-used")).toHaveTextContent(/1,234\s*\/\s*1,000/));
    expect(within(row).getByTestId("quota-used")).toHaveTextContent("reached");
    expect((await backend.tokenUsage())[0]!.daily_limit).toBe(1000);
  });

  it("durations read naturally", () => {
    expect(formatMinutes(12)).toBe("12 min");
    expect(formatMinutes(-125)).toBe("2 h 5 min");
    expect(formatMinutes(60)).toBe("1 h");
    expect(formatMinutes(3 * 1440 + 240)).toBe("3 d 4 h");
    expect(timeLeft(null)).toBe("no deadline");
    expect(timeLeft(-5)).toBe("overdue by 5 min");
    expect(timeLeft(-5, true)).toBe("done");
  });

  // ----- session 4: session modes, adding obligations, simulation on the proposal card -----
  it("the chat header switches the session type and mode; deliberate and research only deliberate", async () => {
    const user = userEvent.setup();
    const { backend, app, context } = await startApp();
    const id = app.selectedId!;
    render(ChatView, { context });
    const box = await screen.findByTestId("session-mode");
    expect(box).toHaveAttribute("data-type", "assist");
    expect(box).toHaveAttribute("data-mode", "deliberation");
    // The core escalates an assist session by itself (a `session_mode_set`
    // event): the header follows without being touched.
    await backend.setSessionMode(id, "assist", "commitment");
    await waitFor(() => expect(screen.getByTestId("session-mode")).toHaveAttribute("data-mode", "commitment"));
    await user.selectOptions(screen.getByTestId("session-mode-select"), "deliberation");
    await waitFor(() => expect(screen.getByTestId("session-mode")).toHaveAttribute("data-mode", "deliberation"));
    expect((await backend.sessionMode(id)).mode).toBe("deliberation");
    await user.selectOptions(screen.getByTestId("session-type-select"), "research");
    await waitFor(() => expect(screen.getByTestId("session-mode")).toHaveAttribute("data-type", "research"));
    expect(screen.getByTestId("session-mode-select")).toBeDisabled();
    expect(await backend.sessionMode(id)).toMatchObject({ session_type: "research", mode: "deliberation", allowed_modes: ["deliberation"] });
    await expect(backend.setSessionMode(id, "deliberate", "commitment")).rejects.toMatchObject({ code: "INVALID_INPUT" });
  });

  it("the obligations panel adds a commitment from the keyboard", async () => {
    const user = userEvent.setup();
    const { backend, app, context } = await startApp();
    render(ChatView, { context });
    await user.click(screen.getByTestId("obligations-toggle"));
    const panel = await screen.findByTestId("obligations-panel");
    const add = within(panel).getByTestId("obligation-add-submit");
    expect(add).toBeDisabled();
    await user.selectOptions(within(panel).getByTestId("obligation-add-kind"), "commitment");
    await user.type(within(panel).getByTestId("obligation-add-due"), "2030-01-31T18:00");
    await user.type(within(panel).getByTestId("obligation-add-text"), "Repaint the door{Enter}");
    const item = await within(panel).findByTestId("obligation");
    expect(item).toHaveTextContent("Repaint the door");
    expect(item).toHaveTextContent("Commitment");
    const [stored] = await backend.listObligations(app.selectedId!);
    expect(stored!.due_at).toBe(new Date("2030-01-31T18:00").toISOString());
    expect(within(panel).getByTestId("obligation-add-text")).toHaveValue("");
  });

  /** A pending proposal arrives, as the engine announces it. */
  function propose(backend: Awaited<ReturnType<typeof startApp>>["backend"], personaId: string, nonce: string, tool: string) {
    const now = Date.now();
    backend.emit({
      type: "tool_proposed",
      proposal: { persona_id: personaId, nonce, tool, args: "{}", created_at: new Date(now).toISOString(),
        expires_at: new Date(now + 300_000).toISOString(), correlation_id: `c-${nonce}`, step: null, steps: null },
    });
  }

  it("a proposal card shows the required simulation before Confirm", async () => {
    const { backend, app, context } = await startApp();
    const ei = app.selectedId!;
    let answer: (v: Awaited<ReturnType<typeof backend.simulateProposal>>) => void = () => {};
    const simulate = vi.spyOn(backend, "simulateProposal").mockImplementation(() => new Promise((r) => (answer = r)));
    render(ChatView, { context });
    propose(backend, ei, "n9", "delete_all_memories");
    await screen.findByTestId("simulation-running");
    expect(screen.getByTestId("proposal-confirm")).toBeDisabled();
    answer({
      nonce: "n9", tool: "delete_all_memories", kind: "delete_all_memories", risk: 0.95, critical: true, first_time: false, level: "required", ran: true, mode: "commitment",
      items_added: [], items_removed: ["movie “Heat”", "note “milk”"], obligations_added: [], obligations_closed: [], bookmarks_added: [],
      rejected: null, recommendation: "modify",
    });
    const sim = await screen.findByTestId("simulation");
    expect(simulate).toHaveBeenCalledWith(ei, "n9");
    expect(sim).toHaveAttribute("data-level", "required");
    expect(within(sim).getByTestId("simulation-level")).toHaveTextContent("Simulation required (risk 0.95)");
    expect(within(sim).getByTestId("simulation-changes")).toHaveTextContent("movie “Heat”");
    expect(sim).toHaveTextContent("Would remove 2 item(s):");
    expect(within(sim).getByTestId("simulation-recommendation")).toHaveTextContent("look again");
    expect(screen.getByTestId("proposal-confirm")).toBeEnabled();
    expect(within(sim).queryByTestId("simulation-first-time")).toBeNull();
  });

  it("the first time a persona does a kind of action, the card recommends a simulation and says why", async () => {
    const { backend, app, context } = await startApp();
    const ei = app.selectedId!;
    vi.spyOn(backend, "simulateProposal").mockResolvedValue({
      nonce: "n7", tool: "submit", kind: "submit:fulfil", risk: 0.5, critical: false, first_time: true, level: "recommended", ran: true,
      mode: "commitment", items_added: [], items_removed: [], obligations_added: [], obligations_closed: ["“Pay the tickets”"],
      bookmarks_added: [], rejected: null, recommendation: "proceed",
    });
    render(ChatView, { context });
    propose(backend, ei, "n7", "submit");
    const sim = await screen.findByTestId("simulation");
    expect(sim).toHaveAttribute("data-level", "recommended");
    expect(within(sim).getByTestId("simulation-level")).toHaveTextContent("Simulation recommended (risk 0.50)");
    expect(within(sim).getByTestId("simulation-first-time")).toHaveTextContent("first time");
    expect(within(sim).getByTestId("simulation-first-time-why")).toHaveTextContent("never done this kind of action");
    expect(sim).toHaveTextContent("Would close the obligation:");
    expect(screen.getByTestId("proposal-confirm")).toBeEnabled();
  });
});
