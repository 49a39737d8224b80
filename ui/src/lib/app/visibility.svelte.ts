//! Whether the window is on screen. Closed to the tray, the web view reports
//! the page hidden; clocks that only redraw a countdown stop until it shows
//! again, so an app idling in the tray wakes nothing up.

class PageVisibility {
  visible = $state(typeof document === "undefined" || document.visibilityState !== "hidden");

  constructor() {
    if (typeof document === "undefined") return;
    document.addEventListener("visibilitychange", () => {
      this.visible = document.visibilityState !== "hidden";
    });
  }
}

export const page = new PageVisibility();
