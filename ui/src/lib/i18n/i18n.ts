//! A tiny dictionary lookup. `t` reads the reactive language preference, so
//! any template that calls it re-renders when the language changes.

import { prefs, type Lang } from "../prefs/prefs.svelte";
import { en, type MessageKey } from "./en";
import { dictionaries, loadDictionary } from "./dictionaries.svelte";

export type { MessageKey };
export { loadDictionary };

export type Params = Record<string, string | number>;

function fill(template: string, params?: Params): string {
  if (!params) return template;
  return template.replace(/\{(\w+)\}/g, (whole, name: string) =>
    name in params ? formatValue(params[name]) : whole,
  );
}

function formatValue(value: string | number): string {
  return typeof value === "number" ? new Intl.NumberFormat(prefs.lang).format(value) : value;
}

/** The text for `key` in the current language, with `{name}` placeholders filled. */
export function t(key: MessageKey, params?: Params): string {
  const dict = dictionaries.get(prefs.lang) ?? en;
  return fill(dict[key] ?? en[key] ?? key, params);
}

type PluralBase = {
  [K in MessageKey]: K extends `${infer B}.one` ? (`${B}.other` extends MessageKey ? B : never) : never;
}[MessageKey];

/** Like `t`, choosing `<key>.one` or `<key>.other` for `n` (also passed as `{n}`). */
export function tn(key: PluralBase, n: number, params?: Params): string {
  const rule = new Intl.PluralRules(prefs.lang).select(n);
  const full = (rule === "one" ? `${key}.one` : `${key}.other`) as MessageKey;
  return t(full, { n, ...params });
}

/** The current language, for Intl formatting. */
export function locale(): Lang {
  return prefs.lang;
}

/** A message's time: the hour alone today, with the day before today
 * (a chat that runs for months would otherwise show only hours). */
export function formatMessageTime(iso: string, now: Date = new Date()): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  const today = date.toDateString() === now.toDateString();
  return new Intl.DateTimeFormat(prefs.lang, today
    ? { hour: "2-digit", minute: "2-digit" }
    : { dateStyle: "short", timeStyle: "short" }).format(date);
}

export function formatTime(iso: string, withDate = false): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return new Intl.DateTimeFormat(prefs.lang, withDate
    ? { dateStyle: "short", timeStyle: "medium" }
    : { hour: "2-digit", minute: "2-digit" }).format(date);
}
