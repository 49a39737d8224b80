//! The loaded dictionaries. English is part of the first screen's bundle;
//! Portuguese is loaded before the first render when it is the preference,
//! or when the person switches to it (main.ts, PreferencesPanel).

import type { Lang } from "../prefs/prefs.svelte";
import { en, type MessageKey } from "./en";

type Dictionary = Record<MessageKey, string>;

const loaded = new Map<Lang, Dictionary>([["en", en]]);
// Bumped when a dictionary arrives, so that `t` calls re-render.
const version = $state({ n: 0 });

export const dictionaries = {
  get(lang: Lang): Dictionary | undefined {
    void version.n;
    return loaded.get(lang);
  },
};

/** Loads `lang`'s dictionary once; resolves when `t` can use it. */
export async function loadDictionary(lang: Lang): Promise<void> {
  if (loaded.has(lang)) return;
  if (lang === "pt-BR") loaded.set(lang, (await import("./pt-BR")).ptBR);
  version.n += 1;
}
