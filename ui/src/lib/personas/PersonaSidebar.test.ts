import { render, screen, waitFor } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { startApp } from "../testing/harness";
import PersonaSidebar from "./PersonaSidebar.svelte";

const names = () => screen.getAllByTestId("persona-item").map((el) => el.dataset.name);

describe("PersonaSidebar", () => {
  it("lists Ei as built-in", async () => {
    const { context } = await startApp();
    render(PersonaSidebar, { context });
    const ei = screen.getByTestId("persona-item");
    expect(ei.dataset.name).toBe("Ei");
    expect(ei).toHaveTextContent("built-in");
  });

  it("creating a persona adds it to the list and opens it", async () => {
    const user = userEvent.setup();
    const { app, context } = await startApp();
    render(PersonaSidebar, { context });

    await user.click(screen.getByTestId("new-persona-button"));
    const name = screen.getByTestId("persona-name-input");
    expect(name).toHaveFocus();
    await user.type(name, "Ada");
    await user.type(screen.getByTestId("persona-description-input"), "A patient mathematics tutor{Enter}");

    await waitFor(() => expect(names()).toEqual(["Ei", "Ada"]));
    expect(screen.queryByTestId("persona-name-input")).not.toBeInTheDocument();
    expect(app.selected?.name).toBe("Ada");
    expect(app.selected?.short_description).toBe("A patient mathematics tutor");
  });

  it("shows an inline error for a name that exists, and Escape cancels", async () => {
    const user = userEvent.setup();
    const { context } = await startApp();
    render(PersonaSidebar, { context });

    await user.click(screen.getByTestId("new-persona-button"));
    await user.type(screen.getByTestId("persona-name-input"), "ei");
    await user.click(screen.getByTestId("persona-create-submit"));
    expect(await screen.findByRole("alert")).toHaveTextContent("A persona named “ei” already exists.");
    expect(screen.getByTestId("persona-name-input")).toHaveAttribute("aria-invalid", "true");

    await user.keyboard("{Escape}");
    expect(screen.queryByTestId("persona-name-input")).not.toBeInTheDocument();
    expect(names()).toEqual(["Ei"]);
  });

  it("shows unread counts", async () => {
    const { app, backend, context } = await startApp();
    render(PersonaSidebar, { context });
    const ei = app.personas[0];
    backend.emit({ type: "persona_changed", persona: { ...ei, id: "other", name: "Bo", is_system: false, unread: 3, created_seq: 99 } });
    const badge = await screen.findByTestId("unread-badge");
    expect(badge).toHaveTextContent("3");
    expect(badge).toHaveTextContent("3 unread messages");
  });
});
