import type { VerifyView } from "../bindings/VerifyView";
import { locale, t, tn } from "../i18n/i18n";

function formatMillis(ms: number): string {
  const digits = ms < 10 ? 1 : 0;
  return new Intl.NumberFormat(locale(), { minimumFractionDigits: digits, maximumFractionDigits: digits }).format(ms);
}

/** "✓ N events — hash chain and signatures hold (X ms)" or "✗ Event #SEQ failed: reason". */
export function verifyText(result: VerifyView): string {
  if (result.ok) return tn("ledger.verifyOk", result.events, { ms: formatMillis(result.millis) });
  const reason = result.reason ?? t("ledger.unknownReason");
  if (result.first_bad_seq === null) return t("ledger.verifyBadNoSeq", { reason });
  return t("ledger.verifyBad", { seq: String(result.first_bad_seq), reason });
}

/** One line per commit that replaced keys: "Keys replaced on DATE (event #SEQ): names". */
export function epochTexts(result: VerifyView): string[] {
  const groups = new Map<string, typeof result.key_epochs>();
  for (const epoch of result.key_epochs ?? []) {
    const group = groups.get(epoch.ts) ?? [];
    group.push(epoch);
    groups.set(epoch.ts, group);
  }
  return [...groups.entries()].map(([ts, group]) => {
    const when = new Intl.DateTimeFormat(locale(), { dateStyle: "medium", timeStyle: "short" }).format(new Date(ts));
    const who = group
      .map((e) => `${e.name} (${e.self_certified ? t("ledger.epochSelf") : t("ledger.epochEndorsed")})`)
      .join(", ");
    return t("ledger.epoch", { when, seq: String(group[0].seq), who });
  });
}
