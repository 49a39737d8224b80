import { render, screen, waitFor } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import ChatView from "../chat/ChatView.svelte";
import { startApp } from "../testing/harness";
import KeysBanner from "./KeysBanner.svelte";

describe("KeysBanner", () => {
  it("is absent while this keychain holds every key", async () => {
    const { context } = await startApp({ autoReply: false });
    render(KeysBanner, { context });
    await waitFor(() => expect(screen.queryByTestId("keys-banner")).toBeNull());
  });

  it("a send refused for a lost key keeps the text, shows the banner, and works again after a new epoch", async () => {
    const user = userEvent.setup();
    const { app, backend, context } = await startApp({ autoReply: false });
    backend.lostKeys.add("human");
    backend.lostKeys.add(app.selectedId!);
    render(KeysBanner, { context });
    render(ChatView, { context });

    await user.type(screen.getByTestId("composer-input"), "Are you still there?");
    await user.keyboard("{Enter}");
    const banner = await screen.findByTestId("keys-banner");
    expect(banner.dataset.problem).toBe("missing");
    expect(banner.textContent).toContain("You (device key)");
    expect(screen.getByTestId("composer-input")).toHaveValue("Are you still there?");

    await user.click(screen.getByTestId("keys-rotate"));
    await waitFor(() => expect(screen.queryByTestId("keys-banner")).toBeNull());
    expect(app.keys.lastRotation.map((r) => r.entity)[0]).toBe("human");

    await user.click(screen.getByTestId("send-button"));
    await waitFor(() => expect(screen.getByTestId("composer-input")).toHaveValue(""));
    expect((await backend.listMessages(app.selectedId!)).map((m) => m.content)).toContain("Are you still there?");
    const verify = await backend.verifyLedger();
    expect(verify.ok).toBe(true);
    expect(verify.key_epochs.map((e) => e.self_certified)).toEqual([true, false]);
  });
});
