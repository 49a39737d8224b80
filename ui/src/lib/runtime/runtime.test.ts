import { fireEvent, render, screen } from "@testing-library/svelte";
import { describe, expect, it, vi } from "vitest";
import { BackendError } from "../backend";
import ChatView from "../chat/ChatView.svelte";
import { startApp } from "../testing/harness";
import type { ProposalView } from "../bindings/ProposalView";

function proposal(personaId: string, expiresInMs = 300_000, step: [number, number] | null = null): ProposalView {
  return {
    step: step ? step[0] : null,
    steps: step ? step[1] : null,
    persona_id: personaId,
    nonce: "n1",
    tool: "delete_all_memories",
    args: "{}",
    created_at: new Date().toISOString(),
    expires_at: new Date(Date.now() + expiresInMs).toISOString(),
    correlation_id: "c1",
  };
}

describe("runtime in the chat", () => {
  it("shows the waiting-for-your-answer chip while a question waits, until it is settled", async () => {
    const { app, backend, context } = await startApp({ autoReply: false });
    const ei = app.selectedId!;
    render(ChatView, { context });
    expect(screen.queryByTestId("awaiting-input-chip")).not.toBeInTheDocument();
    const awaiting = {
      persona_id: ei,
      tool: "save_movie",
      missing: ["title"],
      question: "Which movie should I save? Tell me its title. (Say “cancel” to drop it.)",
      correlation_id: "c7",
      asked_at: new Date().toISOString(),
      expires_at: new Date(Date.now() + 600_000).toISOString(),
    };
    backend.emit({ type: "input_awaited", awaiting });
    expect(await screen.findByTestId("awaiting-input-chip")).toHaveTextContent("Waiting for your answer");
    expect(screen.getByTestId("awaiting-input")).toHaveAttribute("role", "status");
    expect(screen.getByTestId("awaiting-input")).toHaveAttribute("title", awaiting.question);
    // Another wait's end changes nothing; this one's removes the chip.
    backend.emit({ type: "input_settled", persona_id: ei, correlation_id: "other", outcome: "expired" });
    expect(screen.getByTestId("awaiting-input-chip")).toBeInTheDocument();
    backend.emit({ type: "input_settled", persona_id: ei, correlation_id: "c7", outcome: "answered" });
    await vi.waitFor(() => expect(screen.queryByTestId("awaiting-input-chip")).not.toBeInTheDocument());
    // The question itself, a line the core wrote, ends the typing indicator of the send.
    app.awaiting[ei] = "queued";
    backend.emit({
      type: "message_added",
      message: { id: "q1", persona_id: ei, role: "persona", content: awaiting.question, ts: "", read: true, seq: 99, context_status: "default" },
    });
    expect(app.awaiting[ei]).toBeUndefined();
    // Opening the conversation reads the waiting question.
    vi.spyOn(backend, "awaitingInput").mockResolvedValue(awaiting);
    await app.runtime.loadPending(ei);
    expect(await screen.findByTestId("awaiting-input-chip")).toBeInTheDocument();
  });

  it("shows a proposal with its exact arguments, confirms once and shows the receipt", async () => {
    const { app, backend, context } = await startApp({ autoReply: false });
    const ei = app.selectedId!;
    render(ChatView, { context });
    backend.emit({ type: "tool_proposed", proposal: proposal(ei) });
    const card = await screen.findByTestId("proposal-card");
    expect(card).toHaveAttribute("data-tool", "delete_all_memories");
    expect(screen.getByTestId("proposal-args")).toHaveTextContent("{}");
    expect(screen.getByTestId("proposal-expiry")).toHaveTextContent(/Expires in 4:5\d|Expires in 5:00/);

    const confirm = vi.spyOn(backend, "confirmProposal").mockResolvedValue({
      persona_id: ei,
      tool: "delete_all_memories",
      summary: "Deleted all memories: 3 event payload(s) erased.",
      correlation_id: "c1",
      receipt: {
        seq: 42,
        event_id: "e",
        kind: "payload_erased",
        action_hash: "aa",
        state_before: "bb",
        state_after: "cc",
        signer: "dd",
        signature: "ee",
      },
    });
    await fireEvent.click(screen.getByTestId("proposal-confirm"));
    expect(confirm).toHaveBeenCalledWith(ei, "n1");
    expect(await screen.findByTestId("tool-receipt")).toHaveAttribute("data-kind", "payload_erased");
    expect(screen.getByTestId("tool-result-summary")).toHaveTextContent("Deleted all memories");
    expect(screen.queryByTestId("proposal-card")).not.toBeInTheDocument();
  });

  it("keeps a refused confirmation on the card with its reason, then dismisses it", async () => {
    const { app, backend, context } = await startApp({ autoReply: false });
    const ei = app.selectedId!;
    render(ChatView, { context });
    backend.emit({ type: "tool_proposed", proposal: proposal(ei, -1000) });
    expect(await screen.findByTestId("proposal-expiry")).toHaveTextContent("Expired");
    // The core announces the refusal as an event before the command answers.
    vi.spyOn(backend, "confirmProposal").mockImplementation(async () => {
      backend.emit({ type: "proposal_settled", persona_id: ei, nonce: "n1", outcome: "confirmation_expired" });
      throw new BackendError({ code: "CONFIRMATION_EXPIRED", message: "the proposal expired; ask again" });
    });
    await fireEvent.click(screen.getByTestId("proposal-confirm"));
    const error = await screen.findByTestId("proposal-error");
    expect(error).toHaveAttribute("data-code", "CONFIRMATION_EXPIRED");
    expect(error).toHaveTextContent("expired");
    await fireEvent.click(screen.getByTestId("proposal-dismiss"));
    expect(screen.queryByTestId("proposal-card")).not.toBeInTheDocument();
  });

  it("offers only Dismiss after a confirmed call failed (its nonce is spent)", async () => {
    const { app, backend, context } = await startApp({ autoReply: false });
    const ei = app.selectedId!;
    render(ChatView, { context });
    backend.emit({ type: "tool_proposed", proposal: proposal(ei, 300_000, [3, 3]) });
    vi.spyOn(backend, "confirmProposal").mockRejectedValue(
      new BackendError({ code: "TOOL_FAILED", message: "`delete_memory` failed: no saved item has this id" }),
    );
    await fireEvent.click(await screen.findByTestId("proposal-confirm"));
    expect(await screen.findByTestId("proposal-error")).toHaveAttribute("data-code", "TOOL_FAILED");
    expect(screen.queryByTestId("proposal-confirm")).not.toBeInTheDocument();
    await fireEvent.click(screen.getByTestId("proposal-dismiss"));
    expect(screen.queryByTestId("proposal-card")).not.toBeInTheDocument();
  });

  it("offers only Dismiss after a confirmed call was stopped for making no progress", async () => {
    const { app, backend, context } = await startApp({ autoReply: false });
    const ei = app.selectedId!;
    render(ChatView, { context });
    backend.emit({ type: "tool_proposed", proposal: proposal(ei) });
    vi.spyOn(backend, "confirmProposal").mockRejectedValue(
      new BackendError({ code: "TOOL_TIMEOUT", message: "`forget` failed: the tool made no progress for 30 s and was stopped" }),
    );
    await fireEvent.click(await screen.findByTestId("proposal-confirm"));
    expect(await screen.findByTestId("proposal-error")).toHaveAttribute("data-code", "TOOL_TIMEOUT");
    expect(screen.queryByTestId("proposal-confirm")).not.toBeInTheDocument();
  });

  it("drops the card when the core expires an unanswered proposal", async () => {
    const { app, backend, context } = await startApp({ autoReply: false });
    const ei = app.selectedId!;
    render(ChatView, { context });
    backend.emit({ type: "tool_proposed", proposal: proposal(ei) });
    await screen.findByTestId("proposal-card");
    backend.emit({ type: "proposal_settled", persona_id: ei, nonce: "n1", outcome: "expired" });
    await vi.waitFor(() => expect(screen.queryByTestId("proposal-card")).not.toBeInTheDocument());
  });

  it("rejects with Escape from the card's buttons", async () => {
    const { app, backend, context } = await startApp({ autoReply: false });
    const ei = app.selectedId!;
    render(ChatView, { context });
    backend.emit({ type: "tool_proposed", proposal: proposal(ei) });
    const reject = vi.spyOn(backend, "rejectProposal").mockResolvedValue(true);
    const button = await screen.findByTestId("proposal-confirm");
    button.focus();
    await fireEvent.keyDown(button, { key: "Escape" });
    expect(reject).toHaveBeenCalledWith(ei);
    await vi.waitFor(() => expect(screen.queryByTestId("proposal-card")).not.toBeInTheDocument());
  });
});

