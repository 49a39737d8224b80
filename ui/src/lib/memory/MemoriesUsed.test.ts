import { render, screen, waitFor, within } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { startApp } from "../testing/harness";
import MemoriesUsed from "./MemoriesUsed.svelte";
import QueuePanel from "./QueuePanel.svelte";

describe("MemoriesUsed", () => {
  it("shows what a reply used and confirms or forgets it in place", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    const cat = backend.addMemory({ text: "Has a cat named Miso" });
    const dog = backend.addMemory({ kind: "person", text: "Rui (friend)" });
    backend.setMemoriesUsed("reply-1", [cat.id, dog.id]);
    render(MemoriesUsed, { context, props: { messageId: "reply-1" } });

    await user.click(screen.getByTestId("memories-used-toggle"));
    await waitFor(() => expect(screen.getAllByTestId("memory-item")).toHaveLength(2));
    expect(screen.getByTestId("memories-used-toggle")).toHaveTextContent("(2)");
    const first = () => screen.getAllByTestId("memory-item").find((el) => el.dataset.id === cat.id)!;
    await user.click(within(first()).getByTestId("memory-confirm"));
    await waitFor(() => expect(first().dataset.validation).toBe("human"));
    const second = screen.getAllByTestId("memory-item").find((el) => el.dataset.id === dog.id)!;
    await user.click(within(second).getByTestId("memory-forget"));
    await waitFor(() => expect(screen.getAllByTestId("memory-item")).toHaveLength(1));
  });

  it("says so when a reply was given nothing", async () => {
    const user = userEvent.setup();
    const { context } = await startApp();
    render(MemoriesUsed, { context, props: { messageId: "none" } });
    await user.click(screen.getByTestId("memories-used-toggle"));
    expect(await screen.findByText("This reply was given no memories.")).toBeInTheDocument();
  });
});

describe("QueuePanel", () => {
  it("pauses and resumes the queue", async () => {
    const user = userEvent.setup();
    const { app, context } = await startApp();
    await app.memory.refreshQueue();
    render(QueuePanel, { context });
    await user.click(screen.getByTestId("queue-pause"));
    await waitFor(() => expect(screen.getByTestId("queue-status")).toHaveTextContent("paused"));
    await user.click(screen.getByTestId("queue-resume"));
    await waitFor(() => expect(screen.getByTestId("queue-status")).toHaveTextContent("idle"));
  });
});
