import { render, screen, waitFor } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it } from "vitest";
import App from "./App.svelte";
import { MockBackend } from "./lib/backend/mock";
import { prefs, setLang, setTheme } from "./lib/prefs/prefs.svelte";

afterEach(() => {
  setLang("en");
  setTheme("system");
  localStorage.clear();
});

async function renderApp() {
  const backend = new MockBackend({ firstTokenDelayMs: 10, tokenDelayMs: 2 });
  render(App, { props: { backend } });
  await screen.findByTestId("persona-item");
  return backend;
}

describe("App", () => {
  it("switching the language changes the labels, and persists only that preference", async () => {
    const user = userEvent.setup();
    await renderApp();
    expect(screen.getByTestId("nav-settings")).toHaveTextContent("Settings");
    await user.click(screen.getByTestId("nav-settings"));
    await user.selectOptions(await screen.findByTestId("language-select"), "pt-BR");

    // Portuguese is loaded on first use.
    await waitFor(() => expect(screen.getByTestId("nav-chat")).toHaveTextContent("Conversa"));
    expect(screen.getByTestId("nav-settings")).toHaveTextContent("Configurações");
    expect(screen.getByTestId("new-persona-button")).toHaveTextContent("Nova persona");
    expect(screen.getByLabelText("Idioma")).toBeInTheDocument();
    expect(document.documentElement.lang).toBe("pt-BR");
    expect(prefs.lang).toBe("pt-BR");
    expect(Object.keys(localStorage)).toEqual(["ledgermind.lang"]);
  });

  it("the theme selector sets data-theme on <html>", async () => {
    const user = userEvent.setup();
    await renderApp();
    await user.click(screen.getByTestId("nav-settings"));
    await user.selectOptions(await screen.findByTestId("theme-select"), "dark");
    expect(document.documentElement.dataset.theme).toBe("dark");
    await user.selectOptions(screen.getByTestId("theme-select"), "system");
    expect(document.documentElement.dataset.theme).toBeUndefined();
  });

  it("Alt+1..3 and arrow keys switch sections", async () => {
    const user = userEvent.setup();
    await renderApp();
    await user.keyboard("{Alt>}2{/Alt}");
    expect(screen.getByTestId("nav-ledger")).toHaveAttribute("aria-selected", "true");
    expect(await screen.findByTestId("verify-button")).toBeInTheDocument();
    await user.keyboard("{Alt>}3{/Alt}");
    expect(screen.getByTestId("nav-settings")).toHaveAttribute("aria-selected", "true");
    expect(screen.getByTestId("nav-settings")).toHaveFocus();
    await user.keyboard("{ArrowLeft}");
    expect(screen.getByTestId("nav-ledger")).toHaveAttribute("aria-selected", "true");
    await user.keyboard("{Alt>}1{/Alt}");
    expect(await screen.findByTestId("composer-input")).toBeInTheDocument();
  });

  it("marks a persona read when its chat is opened", async () => {
    const user = userEvent.setup();
    const backend = await renderApp();
    const bo = await backend.createPersona("Bo", "");
    await user.click(screen.getByTestId("nav-ledger"));
    // A reply arrives while Bo isn't open: unread.
    backend.emit({ type: "persona_changed", persona: { ...bo, unread: 2 } });
    await screen.findByTestId("unread-badge");
    await user.click(screen.getAllByTestId("persona-item").find((el) => el.dataset.name === "Bo")!);
    await waitFor(() => expect(screen.queryByTestId("unread-badge")).not.toBeInTheDocument());
    expect(screen.getByTestId("nav-chat")).toHaveAttribute("aria-selected", "true");
  });
});
