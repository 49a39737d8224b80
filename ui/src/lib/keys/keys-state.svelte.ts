//! Signing keys as the window sees them: whether this keychain holds every
//! private key the ledger needs, and a new key epoch for the lost ones.

import type { Backend } from "../backend";
import { toBackendError } from "../backend";
import type { KeyReplacementView } from "../bindings/KeyReplacementView";
import type { KeyStatusView } from "../bindings/KeyStatusView";
import { tn } from "../i18n/i18n";
import type { Notices } from "../app/notices.svelte";

/** What the banner says: nothing, keys missing (a new epoch fixes it), or a keychain that does not answer. */
export type KeyProblem = "none" | "missing" | "locked";

/** Error codes that mean "look at the keys again". */
export const KEY_ERROR_CODES = new Set(["KEY_MISSING", "KEYCHAIN_UNAVAILABLE"]);

export class KeysState {
  entities = $state<KeyStatusView[]>([]);
  checking = $state(false);
  rotating = $state(false);
  /** Set when the key check itself failed (the message of the error). */
  checkError = $state<string | null>(null);
  lastRotation = $state<KeyReplacementView[]>([]);

  problem = $derived<KeyProblem>(
    this.checkError !== null || this.entities.some((e) => e.private_key === "locked")
      ? "locked"
      : this.entities.some((e) => e.private_key === "missing")
        ? "missing"
        : "none",
  );
  missing = $derived(this.entities.filter((e) => e.private_key === "missing"));

  constructor(
    private readonly backend: Backend,
    private readonly notices: Notices,
  ) {}

  /** Asks the core which private keys this keychain holds (answers within seconds). */
  async check(): Promise<void> {
    this.checking = true;
    try {
      this.entities = await this.backend.keyStatus();
      this.checkError = null;
    } catch (error) {
      this.checkError = toBackendError(error).message;
    } finally {
      this.checking = false;
    }
  }

  /** Starts a new key epoch for every missing key; true when it worked. */
  async rotate(): Promise<boolean> {
    if (this.rotating) return false;
    this.rotating = true;
    try {
      this.lastRotation = await this.backend.rotateMissingKeys();
      this.notices.push("success", tn("keys.rotated", this.lastRotation.length));
      await this.check();
      return true;
    } catch (error) {
      this.notices.push("error", toBackendError(error).message);
      await this.check();
      return false;
    } finally {
      this.rotating = false;
    }
  }
}
