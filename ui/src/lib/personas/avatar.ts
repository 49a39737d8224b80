/** A stable avatar colour class for a name: one of `.avatar.hue-0` … `.hue-7`. */
export function hueClass(name: string): string {
  let h = 0;
  for (const ch of name) h = (h * 31 + ch.codePointAt(0)!) >>> 0;
  return `hue-${h % 8}`;
}

/** The first letter of a name, upper-cased, for the avatar. */
export function initial(name: string): string {
  const first = [...name.trim()][0];
  return first ? first.toLocaleUpperCase() : "?";
}
