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
