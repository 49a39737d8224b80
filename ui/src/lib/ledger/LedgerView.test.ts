import { render, screen, waitFor } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { startApp } from "../testing/harness";
import LedgerView from "./LedgerView.svelte";

describe("LedgerView", () => {
  it("verify shows the result text", async () => {
    const user = userEvent.setup();
    const { context } = await startApp();
    render(LedgerView, { context });
    await user.click(screen.getByTestId("verify-button"));
    await waitFor(() =>
      expect(screen.getByTestId("verify-result").textContent).toMatch(/✓ 1 event — hash chain and signatures hold \([\d.]+ ms\)/),
    );
  });

  it("shows a failed verification with the event and the reason", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    backend.verifyLedger = async () => ({ ok: false, events: 12, first_bad_seq: 7, reason: "signature does not match", millis: 3, key_epochs: [] });
    render(LedgerView, { context });
    await user.click(screen.getByTestId("verify-button"));
    await waitFor(() => expect(screen.getByTestId("verify-result")).toHaveTextContent("✗ Event #7 failed: signature does not match"));
  });

  it("shows each key epoch boundary under the verify result", async () => {
    const user = userEvent.setup();
    const { app, backend, context } = await startApp();
    backend.lostKeys.add("human");
    await app.keys.check();
    await app.keys.rotate();
    render(LedgerView, { context });
    await user.click(screen.getByTestId("verify-button"));
    const line = await screen.findByTestId("key-epoch");
    expect(line.textContent).toMatch(/^Keys replaced on .+ \(event #\d+\): You \(device key\) \(self-certified, the old key was lost\)/);
    expect(screen.getByTestId("verify-result").dataset.ok).toBe("true");
  });

  it("lists events newest first, pages with load more, and expands a payload", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    for (let i = 0; i < 60; i++) await backend.createPersona(`P${i}`, "");
    render(LedgerView, { context });

    await waitFor(() => expect(screen.getAllByTestId("event-row")).toHaveLength(50));
    const seqs = () => screen.getAllByTestId("event-row").map((r) => Number(r.dataset.seq));
    expect(seqs()[0]).toBe(61);
    await user.click(screen.getByTestId("load-more"));
    await waitFor(() => expect(screen.getAllByTestId("event-row")).toHaveLength(61));
    expect(seqs().at(-1)).toBe(1);
    expect(screen.getByText("Beginning of the ledger")).toBeInTheDocument();

    await user.click(screen.getByRole("button", { name: "Show details of event #61" }));
    expect(screen.getByTestId("event-payload")).toHaveTextContent('"name": "P59"');
  });

  it("an expanded event shows its receipt", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    await backend.createPersona("Ada", "");
    const receipt = await backend.getReceipt(2);
    render(LedgerView, { context });

    await user.click(await screen.findByRole("button", { name: "Show details of event #2" }));
    const panel = await screen.findByTestId("receipt");
    await waitFor(() => expect(panel).toHaveAttribute("data-status", "ok"));
    expect(panel).toHaveTextContent("Action hash");
    expect(screen.getByTestId("receipt-action-hash")).toHaveAttribute("data-value", receipt.action_hash);
    expect(screen.getByTestId("receipt-state-before")).toHaveAttribute("data-value", receipt.state_before);
    expect(screen.getByTestId("receipt-state-after")).toHaveAttribute("data-value", receipt.state_after);
    expect(screen.getByTestId("receipt-signer")).toHaveAttribute("data-value", receipt.signer);
    expect(screen.getByTestId("receipt-signature")).toHaveAttribute("data-value", receipt.signature);
    // Long values are shortened on screen, in full in the title, and copyable.
    expect(screen.getByTestId("receipt-signature").querySelector("code")).toHaveTextContent(`${receipt.signature.slice(0, 12)}…`);
    expect(screen.getByRole("button", { name: "Copy Signature" })).toBeInTheDocument();
  });
});
