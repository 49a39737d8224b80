import { render, screen, waitFor } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { describe, expect, it } from "vitest";
import { startApp } from "../testing/harness";
import CeremonyPanel from "./CeremonyPanel.svelte";

describe("CeremonyPanel", () => {
  it("shows the ceremony time and saves a new one", async () => {
    const user = userEvent.setup();
    const { app, context } = await startApp({ autoReply: false });
    render(CeremonyPanel, { context });
    const input = screen.getByTestId("ceremony-time") as HTMLInputElement;
    await waitFor(() => expect(input.value).toBe("03:00"));
    expect(screen.getByTestId("ceremony-panel")).toHaveTextContent("It has not run yet.");
    await user.clear(input);
    await user.type(input, "22:15");
    await user.click(screen.getByTestId("ceremony-save"));
    await waitFor(async () => expect((await app.backend.ceremonySettings()).time).toBe("22:15"));
  });
});
