import { fireEvent, render, screen } from "@testing-library/svelte";
import { describe, expect, it } from "vitest";
import VoiceOverlay from "./VoiceOverlay.svelte";
import { startApp } from "../testing/harness";
import { MockBackend } from "../backend/mock";
import { AppState } from "../app/app-state.svelte";
import { APP_STATE } from "../app/context";

describe("VoiceOverlay", () => {
  it("a page opened after a turn shows how that turn ended (the window was hidden and made anew)", async () => {
    const backend = new MockBackend();
    backend.latestVoice = [
      { type: "state", state: "listening", persona_id: "p1" },
      { type: "state", state: "thinking", persona_id: "p1" },
      { type: "heard", text: "do you like trains" },
      { type: "state", state: "speaking", persona_id: "p1" },
      { type: "turn_ended", heard: "do you like trains", reply: "I do.", spoken: "I do.", interrupted: false },
      { type: "state", state: "idle", persona_id: "p1" },
    ];
    const app = new AppState(backend);
    await app.start();
    render(VoiceOverlay, { context: new Map<unknown, unknown>([[APP_STATE, app]]) });
    const overlay = await screen.findByTestId("voice-overlay");
    expect(overlay.dataset.state).toBe("idle");
    expect(screen.getByTestId("voice-heard")).toHaveTextContent("do you like trains");
    expect(screen.getByTestId("voice-spoken")).toHaveTextContent("I do.");
  });


  it("follows a turn: listening with a level, thinking, the reply as spoken, and an interruption", async () => {
    const { app, context } = await startApp();
    render(VoiceOverlay, { context });
    expect(screen.queryByTestId("voice-overlay")).not.toBeInTheDocument();

    app.voice.handle({ type: "state", state: "listening", persona_id: "p1" });
    app.voice.handle({ type: "level", level: 0.62 });
    const overlay = await screen.findByTestId("voice-overlay");
    expect(overlay.dataset.state).toBe("listening");
    expect(screen.getByRole("meter")).toHaveAttribute("aria-valuenow", "62");

    app.voice.handle({ type: "state", state: "thinking", persona_id: "p1" });
    app.voice.handle({ type: "heard", text: "do you like trains" });
    expect(await screen.findByTestId("voice-heard")).toHaveTextContent("do you like trains");
    expect(screen.getByRole("meter")).toHaveAttribute("aria-valuenow", "0");

    app.voice.handle({ type: "state", state: "speaking", persona_id: "p1" });
    app.voice.handle({ type: "spoken", text: "I do." });
    expect(await screen.findByTestId("voice-spoken")).toHaveTextContent("I do.");
    expect(screen.getByTestId("voice-stop")).toBeInTheDocument();

    app.voice.handle({ type: "turn_ended", heard: "do you like trains", reply: "I do. Very much.", spoken: "I do.", interrupted: true });
    app.voice.handle({ type: "state", state: "idle", persona_id: "p1" });
    expect(await screen.findByTestId("voice-state")).toHaveTextContent("Interrupted");
    expect(screen.getByTestId("voice-spoken")).toHaveTextContent("interrupted");

    await fireEvent.keyDown(window, { key: "Escape" });
    expect(screen.queryByTestId("voice-overlay")).not.toBeInTheDocument();
  });

  it("shows why a turn could not run and keeps the app usable", async () => {
    const { app, context } = await startApp();
    render(VoiceOverlay, { context });
    await app.voice.talk();
    expect(await screen.findByTestId("voice-error")).toHaveTextContent("no microphone");
    expect(app.voice.state).toBe("error");
    await fireEvent.click(screen.getByTestId("voice-close"));
    expect(screen.queryByTestId("voice-overlay")).not.toBeInTheDocument();
  });

  it("a muted microphone after a turn shows only the muted message, not the earlier turn's words", async () => {
    const { app, context } = await startApp();
    render(VoiceOverlay, { context });
    app.voice.handle({ type: "state", state: "listening", persona_id: "p1" });
    app.voice.handle({ type: "turn_ended", heard: "do you like trains", reply: "I do.", spoken: "I do.", interrupted: false });
    app.voice.handle({ type: "state", state: "idle", persona_id: "p1" });
    expect(await screen.findByTestId("voice-heard")).toHaveTextContent("do you like trains");

    app.voice.handle({ type: "failed", code: "VOICE_MUTED", message: "the microphone is muted: untick Mute microphone in the tray" });
    app.voice.handle({ type: "state", state: "muted", persona_id: null });
    expect(await screen.findByTestId("voice-error")).toHaveTextContent("muted");
    expect(screen.getByTestId("voice-state")).toHaveTextContent("Microphone muted");
    expect(screen.queryByTestId("voice-heard")).not.toBeInTheDocument();
    expect(screen.queryByTestId("voice-spoken")).not.toBeInTheDocument();
  });

  it("an engine failing mid-turn keeps the turn's words beside the error", async () => {
    const { app, context } = await startApp();
    render(VoiceOverlay, { context });
    app.voice.handle({ type: "state", state: "listening", persona_id: "p1" });
    app.voice.handle({ type: "state", state: "thinking", persona_id: "p1" });
    app.voice.handle({ type: "heard", text: "do you like trains" });
    app.voice.handle({ type: "failed", code: "REPLY_FAILED", message: "the persona could not answer" });
    app.voice.handle({ type: "state", state: "error", persona_id: null });
    expect(await screen.findByTestId("voice-error")).toHaveTextContent("could not answer");
    expect(screen.getByTestId("voice-heard")).toHaveTextContent("do you like trains");
  });
});