describe("multi-step plans", () => {
  it("shows step k of n on a plan's proposal card, and nothing for a single call", async () => {
    const { app, backend, context } = await startApp({ autoReply: false });
    const ei = app.selectedId!;
    render(ChatView, { context });
    backend.emit({ type: "tool_proposed", proposal: proposal(ei, 300_000, [2, 3]) });
    expect(await screen.findByTestId("proposal-step")).toHaveTextContent("Step 2 of 3");
    backend.emit({ type: "tool_proposed", proposal: { ...proposal(ei), nonce: "n2" } });
    await vi.waitFor(() => expect(screen.queryByTestId("proposal-step")).not.toBeInTheDocument());
    expect(screen.getByTestId("proposal-card")).toBeInTheDocument();
  });
});

describe("plan results", () => {
  it("shows one card per plan step, and a call announced twice once", async () => {
    const { app, backend, context } = await startApp({ autoReply: false });
    const ei = app.selectedId!;
    render(ChatView, { context });
    const receipt = (seq: number) => ({
      seq,
      event_id: `e${seq}`,
      kind: "item_saved",
      action_hash: "aa",
      state_before: "bb",
      state_after: "cc",
      signer: "dd",
      signature: "ee",
    });
    const step = (seq: number) => ({ persona_id: ei, tool: "save_note", summary: `Saved note ${seq}.`, correlation_id: "plan", receipt: receipt(seq) });
    backend.emit({ type: "tool_executed", result: step(1) });
    backend.emit({ type: "tool_executed", result: step(2) });
    backend.emit({ type: "tool_executed", result: step(2) });
    await vi.waitFor(() => expect(screen.getAllByTestId("tool-result")).toHaveLength(2));
  });
});

