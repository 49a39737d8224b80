import { render, screen, waitFor, within } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { startApp } from "../testing/harness";
import ModelsPanel from "./ModelsPanel.svelte";

const row = (id: string) => screen.getAllByTestId("model-choice").find((el) => el.dataset.model === id) as HTMLElement;

describe("the model picker", () => {
  it("recommends one model for the memory spared and downloads it with progress, then replies use it", async () => {
    const user = userEvent.setup();
    const { app, backend, context } = await startApp();
    render(ModelsPanel, { context });
    // Whatever is free: the largest that fits.
    await waitFor(() => expect(screen.getByTestId("models-recommendation")).toHaveTextContent("Qwen2.5-Coder 1.5B"));
    await user.selectOptions(screen.getByTestId("models-spare"), "1");
    await waitFor(() => expect(screen.getByTestId("models-recommendation")).toHaveTextContent("Qwen2.5-Coder 0.5B"));
    expect(within(row("qwen2.5-coder-0.5b")).getByText("Recommended")).toBeInTheDocument();
    expect(within(row("qwen2.5-coder-1.5b")).getByText("In use")).toBeInTheDocument();

    await user.click(within(row("qwen2.5-coder-0.5b")).getByTestId("model-download"));
    expect(await within(row("qwen2.5-coder-0.5b")).findByTestId("model-progress")).toBeInTheDocument();
    const use = await within(row("qwen2.5-coder-0.5b")).findByTestId("model-use", {}, { timeout: 3000 });
    expect(app.modelPulls["qwen2.5-coder-0.5b"].state).toBe("installed");
    // Measured on this computer once downloaded, and shown with it.
    await waitFor(() => expect(within(row("qwen2.5-coder-0.5b")).getByTestId("model-speed")).toHaveTextContent("here: reads 48 tokens/s, writes 9.0 tokens/s"));
    await user.click(use);
    await waitFor(() => expect(within(row("qwen2.5-coder-0.5b")).getByText("In use")).toBeInTheDocument());
    const ei = (await backend.listPersonas()).find((p) => p.name === "Ei");
    expect(ei?.model).toBe("local:qwen2.5-coder-0.5b");
  });

  it("a model Ollama already has is used from Ollama's copy, with no download", async () => {
    const user = userEvent.setup();
    const { app, context } = await startApp();
    render(ModelsPanel, { context });
    await waitFor(() => expect(row("ollama:mistral:7b")).toBeTruthy());
    const ollama = row("ollama:mistral:7b");
    expect(ollama).toHaveTextContent("in Ollama on this computer");
    expect(within(ollama).queryByTestId("model-download")).toBeNull();
    await user.click(within(ollama).getByTestId("model-use-ollama"));
    await within(row("ollama:mistral:7b")).findByTestId("model-use");
    expect(within(row("ollama:mistral:7b")).queryByTestId("model-progress")).toBeNull();
    expect(app.modelPulls["ollama:mistral:7b"].state).toBe("installed");
    expect(app.notices.items.map((n) => n.text)).toContain("ollama:mistral:7b is ready, read where Ollama keeps it.");
  });

  it("a download can be cancelled, and the model in use cannot be removed", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    backend.pullSteps = 1000;
    render(ModelsPanel, { context });
    await waitFor(() => expect(screen.getAllByTestId("model-choice").length).toBeGreaterThan(1));
    await user.click(within(row("llama3.2-1b")).getByTestId("model-download"));
    await user.click(await within(row("llama3.2-1b")).findByTestId("model-cancel"));
    await waitFor(() => expect(within(row("llama3.2-1b")).getByTestId("model-download")).toBeInTheDocument());
    expect(within(row("qwen2.5-coder-1.5b")).queryByTestId("model-remove")).toBeNull();
  });

  it("an installed model without a measurement can be measured from the keyboard", async () => {
    const user = userEvent.setup();
    const { context } = await startApp();
    render(ModelsPanel, { context });
    const measure = await within(await waitFor(() => row("qwen2.5-coder-1.5b"))).findByTestId("model-measure");
    measure.focus();
    await user.keyboard("{Enter}");
    await waitFor(() => expect(within(row("qwen2.5-coder-1.5b")).getByTestId("model-speed")).toHaveTextContent("writes 10 tokens/s"));
    expect(within(row("qwen2.5-coder-1.5b")).queryByTestId("model-measure")).toBeNull();
    expect(screen.getByTestId("models-recommendation")).toHaveTextContent("writes 10 tokens/s");
  });
});

describe("model servers on this computer", () => {
  it("a found server becomes an account in one click, and then says so", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    backend.servers = [{ kind: "ollama", url: "http://127.0.0.1:11434/v1", models: ["llama3.2:1b", "qwen2.5:0.5b"], needs_key: false, account: null }];
    render(ModelsPanel, { context });
    await user.click(screen.getByTestId("servers-look"));
    const server = await screen.findByTestId("server");
    await user.selectOptions(within(server).getByTestId("server-model"), "qwen2.5:0.5b");
    await user.click(within(server).getByTestId("server-add"));
    await waitFor(() => expect(screen.getByTestId("server")).toHaveTextContent("Already the account ollama"));
    const accounts = await backend.listAccounts();
    expect(accounts.find((a) => a.name === "ollama")?.default_model).toBe("qwen2.5:0.5b");
    expect((await backend.listModels()).some((m) => m.spec === "ollama:qwen2.5:0.5b")).toBe(true);
  });
});
