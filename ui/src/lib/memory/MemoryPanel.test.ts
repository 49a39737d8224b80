import { render, screen, waitFor, within } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { startApp } from "../testing/harness";
import MemoryPanel from "./MemoryPanel.svelte";
import { parseGroups, quoteParts } from "./memory-state.svelte";

describe("MemoryPanel", () => {
  it("lists memories by kind, highlights a quote in its message, confirms, edits and forgets", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    const fact = backend.addMemory({ text: "Lives in Lisbon", subject: "home" });
    backend.addMemory({
      kind: "quote",
      text: "adoro café",
      quote: { message_id: "m1", start: 8, end: 18, message_text: "Olá! Eu adoro café forte." },
    });
    const forgettable = backend.addMemory({ kind: "topic", text: "coffee" });
    render(MemoryPanel, { context });

    await waitFor(() => expect(screen.getAllByTestId("memory-item")).toHaveLength(3));
    expect(screen.getByTestId("memory-list-fact")).toHaveTextContent("home: Lives in Lisbon");
    const mark = screen.getByTestId("memory-quote").querySelector("mark");
    expect(mark?.textContent).toBe("adoro café");

    const factItem = () => screen.getAllByTestId("memory-item").find((el) => el.dataset.id === fact.id)!;
    await user.click(within(factItem()).getByTestId("memory-confirm"));
    await waitFor(() => expect(factItem().dataset.validation).toBe("human"));
    expect(within(factItem()).getByTestId("memory-confirm")).toBeDisabled();

    await user.click(within(factItem()).getByTestId("memory-edit"));
    const input = within(factItem()).getByTestId("memory-edit-input");
    await user.clear(input);
    await user.type(input, "Lives in Porto{Enter}");
    await waitFor(() => expect(within(factItem()).getByTestId("memory-text")).toHaveTextContent("Lives in Porto"));

    const topic = screen.getAllByTestId("memory-item").find((el) => el.dataset.id === forgettable.id)!;
    await user.click(within(topic).getByTestId("memory-forget"));
    await waitFor(() => expect(screen.getAllByTestId("memory-item")).toHaveLength(2));
  });

  it("filters by what a persona may see and edits its groups", async () => {
    const user = userEvent.setup();
    const { backend, app, context } = await startApp();
    const ada = await backend.createPersona("Ada", "");
    backend.addMemory({ text: "Works at Acme", group: "Work" });
    backend.addMemory({ text: "Has a cat", group: "General" });
    render(MemoryPanel, { context });
    await waitFor(() => expect(screen.getAllByTestId("memory-item")).toHaveLength(2));
    await app.memory.setPersona(ada.id);
    await waitFor(() => expect(screen.getAllByTestId("memory-item")).toHaveLength(1));
    const visible = screen.getByTestId("groups-visible");
    await user.type(visible, "Work");
    await user.click(screen.getByTestId("groups-save"));
    await waitFor(() => expect(screen.getAllByTestId("memory-item")).toHaveLength(2));
  });

  it("splits group lists and quote spans by characters", () => {
    expect(parseGroups(" Work, ,Family ")).toEqual(["Work", "Family"]);
    expect(quoteParts("é😀ab", 1, 3)).toEqual(["é", "😀a", "b"]);
  });
});
