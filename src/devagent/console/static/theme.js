// The console's colour theme, set as data-theme on <html> (console.css has a palette for each):
// the system's (prefers-color-scheme, followed as it changes), unless the person chose the other
// one with the header's toggle, which this browser then remembers (localStorage). A choice is kept
// only while it differs from the system's: toggling back to the system's theme forgets it, and the
// page follows the system again. Loaded (not as a module) before the page is drawn, so the theme
// shows from the first paint.
(() => {
  const KEY = "devagent.console.theme";
  const root = document.documentElement;
  const system = window.matchMedia("(prefers-color-scheme: dark)");
  let unsaved = null; // a choice made where storage is off: shown, not remembered

  function chosen() {
    if (unsaved) return unsaved;
    try {
      const t = localStorage.getItem(KEY);
      return t === "dark" || t === "light" ? t : null;
    } catch {
      return null;
    }
  }

  const systemTheme = () => (system.matches ? "dark" : "light");
  const current = () => chosen() || systemTheme();

  function apply() {
    const theme = current();
    root.dataset.theme = theme;
    const toggle = document.getElementById("theme");
    if (toggle) toggle.setAttribute("aria-pressed", String(theme === "dark"));
  }

  function flip() {
    const next = current() === "dark" ? "light" : "dark";
    const keep = next === systemTheme() ? null : next;
    unsaved = null;
    try {
      if (keep) localStorage.setItem(KEY, keep);
      else localStorage.removeItem(KEY);
    } catch {
      unsaved = keep;
    }
    apply();
  }

  apply();
  system.addEventListener("change", apply);
  document.addEventListener("DOMContentLoaded", () => {
    const toggle = document.getElementById("theme");
    toggle.addEventListener("click", flip);
    toggle.hidden = false;
    apply();
  });
})();
