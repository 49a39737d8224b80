//! How long until (or since) a deadline, in words a person reads at a glance.

import { t } from "../i18n/i18n";

/** `minutes` as "3 d 4 h", "2 h 5 min" or "12 min" (always positive). */
export function formatMinutes(minutes: number): string {
  const m = Math.abs(Math.trunc(minutes));
  const days = Math.floor(m / 1440);
  const hours = Math.floor((m % 1440) / 60);
  const mins = m % 60;
  if (days > 0) return hours > 0 ? t("office.duration.dh", { d: days, h: hours }) : t("office.duration.d", { d: days });
  if (hours > 0) return mins > 0 ? t("office.duration.hm", { h: hours, m: mins }) : t("office.duration.h", { h: hours });
  return t("office.duration.m", { m: mins });
}

/** "in 2 h 5 min", "overdue by 12 min", or "no deadline". */
export function timeLeft(minutesLeft: number | null, done = false): string {
  if (done) return t("office.obligations.done");
  if (minutesLeft === null) return t("office.obligations.noDeadline");
  if (minutesLeft < 0) return t("office.obligations.overdueBy", { time: formatMinutes(minutesLeft) });
  return t("office.obligations.dueIn", { time: formatMinutes(minutesLeft) });
}
