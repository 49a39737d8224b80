/**
 * Keys every modal dialog handles the same way: Escape closes it, and Tab /
 * Shift+Tab cycle through its controls without leaving it.
 */
export function dialogKeydown(event: KeyboardEvent, dialog: HTMLElement | undefined, onclose: () => void): void {
  if (event.key === "Escape") {
    event.preventDefault();
    event.stopPropagation();
    onclose();
    return;
  }
  if (event.key !== "Tab" || !dialog) return;
  const focusable = [...dialog.querySelectorAll<HTMLElement>("input, textarea, button, select, [tabindex='0']")].filter(
    (el) => !el.hasAttribute("disabled"),
  );
  const first = focusable[0];
  const last = focusable.at(-1);
  if (event.shiftKey && document.activeElement === first) {
    event.preventDefault();
    last?.focus();
  } else if (!event.shiftKey && document.activeElement === last) {
    event.preventDefault();
    first?.focus();
  }
}
