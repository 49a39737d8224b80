import { render, screen } from "@testing-library/svelte";
import { describe, expect, it } from "vitest";
import { startApp } from "../testing/harness";
import MessageBubble from "./MessageBubble.svelte";
import type { MessageView } from "../bindings/MessageView";

const reply = (extra: Partial<MessageView> = {}): MessageView => ({
  id: "m1",
  persona_id: "p1",
  role: "persona",
  content: "Sure. I can speak more slowly. Just ask.",
  ts: "2026-11-26T10:00:00Z",
  read: true,
  seq: 7,
  context_status: "default",
  ...extra,
});

describe("MessageBubble", () => {
  it("marks a spoken reply the person cut off and sets apart what was never said aloud", async () => {
    const { context } = await startApp();
    render(MessageBubble, { context, props: { message: reply({ spoken_chars: 5 }), personaName: "Ada" } });
    expect(screen.getByTestId("message-content")).toHaveTextContent("Sure. I can speak more slowly. Just ask.");
    expect(screen.getByTestId("message-unheard")).toHaveTextContent("I can speak more slowly. Just ask.");
    expect(screen.getByTestId("message-interrupted")).toHaveTextContent("Interrupted while speaking");
  });

  it("leaves a reply heard to the end (or typed) as it is", async () => {
    const { context } = await startApp();
    render(MessageBubble, { context, props: { message: reply(), personaName: "Ada" } });
    expect(screen.queryByTestId("message-unheard")).not.toBeInTheDocument();
    expect(screen.queryByTestId("message-interrupted")).not.toBeInTheDocument();
  });

  it("shows the day of a message from before today, and only the hour of one from today", async () => {
    const { context } = await startApp();
    const { unmount } = render(MessageBubble, { context, props: { message: reply({ ts: "2026-03-01T15:04:00Z" }), personaName: "Ada" } });
    expect(document.querySelector("time.time")?.textContent).toMatch(/2026|26/);
    unmount();
    render(MessageBubble, { context, props: { message: reply({ ts: new Date().toISOString() }), personaName: "Ada" } });
    expect(document.querySelector("time.time")?.textContent).not.toMatch(/\//);
  });
});
