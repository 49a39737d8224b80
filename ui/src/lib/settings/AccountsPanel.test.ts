import { render, screen, waitFor } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import { startApp } from "../testing/harness";
import AccountsPanel from "./AccountsPanel.svelte";

describe("AccountsPanel", () => {
  it("the account form clears the key after submit and lists the account", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    const add = vi.spyOn(backend, "addAccount");
    const { container } = render(AccountsPanel, { context });

    await user.type(screen.getByTestId("account-name"), "local-ollama");
    await user.type(screen.getByTestId("account-base-url"), "http://127.0.0.1:9/v1");
    await user.type(screen.getByTestId("account-key"), "sk-test-secret");
    await user.type(screen.getByTestId("account-model"), "llama3");
    expect(screen.getByTestId("account-key")).toHaveAttribute("type", "password");
    await user.click(screen.getByTestId("account-submit"));

    const item = await screen.findByTestId("account-item");
    expect(item.dataset.name).toBe("local-ollama");
    expect(item).toHaveTextContent("key in keychain");
    expect(item).toHaveTextContent("http://127.0.0.1:9/v1");
    expect(add).toHaveBeenCalledWith({
      name: "local-ollama",
      base_url: "http://127.0.0.1:9/v1",
      api_key: "sk-test-secret",
      default_model: "llama3",
    });
    expect(screen.getByTestId("account-key")).toHaveValue("");
    expect(screen.getByTestId("account-name")).toHaveValue("");
    expect(container.innerHTML).not.toContain("sk-test-secret");
  });

  it("clears the key even when the core refuses the account", async () => {
    const user = userEvent.setup();
    const { context } = await startApp();
    render(AccountsPanel, { context });
    await user.type(screen.getByTestId("account-name"), "bad name!");
    await user.type(screen.getByTestId("account-base-url"), "http://x/v1");
    await user.type(screen.getByTestId("account-key"), "sk-oops");
    await user.click(screen.getByTestId("account-submit"));
    expect(await screen.findByRole("alert")).toHaveTextContent("An account name uses letters");
    expect(screen.getByTestId("account-key")).toHaveValue("");
    expect(screen.getByTestId("account-name")).toHaveValue("bad name!");
  });

  it("removes an account after confirmation", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    await backend.addAccount({ name: "gone", base_url: "http://localhost/v1", api_key: "", default_model: "" });
    render(AccountsPanel, { context });
    await screen.findByTestId("account-item");
    await user.click(screen.getByRole("button", { name: "Remove account gone" }));
    expect(screen.getByRole("button", { name: "Yes, remove" })).toHaveFocus();
    await user.keyboard("{Enter}");
    await waitFor(() => expect(screen.queryByTestId("account-item")).not.toBeInTheDocument());
    expect(await backend.listAccounts()).toEqual([]);
  });
});
