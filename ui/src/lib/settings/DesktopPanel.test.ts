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

describe("desktop settings: the language spoken to the persona", () => {
  it("starts at English, saves the language chosen and says what telling them apart costs", async () => {
    const user = userEvent.setup();
    const { backend, context } = await startApp();
    const set = vi.spyOn(backend, "setDesktopSettings");
    render(DesktopPanel, { context });
    const select = (await screen.findByTestId("voice-language")) as HTMLSelectElement;
    expect(select.value).toBe("en");
    expect(screen.queryByTestId("voice-language-auto-hint")).toBeNull();
    await user.selectOptions(select, "auto");
    expect(await screen.findByTestId("voice-language-auto-hint")).toBeInTheDocument();
    await user.selectOptions(select, "pt");
    await user.click(screen.getByTestId("desktop-save"));
    await waitFor(() => expect(set).toHaveBeenCalled());
    expect(set.mock.calls[0][0].voice.language).toBe("pt");
    expect((await backend.desktopSettings()).settings.voice.language).toBe("pt");
  });
});
