//! The two UI preferences kept in browser storage: theme and language.
//! Nothing else goes there (keys, messages and settings live in the core).

export type Theme = "system" | "light" | "dark";
export type Lang = "en" | "pt-BR";

export const THEMES: readonly Theme[] = ["system", "light", "dark"];
export const LANGUAGES: readonly { code: Lang; label: string }[] = [
  { code: "en", label: "English" },
  { code: "pt-BR", label: "Português (Brasil)" },
];

const THEME_KEY = "ledgermind.theme";
const LANG_KEY = "ledgermind.lang";

function storage(): Storage | null {
  try {
    return typeof localStorage === "undefined" ? null : localStorage;
  } catch {
    // Storage can be disabled; preferences then last for the session only.
    return null;
  }
}

function initialTheme(): Theme {
  const saved = storage()?.getItem(THEME_KEY);
  return saved === "light" || saved === "dark" || saved === "system" ? saved : "system";
}

function initialLang(): Lang {
  const saved = storage()?.getItem(LANG_KEY);
  if (saved === "en" || saved === "pt-BR") return saved;
  const nav = typeof navigator === "undefined" ? "en" : navigator.language;
  return nav.toLowerCase().startsWith("pt") ? "pt-BR" : "en";
}

export const prefs = $state<{ theme: Theme; lang: Lang }>({
  theme: initialTheme(),
  lang: initialLang(),
});

export function setTheme(theme: Theme): void {
  prefs.theme = theme;
  storage()?.setItem(THEME_KEY, theme);
  applyTheme();
}

export function setLang(lang: Lang): void {
  prefs.lang = lang;
  storage()?.setItem(LANG_KEY, lang);
  applyLang();
}

/** Puts the theme on <html>; `system` leaves it to `prefers-color-scheme`. */
export function applyTheme(): void {
  if (typeof document === "undefined") return;
  const root = document.documentElement;
  if (prefs.theme === "system") delete root.dataset.theme;
  else root.dataset.theme = prefs.theme;
}

export function applyLang(): void {
  if (typeof document === "undefined") return;
  document.documentElement.lang = prefs.lang;
}
