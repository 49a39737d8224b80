//! Provider accounts. The API key passes through `add` once and is never kept here.

import { errorMessage, type Backend } from "../backend";
import type { AccountView } from "../bindings/AccountView";
import type { NewAccount } from "../bindings/NewAccount";
import type { Notices } from "../app/notices.svelte";
import { t } from "../i18n/i18n";

export class AccountsState {
  list = $state<AccountView[]>([]);
  loading = $state(false);
  loaded = $state(false);
  error = $state<string | null>(null);

  private readonly backend: Backend;
  private readonly notices: Notices;
  private readonly onModelsChanged: () => void;

  constructor(backend: Backend, notices: Notices, onModelsChanged: () => void) {
    this.backend = backend;
    this.notices = notices;
    this.onModelsChanged = onModelsChanged;
  }

  async refresh(): Promise<void> {
    this.loading = true;
    this.error = null;
    try {
      this.list = await this.backend.listAccounts();
      this.loaded = true;
    } catch (error) {
      this.error = errorMessage(error);
    } finally {
      this.loading = false;
    }
  }

  /** Adds an account; rejects with a `BackendError` for the form to show. */
  async add(account: NewAccount): Promise<AccountView> {
    const view = await this.backend.addAccount(account);
    this.list = [...this.list.filter((a) => a.name !== view.name), view];
    this.notices.push("success", t("settings.account.added", { name: view.name }));
    this.onModelsChanged();
    return view;
  }

  async remove(name: string): Promise<boolean> {
    try {
      await this.backend.removeAccount(name);
      this.list = this.list.filter((a) => a.name !== name);
      this.notices.push("success", t("settings.removed", { name }));
      this.onModelsChanged();
      return true;
    } catch (error) {
      this.notices.push("error", errorMessage(error));
      return false;
    }
  }
}