describe("tools in Settings", () => {
  it("lists the tools and switches one off and on again", async () => {
    const { backend, context } = await startApp({ autoReply: false });
    const ToolsPanel = (await import("./ToolsPanel.svelte")).default;
    render(ToolsPanel, { context });
    const toggle = (await screen.findByTestId("tool-toggle-save_movie")) as HTMLInputElement;
    expect(toggle.checked).toBe(true);
    expect(screen.getByTestId("tools-panel")).toHaveTextContent("asks first");
    const set = vi.spyOn(backend, "setToolEnabled");
    await fireEvent.click(toggle);
    expect(set).toHaveBeenCalledWith("save_movie", false);
    await vi.waitFor(() => expect((screen.getByTestId("tool-toggle-save_movie") as HTMLInputElement).checked).toBe(false));
    expect((await backend.listToolSettings()).find((t) => t.name === "save_movie")?.enabled).toBe(false);
    await fireEvent.click(screen.getByTestId("tool-toggle-save_movie"));
    expect(set).toHaveBeenLastCalledWith("save_movie", true);
  });

  it("shows the stored state again when switching is refused", async () => {
    const { backend, context } = await startApp({ autoReply: false });
    const ToolsPanel = (await import("./ToolsPanel.svelte")).default;
    render(ToolsPanel, { context });
    const toggle = (await screen.findByTestId("tool-toggle-save_note")) as HTMLInputElement;
    vi.spyOn(backend, "setToolEnabled").mockRejectedValue(new BackendError({ code: "STORAGE_SAVE_FAILED", message: "disk full" }));
    await fireEvent.click(toggle);
    await vi.waitFor(() => expect(toggle.checked).toBe(true));
  });
});
