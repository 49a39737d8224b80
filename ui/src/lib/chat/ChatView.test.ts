import { render, screen, waitFor, within } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { startApp } from "../testing/harness";
import ChatView from "./ChatView.svelte";

describe("ChatView", () => {
  it("hands a draft to the core once typing pauses, not on every key", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp({ autoReply: false });
    render(ChatView, { context });
    await user.type(screen.getByTestId("composer-input"), "Where did I");
    await user.type(screen.getByTestId("composer-input"), " park?");
    await waitFor(() => expect(backend.drafts).toEqual(["Where did I park?"]));
  });

  it("keeps unsent text outside the page: a chat opened anew gets it back, and sending forgets it", async () => {
    const user = userEvent.setup();
    const { app, backend, context } = await startApp({ autoReply: false });
    const first = render(ChatView, { context });
    const personaId = app.selectedId!;
    await user.type(screen.getByTestId("composer-input"), "half a thought");
    expect(backend.kept.get(`draft:${personaId}`)).toBe("half a thought");
    // The window's page made anew (a released web view shown again).
    first.unmount();
    render(ChatView, { context });
    await waitFor(() => expect(screen.getByTestId("composer-input")).toHaveValue("half a thought"));
    await user.type(screen.getByTestId("composer-input"), ", finished");
    await user.keyboard("{Enter}");
    await screen.findByText("half a thought, finished");
    expect(backend.kept.has(`draft:${personaId}`)).toBe(false);
  });


  it("sending shows the human message, then the reply assembled from reply_delta events", async () => {
    const user = userEvent.setup();
    const { app, backend, context } = await startApp({ autoReply: false });
    render(ChatView, { context });
    const personaId = app.selectedId!;

    const send = screen.getByTestId("send-button");
    expect(send).toBeDisabled();
    await user.type(screen.getByTestId("composer-input"), "What is two plus two?");
    expect(send).toBeEnabled();
    await user.keyboard("{Enter}");

    const human = await screen.findByText("What is two plus two?");
    expect(human.closest("[data-testid=message]")).toHaveAttribute("data-role", "human");
    expect(screen.getByTestId("composer-input")).toHaveValue("");
    // Waiting for the first token: a typing indicator.
    expect(within(screen.getByTestId("message-streaming")).getByRole("img")).toHaveAccessibleName("Ei is typing…");

    backend.emit({ type: "reply_started", request_id: "r1", persona_id: personaId });
    backend.emit({ type: "reply_delta", request_id: "r1", persona_id: personaId, text: "Two" });
    backend.emit({ type: "reply_delta", request_id: "r1", persona_id: personaId, text: " plus two" });
    await waitFor(() => expect(screen.getByTestId("message-streaming")).toHaveTextContent("Two plus two"));
    backend.emit({ type: "reply_delta", request_id: "r1", persona_id: personaId, text: " is four." });
    await waitFor(() => expect(screen.getByTestId("message-streaming")).toHaveTextContent("Two plus two is four."));

    backend.emit({
      type: "reply_finished",
      request_id: "r1",
      message: {
        id: "m-reply",
        persona_id: personaId,
        role: "persona",
        content: "Two plus two is four.",
        ts: new Date().toISOString(),
        read: false,
        seq: 1000,
        context_status: "default",
      },
    });
    await waitFor(() => expect(screen.queryByTestId("message-streaming")).not.toBeInTheDocument());
    const messages = screen.getAllByTestId("message");
    expect(messages.map((m) => m.dataset.role)).toEqual(["human", "persona"]);
    expect(messages[1]).toHaveTextContent("Two plus two is four.");
    expect(screen.getByTestId("reply-announcer")).toHaveTextContent("Ei: Two plus two is four.");
  });

  it("streams a reply from the mock backend end to end", async () => {
    const user = userEvent.setup();
    const { context } = await startApp({ reply: () => "Four, of course." });
    render(ChatView, { context });
    await user.type(screen.getByTestId("composer-input"), "2+2?");
    await user.click(screen.getByTestId("send-button"));
    await waitFor(() => expect(screen.getAllByTestId("message").map((m) => m.dataset.role)).toEqual(["human", "persona"]));
    expect(screen.getAllByTestId("message")[1]).toHaveTextContent("Four, of course.");
  });

  it("Shift+Enter adds a line instead of sending", async () => {
    const user = userEvent.setup();
    const { context } = await startApp({ autoReply: false });
    render(ChatView, { context });
    const input = screen.getByTestId("composer-input");
    await user.type(input, "one{Shift>}{Enter}{/Shift}two");
    expect(input).toHaveValue("one\ntwo");
    expect(screen.queryAllByTestId("message")).toHaveLength(0);
  });

  it("shows a failed reply inline with the error message", async () => {
    const user = userEvent.setup();
    const { context } = await startApp();
    render(ChatView, { context });
    await user.type(screen.getByTestId("composer-input"), "please /fail{Enter}");
    const failed = await screen.findByTestId("message-failed");
    expect(failed).toHaveTextContent("Ei could not reply");
    expect(failed).toHaveTextContent("The model took too long to answer.");
    expect(screen.queryByTestId("message-streaming")).not.toBeInTheDocument();
  });

  it("changes the persona's model from the header", async () => {
    const user = userEvent.setup();
    const { app, backend, context } = await startApp();
    await backend.addAccount({ name: "ollama", base_url: "http://localhost:11434/v1", api_key: "", default_model: "llama3" });
    await app.refreshModels();
    render(ChatView, { context });
    await user.selectOptions(screen.getByTestId("model-select"), "ollama:llama3");
    await waitFor(() => expect(app.selected?.model).toBe("ollama:llama3"));
  });

  it("says which server model is not answering now", async () => {
    const { app, context } = await startApp();
    app.models = [...app.models, { spec: "ollama:llama3", label: "llama3 (ollama)", local: false, available: false }];
    render(ChatView, { context });
    const option = within(screen.getByTestId("model-select")).getByRole("option", { name: /llama3 \(ollama\)/ });
    expect(option).toHaveTextContent("llama3 (ollama): not answering, replies use the local model");
  });
});
