import { render, screen, waitFor } from "@testing-library/svelte";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import { startApp } from "../testing/harness";
import DesktopPanel from "./DesktopPanel.svelte";

describe("desktop settings: start at login", () => {
  it("shows the state on disk and applies a change at once, without Save", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    const set = vi.spyOn(backend, "setStartAtLogin");
    render(DesktopPanel, { context });
    const box = (await screen.findByTestId("start-at-login")) as HTMLInputElement;
    expect(box.checked).toBe(false);
    await user.click(box);
    await waitFor(() => expect(box.checked).toBe(true));
    expect(set).toHaveBeenCalledWith(true);
    expect(await backend.startAtLogin()).toBe(true);
    await user.click(box);
    await waitFor(() => expect(box.checked).toBe(false));
    expect(await backend.startAtLogin()).toBe(false);
  });

  it("a failure to write the entry is shown and the box keeps the real state", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    vi.spyOn(backend, "setStartAtLogin").mockRejectedValue({ code: "IO", message: "the autostart folder is read-only" });
    render(DesktopPanel, { context });
    const box = (await screen.findByTestId("start-at-login")) as HTMLInputElement;
    await user.click(box);
    expect(await screen.findByRole("alert")).toHaveTextContent("read-only");
    await waitFor(() => expect(box.checked).toBe(false));
  });
});
