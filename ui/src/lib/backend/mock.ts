//! An in-memory backend with the same contract as the desktop core: used by
//! component tests and by `vite dev` in a plain browser. Nothing is stored
//! anywhere: a reload starts over.

import type { ModelChoiceView } from "../bindings/ModelChoiceView";
import type { ModelNeeds } from "../bindings/ModelNeeds";
import type { ServerView } from "../bindings/ServerView";
import type { SpeedView } from "../bindings/SpeedView";
import type { FolderView } from "../bindings/FolderView";
import type { AccountView } from "../bindings/AccountView";
import type { AppEvent } from "../bindings/AppEvent";
import type { CeremonySettingsView } from "../bindings/CeremonySettingsView";
import type { CheckpointView } from "../bindings/CheckpointView";
import type { EventView } from "../bindings/EventView";
import type { ExportView } from "../bindings/ExportView";
import type { ImportView } from "../bindings/ImportView";
import type { ItemView } from "../bindings/ItemView";
import type { MetadataServiceView } from "../bindings/MetadataServiceView";
import type { ToolSettingView } from "../bindings/ToolSettingView";
import type { ProposalView } from "../bindings/ProposalView";
import type { AwaitingInputView } from "../bindings/AwaitingInputView";
import type { ToolResultView } from "../bindings/ToolResultView";
import type { MessageRole } from "../bindings/MessageRole";
import type { MemoryView } from "../bindings/MemoryView";
import type { MessageView } from "../bindings/MessageView";
import type { ModelView } from "../bindings/ModelView";
import type { NewAccount } from "../bindings/NewAccount";
import type { PersonaEdit } from "../bindings/PersonaEdit";
import type { PersonaGroupsView } from "../bindings/PersonaGroupsView";
import type { PersonaProfileView } from "../bindings/PersonaProfileView";
import type { PersonaView } from "../bindings/PersonaView";
import type { QueueView } from "../bindings/QueueView";
import type { UsedItemView } from "../bindings/UsedItemView";
import type { ReceiptView } from "../bindings/ReceiptView";
import type { StatusView } from "../bindings/StatusView";
import type { VerifyView } from "../bindings/VerifyView";
// office
import type { ConstitutionView } from "../bindings/ConstitutionView";
import type { HandoverView } from "../bindings/HandoverView";
import type { ObligationView } from "../bindings/ObligationView";
import type { SessionModeView } from "../bindings/SessionModeView";
import type { SimulationView } from "../bindings/SimulationView";
import type { TokenUsageView } from "../bindings/TokenUsageView";
import type { WhyView } from "../bindings/WhyView";
import type { DesktopSettings } from "../bindings/DesktopSettings";
import type { DesktopView } from "../bindings/DesktopView";
import type { VoiceDeviceView } from "../bindings/VoiceDeviceView";
import type { VoiceEvent } from "../bindings/VoiceEvent";
import type { KeyEpochView } from "../bindings/KeyEpochView";
import type { KeyReplacementView } from "../bindings/KeyReplacementView";
import type { KeyStatusView } from "../bindings/KeyStatusView";
// documents
import type { CitationView } from "../bindings/CitationView";
import type { DocumentHitView } from "../bindings/DocumentHitView";
import type { DocumentItemView } from "../bindings/DocumentItemView";
import type { PassageView } from "../bindings/PassageView";
import { BackendError, type Backend, type DragDropEvent } from "./backend";

export interface MockOptions {
  /** Delay between streamed tokens, in ms. */
  tokenDelayMs?: number;
  /** Delay before the first token, in ms (the typing indicator shows meanwhile). */
  firstTokenDelayMs?: number;
  /** Add a little sample history, for `vite dev`. */
  seed?: boolean;
  /** A fixed reply instead of the canned ones. */
  reply?: (persona: PersonaView, content: string) => string;
  /** Stream a reply after each message (default). Tests that drive the events by hand turn it off. */
  autoReply?: boolean;
  /** How long a checkpoint operation takes, in ms (the UI is held meanwhile). */
  checkpointDelayMs?: number;
  /** Take an auto-save this often while something changed, in ms; 0 turns it off. */
  autoSaveMs?: number;
}

/** The projected state a checkpoint holds (the mock's stand-in for the tables). */
interface Snapshot {
  personas: PersonaView[];
  messages: MessageView[];
  digest: string;
}

const AUTO_SLOTS = 10;
const FIRST_MANUAL = 10;
const LAST_MANUAL = 14;
const DEVICE_KEY = fakeHash("device-public-key");

const LOCAL_MODEL: ModelView = {
  spec: "local:SmolLM2-135M-Instruct.Q4_1",
  label: "SmolLM2 135M Instruct (local)",
  local: true,
  available: true,
};

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A stand-in for SHA-256: FNV-1a, widened to 64 hex characters. Only for display. */
function fakeHash(text: string): string {
  let out = "";
  for (let round = 0; round < 8; round++) {
    let h = 0x811c9dc5 ^ round;
    for (let i = 0; i < text.length; i++) {
      h ^= text.charCodeAt(i);
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    out += h.toString(16).padStart(8, "0");
  }
  return out;
}

function fail(code: string, message: string): never {
  throw new BackendError({ code, message });
}

function checkSlot(slot: number): number {
  if (!Number.isInteger(slot) || slot < 0 || slot > LAST_MANUAL) {
    fail("CHECKPOINT_INVALID_SLOT", `Checkpoint slot ${slot} does not exist: slots are 0-9 (auto-saves) and 10-14 (manual saves).`);
  }
  return slot;
}

function manualSlot(slot: number): number {
  const s = checkSlot(slot);
  if (s < FIRST_MANUAL) fail("CHECKPOINT_SLOT_PROTECTED", `Checkpoint slot ${s} is an auto-save: it cannot be deleted or written by hand (use slots 10-14).`);
  return s;
}

export class MockBackend implements Backend {
  private listeners: ((event: AppEvent) => void)[] = [];
  private personas: PersonaView[] = [];
  private messages: MessageView[] = [];
  private events: EventView[] = [];
  private accounts: AccountView[] = [];
  private models: ModelView[] = [LOCAL_MODEL];
  private queue: (() => Promise<void>)[] = [];
  private busy = false;
  private nextId = 1;
  private checkpoints = new Map<number, { view: CheckpointView; snapshot: Snapshot }>();
  /** The receipt of every event, by seq. */
  private receipts = new Map<number, ReceiptView>();
  /** The state just before each `checkpoint_restored` event, by its seq (what an undo goes back to). */
  private beforeRestore = new Map<number, Snapshot>();
  /** A digest of the projected state; a stand-in for the core's state hash. */
  private digest = fakeHash("empty state");
  private autoSaveTimer: ReturnType<typeof setInterval> | null = null;
  private readonly options: Required<Omit<MockOptions, "reply">> & Pick<MockOptions, "reply">;

  constructor(options: MockOptions = {}) {
    this.options = {
      tokenDelayMs: options.tokenDelayMs ?? 45,
      firstTokenDelayMs: options.firstTokenDelayMs ?? 600,
      seed: options.seed ?? false,
      reply: options.reply,
      autoReply: options.autoReply ?? true,
      checkpointDelayMs: options.checkpointDelayMs ?? (options.seed ? 450 : 0),
      autoSaveMs: options.autoSaveMs ?? (options.seed ? 60_000 : 0),
    };
    const ei = this.addPersona("Ei", "Your guide to Ledgermind. Ei sees everything you share.", true);
    if (this.options.seed) {
      this.addMessage(ei.id, "persona", "Hi! I'm Ei. Everything we say is kept in a signed ledger on this computer. What would you like to talk about?", true);
      this.writeSlot(null, "Auto-save");
    }
    if (this.options.autoSaveMs > 0 && typeof window !== "undefined") {
      this.autoSaveTimer = setInterval(() => void this.autosaveIfChanged(), this.options.autoSaveMs);
    }
  }

  // ---- test helpers -------------------------------------------------------

  /** Sends an event to the subscribers, as the core would. */
  emit(event: AppEvent): void {
    for (const listener of this.listeners) listener(event);
  }

  /** Takes an auto-save now when the ledger moved since the newest one (what the core does on its timer). */
  async autosaveIfChanged(): Promise<CheckpointView | null> {
    const autos = [...this.checkpoints.values()].filter((c) => !c.view.manual);
    const newest = autos.reduce((max, c) => Math.max(max, c.view.seq), 0);
    if (this.events.length === 0 || (autos.length > 0 && newest === this.events.length)) return null;
    return this.checkpointOp("save", null, () => this.writeSlot(null, "Auto-save"), (view) => ({ type: "checkpoint_created", checkpoint: view }));
  }

  /** Stops the auto-save timer. */
  dispose(): void {
    if (this.autoSaveTimer) clearInterval(this.autoSaveTimer);
    this.autoSaveTimer = null;
  }

  /** Resolves when every queued reply has been streamed. */
  async idle(): Promise<void> {
    while (this.busy || this.queue.length > 0) await sleep(5);
  }

  // ---- Backend ------------------------------------------------------------

  async subscribe(onEvent: (event: AppEvent) => void): Promise<void> {
    this.listeners.push(onEvent);
  }

  async status(): Promise<StatusView> {
    return {
      data_dir: "/home/you/.local/share/ledgermind (in-memory preview)",
      keychain_ok: true,
      keychain_message: null,
      local_model: LOCAL_MODEL.label,
      local_model_message: null,
      events: this.events.length,
      queue_busy: this.busy,
      queue_pending: this.queue.length,
    };
  }

  async listPersonas(): Promise<PersonaView[]> {
    return this.personas.map((p) => ({ ...p }));
  }

  async createPersona(name: string, description: string): Promise<PersonaView> {
    const clean = name.trim();
    if (!clean) fail("INVALID_INPUT", "A persona needs a name.");
    if (clean.length > 60) fail("INVALID_INPUT", "A persona name is at most 60 characters.");
    if (this.personas.some((p) => p.name.toLowerCase() === clean.toLowerCase())) {
      fail("PERSONA_EXISTS", `A persona named “${clean}” already exists.`);
    }
    const persona = this.addPersona(clean, description.trim(), false);
    if (description.trim()) this.simulateFill(persona.id, description.trim());
    return { ...persona };
  }

  async setPersonaModel(personaId: string, model: string): Promise<PersonaView> {
    const persona = this.persona(personaId);
    if (!this.models.some((m) => m.spec === model)) fail("MODEL_NOT_FOUND", `No model “${model}”.`);
    persona.model = model;
    this.append("persona_model_set", persona.id, { model });
    this.emit({ type: "persona_changed", persona: { ...persona } });
    return { ...persona };
  }

  async openChat(personaId: string): Promise<void> {
    this.persona(personaId);
  }

  async listMessages(personaId: string): Promise<MessageView[]> {
    this.persona(personaId);
    return this.messages.filter((m) => m.persona_id === personaId).map((m) => ({ ...m }));
  }

  async sendMessage(personaId: string, content: string): Promise<MessageView> {
    const persona = this.persona(personaId);
    if (!content.trim()) fail("INVALID_INPUT", "The message is empty.");
    if (this.lostKeys.has("human")) {
      fail(
        "KEY_MISSING",
        "no signing key for human: its private key is not in this keychain. If the key is lost, start a new key epoch with `ledgermind keys rotate --all-missing`.",
      );
    }
    const message = this.addMessage(personaId, "human", content, true);
    if (!this.options.autoReply) return { ...message };
    const requestId = `req-${this.nextId++}`;
    this.queue.push(() => this.streamReply(requestId, persona, content));
    this.emit({ type: "queue_changed", busy: true, pending: this.queue.length });
    void this.pump();
    return { ...message };
  }

  async markRead(personaId: string): Promise<void> {
    const persona = this.persona(personaId);
    let changed = false;
    for (const m of this.messages) {
      if (m.persona_id === personaId && !m.read) {
        m.read = true;
        changed = true;
      }
    }
    if (changed || persona.unread !== 0) {
      persona.unread = 0;
      this.emit({ type: "persona_changed", persona: { ...persona } });
    }
  }

  /** Test hook: entities whose private key the keychain lost (a new key epoch replaces them). */
  lostKeys = new Set<string>();
  private keyEpochs: KeyEpochView[] = [];
  private keyGeneration = new Map<string, number>();

  private publicKey(entity: string): string {
    return fakeHash(`key|${entity}|${this.keyGeneration.get(entity) ?? 0}`);
  }

  async keyStatus(): Promise<KeyStatusView[]> {
    const entities = [
      { entity: "human", name: "You (device key)" },
      ...this.personas.map((p) => ({ entity: p.id, name: p.name })),
    ];
    return entities.map((e) => ({
      ...e,
      public_key: this.publicKey(e.entity),
      private_key: this.lostKeys.has(e.entity) ? "missing" : "present",
    }));
  }

  async rotateMissingKeys(): Promise<KeyReplacementView[]> {
    const lost = (await this.keyStatus()).filter((k) => k.private_key === "missing");
    lost.sort((a, b) => Number(a.entity !== "human") - Number(b.entity !== "human"));
    return lost.map((k) => {
      const old = this.publicKey(k.entity);
      this.keyGeneration.set(k.entity, (this.keyGeneration.get(k.entity) ?? 0) + 1);
      const fresh = this.publicKey(k.entity);
      const seq = this.append("entity_key_replaced", k.entity, { old_public_key: old, new_public_key: fresh });
      this.lostKeys.delete(k.entity);
      const selfCertified = k.entity === "human";
      this.keyEpochs.push({
        seq,
        ts: new Date().toISOString(),
        entity_id: k.entity,
        name: k.name,
        old_public_key: old,
        new_public_key: fresh,
        reason: "the private key was missing from the keychain",
        self_certified: selfCertified,
      });
      return { entity: k.entity, name: k.name, old_public_key: old, new_public_key: fresh, seq, self_certified: selfCertified };
    });
  }

  async verifyLedger(): Promise<VerifyView> {
    const started = performance.now();
    let prev = "0".repeat(64);
    for (const event of this.events) {
      if (event.prev_hash !== prev) {
        return {
          ok: false,
          events: this.events.length,
          first_bad_seq: event.seq,
          reason: "previous hash does not match",
          millis: performance.now() - started,
          key_epochs: this.keyEpochs.filter((e) => e.seq < event.seq),
        };
      }
      prev = event.hash;
    }
    return {
      ok: true,
      events: this.events.length,
      first_bad_seq: null,
      reason: null,
      millis: Math.max(0.1, performance.now() - started),
      key_epochs: [...this.keyEpochs],
    };
  }

  async listEvents(beforeSeq: number | null, limit: number): Promise<EventView[]> {
    return this.events
      .filter((e) => beforeSeq === null || e.seq < beforeSeq)
      .sort((a, b) => b.seq - a.seq)
      .slice(0, limit)
      .map((e) => ({ ...e }));
  }

  async listAccounts(): Promise<AccountView[]> {
    return this.accounts.map((a) => ({ ...a }));
  }

  async addAccount(account: NewAccount): Promise<AccountView> {
    const name = account.name.trim();
    if (!/^[a-z0-9][a-z0-9_-]*$/i.test(name)) {
      fail("INVALID_INPUT", "An account name uses letters, digits, “-” and “_”.");
    }
    if (name === "local" || this.accounts.some((a) => a.name === name)) {
      fail("ACCOUNT_EXISTS", `An account named “${name}” already exists.`);
    }
    if (!/^https?:\/\/\S+$/.test(account.base_url.trim())) {
      fail("INVALID_INPUT", "The base URL must start with http:// or https://.");
    }
    const view: AccountView = {
      name,
      base_url: account.base_url.trim(),
      default_model: account.default_model.trim(),
      enabled: true,
      has_key: account.api_key.length > 0,
    };
    this.accounts.push(view);
    if (view.default_model) {
      this.models.push({ spec: `${name}:${view.default_model}`, label: `${view.default_model} (${name})`, local: false, available: true });
    }
    // The key goes to the keychain; the ledger only learns that an account exists.
    this.append("account_added", name, { name, base_url: view.base_url, default_model: view.default_model });
    return { ...view };
  }

  async removeAccount(name: string): Promise<void> {
    if (!this.accounts.some((a) => a.name === name)) fail("ACCOUNT_NOT_FOUND", `No account named “${name}”.`);
    this.accounts = this.accounts.filter((a) => a.name !== name);
    this.models = this.models.filter((m) => !m.spec.startsWith(`${name}:`));
    this.append("account_removed", name, { name });
  }

  async listModels(): Promise<ModelView[]> {
    return this.models.map((m) => ({ ...m }));
  }

  async importModel(path: string): Promise<ModelView> {
    if (!path.toLowerCase().endsWith(".gguf")) fail("MODEL_INVALID", "Only .gguf model files can be imported.");
    const file = path.split(/[\\/]/).pop() ?? path;
    const stem = file.replace(/\.gguf$/i, "");
    const model: ModelView = { spec: `local:${stem}`, label: `${stem} (local)`, local: true, available: true };
    if (!this.models.some((m) => m.spec === model.spec)) this.models.push(model);
    this.append("model_imported", model.spec, { file });
    return { ...model };
  }

  /** A small pretend file tree for the chooser: folders and files by path. */
  files: Record<string, { dirs: string[]; files: [string, number][] }> = {
    "/home/you": { dirs: ["Downloads", "models"], files: [["notes.txt", 120]] },
    "/home/you/Downloads": { dirs: [], files: [["tiny-model.gguf", 91_000_000], ["paper.pdf", 2_000_000]] },
    "/home/you/models": { dirs: [], files: [["other.Q4_K_M.gguf", 400_000_000]] },
  };

  async browseFolder(path: string | null, extensions: string[]): Promise<FolderView> {
    const folder = path ?? "/home/you";
    const node = this.files[folder];
    if (!node) fail("FILE_NOT_FOUND", `${folder} does not exist`);
    const wanted = extensions.map((e) => `.${e.toLowerCase()}`);
    const keep = (name: string) => wanted.length === 0 || wanted.some((w) => name.toLowerCase().endsWith(w));
    const parent = folder === "/" ? null : folder.slice(0, folder.lastIndexOf("/")) || "/";
    return {
      path: folder,
      parent,
      entries: [
        ...node.dirs.map((name) => ({ name, path: `${folder}/${name}`, is_dir: true, size: null })),
        ...node.files.filter(([name]) => keep(name)).map(([name, size]) => ({ name, path: `${folder}/${name}`, is_dir: false, size })),
      ],
      left_out: 0,
      places: [
        { key: "home", path: "/home/you" },
        { key: "models", path: "/home/you/models" },
        { key: "downloads", path: "/home/you/Downloads" },
      ],
    };
  }

  async listCheckpoints(): Promise<CheckpointView[]> {
    return [...this.checkpoints.values()].map((c) => ({ ...c.view })).sort((a, b) => a.slot - b.slot);
  }

  async saveCheckpoint(slot: number, name: string): Promise<CheckpointView> {
    const s = manualSlot(slot);
    const clean = name.trim();
    if ([...clean].length > 120) fail("INVALID_INPUT", "A checkpoint name is at most 120 characters.");
    return this.checkpointOp(
      "save",
      s,
      () => this.writeSlot(s, clean || `Save ${s}`),
      (view) => ({ type: "checkpoint_created", checkpoint: view }),
    );
  }

  async deleteCheckpoint(slot: number): Promise<void> {
    const s = manualSlot(slot);
    await this.checkpointOp(
      "delete",
      s,
      () => {
        if (!this.checkpoints.delete(s)) fail("CHECKPOINT_SLOT_EMPTY", `Checkpoint slot ${s} is empty.`);
      },
      () => ({ type: "checkpoint_deleted", slot: s }),
    );
  }

  async restoreCheckpoint(slot: number): Promise<ReceiptView> {
    const s = checkSlot(slot);
    return this.checkpointOp(
      "restore",
      s,
      () => {
        const saved = this.checkpoints.get(s) ?? fail("CHECKPOINT_SLOT_EMPTY", `Checkpoint slot ${s} is empty.`);
        return this.applyRestore(s, saved.view.seq, saved.snapshot);
      },
      (receipt) => ({ type: "checkpoint_restored", slot: s, receipt }),
    );
  }

  async undoRestore(): Promise<ReceiptView> {
    const last = Math.max(0, ...this.beforeRestore.keys());
    if (last === 0) fail("INVALID_INPUT", "There is no restore to undo.");
    return this.checkpointOp(
      "undo",
      null,
      () => this.applyRestore(null, last - 1, this.beforeRestore.get(last)!),
      (receipt) => ({ type: "checkpoint_restored", slot: null, receipt }),
    );
  }

  // The runtime's tools are not simulated: no items, no proposals.
  private metadata: MetadataServiceView = { base_url: null, has_key: false };

  async listItems(_query: string | null): Promise<ItemView[]> {
    return [];
  }

  async pendingProposal(_personaId: string): Promise<ProposalView | null> {
    return null;
  }

  async awaitingInput(_personaId: string): Promise<AwaitingInputView | null> {
    return null;
  }

  async confirmProposal(_personaId: string, _nonce: string): Promise<ToolResultView> {
    throw new BackendError({ code: "CONFIRMATION_UNKNOWN", message: "no pending proposal has this nonce" });
  }

  async rejectProposal(_personaId: string): Promise<boolean> {
    return false;
  }

  async getMetadataService(): Promise<MetadataServiceView> {
    return { ...this.metadata };
  }

  private tools: ToolSettingView[] = [
    { name: "save_note", description: "Save a note.", category: "write", requires_confirmation: false, enabled: true },
    { name: "save_movie", description: "Save a movie.", category: "write", requires_confirmation: false, enabled: true },
    { name: "delete_all_memories", description: "Delete every saved item.", category: "destructive", requires_confirmation: true, enabled: true },
  ];

  async listToolSettings(): Promise<ToolSettingView[]> {
    return this.tools.map((t) => ({ ...t }));
  }

  async setToolEnabled(tool: string, enabled: boolean): Promise<ToolSettingView[]> {
    const t = this.tools.find((x) => x.name === tool);
    if (!t) throw new BackendError({ code: "TOOL_UNKNOWN", message: `there is no tool named \`${tool}\`` });
    t.enabled = enabled;
    return this.listToolSettings();
  }

  async setMetadataService(baseUrl: string, apiKey: string): Promise<MetadataServiceView> {
    const url = baseUrl.trim().replace(/\/+$/, "");
    this.metadata = url ? { base_url: url, has_key: this.metadata.has_key || apiKey.trim() !== "" } : { base_url: null, has_key: false };
    return { ...this.metadata };
  }

  /** Drafts seen, for tests. */
  readonly drafts: string[] = [];

  async exportProfile(path: string, passphrase: string): Promise<ExportView> {
    if (passphrase.length < 8) fail("INVALID_INPUT", "the passphrase needs at least 8 characters");
    if (!path.startsWith("/")) fail("INVALID_INPUT", "give the full path of the file to write");
    return { path, events: this.messages.length + this.personas.length, bytes: 4096 };
  }

  /** Imports staged, for tests. */
  readonly staged: ImportView[] = [];
  restarts = 0;

  async importProfile(path: string, passphrase: string, replace: boolean): Promise<ImportView> {
    if (!path.startsWith("/")) fail("INVALID_INPUT", "give the full path of the export file");
    if (passphrase !== "correct horse") fail("EXPORT_BAD_PASSPHRASE", "wrong passphrase for this export file");
    const inUse = this.messages.length > 0 || this.personas.length > 1;
    if (inUse && !replace) fail("IMPORT_TARGET_NOT_EMPTY", "This profile already has conversations. Confirm to replace it.");
    const view = { profile_id: "imported-profile", events: 42, replaces_current: inUse };
    this.staged.push(view);
    return view;
  }

  async restartApp(): Promise<void> {
    this.restarts += 1;
  }

  async forgetMessage(messageId: string): Promise<void> {
    const before = this.messages.length;
    this.messages = this.messages.filter((m) => m.id !== messageId);
    if (this.messages.length === before) fail("STORAGE_LOAD_FAILED", "there is no such message (already deleted?)");
  }

  async archivePersona(personaId: string, archived: boolean): Promise<void> {
    const p = this.personas.find((x) => x.id === personaId) ?? fail("PERSONA_NOT_FOUND", "That persona no longer exists.");
    if (p.is_system) fail("INVALID_INPUT", "the built-in persona cannot be archived");
    p.archived = archived;
    this.emit({ type: "persona_changed", persona: { ...p } });
  }

  async deletePersona(personaId: string, _withHumanData: boolean): Promise<void> {
    const p = this.personas.find((x) => x.id === personaId) ?? fail("PERSONA_NOT_FOUND", "That persona no longer exists.");
    if (!p.archived) fail("PERSONA_ARCHIVED", "archive the persona before deleting it");
    this.personas = this.personas.filter((x) => x.id !== personaId);
    this.messages = this.messages.filter((m) => m.persona_id !== personaId);
  }

  async prefetchDraft(text: string): Promise<void> {
    this.drafts.push(text);
  }

  readonly kept = new Map<string, string>();

  async keepPageState(key: string, text: string): Promise<void> {
    if (text === "") this.kept.delete(key);
    else this.kept.set(key, text);
  }

  async keptPageState(key: string): Promise<string> {
    return this.kept.get(key) ?? "";
  }

  async getReceipt(seq: number): Promise<ReceiptView> {
    const receipt = this.receipts.get(seq) ?? fail("EVENT_NOT_FOUND", `No event ${seq}.`);
    return { ...receipt };
  }

  // ---- memory: an in-memory stand-in; extraction is not simulated ----
  private memories: MemoryView[] = [];
  private groups = new Map<string, PersonaGroupsView>();
  private used = new Map<string, string[]>();
  private paused = false;

  /** Test helper: a memory as if a persona had learned it. */
  addMemory(memory: Partial<MemoryView> & Pick<MemoryView, "text">): MemoryView {
    const view: MemoryView = {
      id: `mem-${this.nextId++}`,
      kind: "fact",
      subject: "",
      group: "General",
      learned_by: "ei",
      learned_by_name: "Ei",
      source_ids: [],
      quote: null,
      confidence: 0.5,
      validation: "none",
      superseded_by: null,
      exposure: 1,
      learned_ts: new Date().toISOString(),
      ...memory,
    };
    this.memories.unshift(view);
    this.emit({ type: "memories_changed", persona_id: null });
    return view;
  }

  /** Test helper: record that a reply used these items. */
  setMemoriesUsed(messageId: string, itemIds: string[]): void {
    this.used.set(messageId, itemIds);
  }

  private memoryById(id: string): MemoryView {
    const m = this.memories.find((x) => x.id === id);
    if (!m) throw new BackendError({ code: "MEMORY_NOT_FOUND", message: `no memory ${id}` });
    return m;
  }

  async listMemories(personaId: string | null, includeSuperseded: boolean): Promise<MemoryView[]> {
    const groups = personaId ? await this.personaGroups(personaId) : null;
    const sees = (g: string) => !groups || groups.sees_all || g === groups.group_primary || groups.groups_visible.includes(g);
    return this.memories.filter((m) => sees(m.group) && (includeSuperseded || !m.superseded_by)).map((m) => ({ ...m }));
  }
  async confirmMemory(id: string): Promise<MemoryView> {
    const m = this.memoryById(id);
    Object.assign(m, { validation: "human", confidence: 1 });
    this.emit({ type: "memories_changed", persona_id: null });
    return { ...m };
  }
  async editMemory(id: string, text: string): Promise<MemoryView> {
    if (!text.trim()) throw new BackendError({ code: "INVALID_INPUT", message: "a memory needs 1 to 500 characters" });
    const m = this.memoryById(id);
    Object.assign(m, { text: text.trim(), validation: "human", confidence: 1 });
    this.emit({ type: "memories_changed", persona_id: null });
    return { ...m };
  }
  async forgetMemory(id: string): Promise<void> {
    this.memoryById(id);
    this.memories = this.memories.filter((m) => m.id !== id);
    this.emit({ type: "memories_changed", persona_id: null });
  }
  async memoriesUsed(messageId: string): Promise<UsedItemView[]> {
    const out: UsedItemView[] = [];
    for (const id of this.used.get(messageId) ?? []) {
      const memory = this.memories.find((m) => m.id === id);
      if (memory) out.push({ item_id: id, kind: "memory", text: memory.text, memory: { ...memory } });
      const message = this.messages.find((m) => m.id === id);
      if (message) out.push({ item_id: id, kind: "message", text: message.content, memory: null });
    }
    return out;
  }
  async personaGroups(personaId: string): Promise<PersonaGroupsView> {
    const persona = this.personas.find((p) => p.id === personaId || p.name.toLowerCase() === personaId.toLowerCase());
    if (!persona) throw new BackendError({ code: "PERSONA_NOT_FOUND", message: `no persona ${personaId}` });
    return { group_primary: "General", groups_visible: [], ...this.groups.get(persona.id), sees_all: persona.is_system };
  }
  async setPersonaGroups(personaId: string, groupPrimary: string, groupsVisible: string[]): Promise<PersonaGroupsView> {
    const current = await this.personaGroups(personaId);
    const primary = groupPrimary.trim() || "General";
    const visible = [...new Set(groupsVisible.map((g) => g.trim() || "General"))].filter((g) => g !== primary);
    const view = { ...current, group_primary: primary, groups_visible: visible };
    this.groups.set(personaId, view);
    return view;
  }
  async queueView(): Promise<QueueView> {
    return { paused: this.paused, busy: this.busy, items: [] };
  }
  async pauseQueue(): Promise<void> {
    this.paused = true;
  }
  async resumeQueue(): Promise<void> {
    this.paused = false;
  }
  async abortCurrent(): Promise<boolean> {
    return false;
  }

  // ---- memory: persona management and chat state ----
  private profiles = new Map<string, Omit<PersonaProfileView, "id" | "name" | "short_description" | "long_description" | "group_primary" | "groups_visible" | "sees_all" | "is_system" | "archived" | "paused_until" | "summary" | "summary_source">>();

  private profileOf(personaId: string) {
    let p = this.profiles.get(personaId);
    if (!p) {
      p = { traits: [], topics: [], profile_source: "none", heartbeat_minutes: 30, context_window_hours: 8 };
      this.profiles.set(personaId, p);
    }
    return p;
  }

  /** The model's fill, faked: a moment later, traits and a topic from the description. */
  private simulateFill(personaId: string, description: string): void {
    const profile = this.profileOf(personaId);
    profile.profile_source = "pending";
    setTimeout(() => {
      if (profile.profile_source !== "pending") return;
      const word = description.split(/\s+/).find((w) => w.length > 3) ?? description;
      profile.traits = ["curious", "kind"];
      profile.topics = [{ name: word, perspective: "loves talking about it", approach: "", personal_stake: "", sentiment: 0.5, exposure_current: 0, exposure_desired: 0.5 }];
      profile.profile_source = "llm";
      const persona = this.personas.find((p) => p.id === personaId);
      if (persona) {
        if (!persona.long_description) persona.long_description = `${persona.name}: ${description}.`;
        this.emit({ type: "persona_changed", persona: { ...persona } });
      }
    }, this.options.firstTokenDelayMs);
  }

  async personaProfile(personaId: string): Promise<PersonaProfileView> {
    const persona = this.persona(personaId);
    const groups = await this.personaGroups(personaId);
    const profile = this.profileOf(persona.id);
    return {
      id: persona.id,
      name: persona.name,
      short_description: persona.short_description,
      long_description: persona.long_description,
      ...(JSON.parse(JSON.stringify(profile)) as typeof profile),
      paused_until: persona.paused_until,
      group_primary: groups.group_primary,
      groups_visible: groups.groups_visible,
      sees_all: groups.sees_all,
      is_system: persona.is_system,
      archived: persona.archived,
      summary: null,
      summary_source: null,
    } satisfies PersonaProfileView;
  }

  async updatePersona(personaId: string, edit: PersonaEdit): Promise<PersonaProfileView> {
    const persona = this.persona(personaId);
    const name = edit.name.trim();
    if (!name) fail("INVALID_INPUT", "a persona needs a name of 1 to 80 characters");
    if (this.personas.some((p) => p.id !== persona.id && p.name.toLowerCase() === name.toLowerCase())) {
      fail("PERSONA_EXISTS", `a persona named ${name} already exists`);
    }
    if (edit.heartbeat_minutes > 10080) fail("INVALID_INPUT", "the heartbeat delay is at most 10080 minutes (0 = never)");
    Object.assign(persona, { name, short_description: edit.short_description.trim(), long_description: edit.long_description.trim() });
    const profile = this.profileOf(persona.id);
    Object.assign(profile, {
      traits: edit.traits.map((t) => t.trim()).filter(Boolean),
      topics: edit.topics.filter((t) => t.name.trim()),
      profile_source: "human",
      heartbeat_minutes: edit.heartbeat_minutes,
      context_window_hours: edit.context_window_hours,
    });
    await this.setPersonaGroups(persona.id, edit.group_primary, edit.groups_visible);
    this.append("persona_updated", persona.id, edit);
    this.emit({ type: "persona_changed", persona: { ...persona } });
    return this.personaProfile(persona.id);
  }

  async pausePersona(personaId: string, until: string | null): Promise<PersonaView> {
    const persona = this.persona(personaId);
    if (until !== null) {
      const t = Date.parse(until);
      if (Number.isNaN(t)) fail("INVALID_INPUT", `"${until}" is not a date and time`);
      if (t <= Date.now()) fail("INVALID_INPUT", "pause until a time in the future");
      persona.paused_until = new Date(t).toISOString();
    } else {
      persona.paused_until = null;
    }
    this.append("persona_paused", persona.id, { until });
    this.emit({ type: "persona_changed", persona: { ...persona } });
    return { ...persona };
  }

  async listArchivedPersonas(): Promise<PersonaView[]> {
    return this.personas.filter((p) => p.archived).map((p) => ({ ...p }));
  }

  async setMessageContext(messageId: string, status: string): Promise<MessageView> {
    if (!["default", "always", "never"].includes(status)) fail("INVALID_INPUT", "context status must be default, always or never");
    const m = this.messages.find((x) => x.id === messageId) ?? fail("MESSAGE_NOT_FOUND", "that message does not exist");
    m.context_status = status;
    this.emit({ type: "message_added", message: { ...m } });
    return { ...m };
  }

  async recallMessage(messageId: string): Promise<string> {
    const m = this.messages.find((x) => x.id === messageId) ?? fail("MESSAGE_NOT_FOUND", "that message does not exist");
    if (m.role !== "human") fail("MESSAGE_NOT_RECALLABLE", "only your own messages can be recalled");
    const answered = this.messages.some((x) => x.persona_id === m.persona_id && x.seq > m.seq && x.role === "persona");
    if (answered || this.busy) fail("MESSAGE_NOT_RECALLABLE", "the reply to this message has already started");
    this.queue = [];
    this.messages = this.messages.filter((x) => x.id !== messageId);
    return m.content;
  }

  async setQueuePriority(_id: string, priority: string): Promise<void> {
    if (!["high", "normal", "low"].includes(priority)) fail("INVALID_INPUT", "priority must be high, normal or low");
  }

  private ceremony: CeremonySettingsView = { time: "03:00", last_run: null };
  async ceremonySettings(): Promise<CeremonySettingsView> {
    return { ...this.ceremony };
  }
  async setCeremonyTime(time: string): Promise<CeremonySettingsView> {
    const m = /^(\d\d):(\d\d)$/.exec(time.trim());
    if (!m || Number(m[1]) > 23 || Number(m[2]) > 59) fail("INVALID_INPUT", `"${time}" is not a time of day as HH:MM (00:00 to 23:59)`);
    this.ceremony.time = time.trim();
    return { ...this.ceremony };
  }
  // ---- office: frames are narrated from the mock's state, in English only ----
  private constitutions = new Map<string, ConstitutionView>();
  private handovers = new Map<string, HandoverView[]>();
  private obligations: ObligationView[] = [];
  private quotas = new Map<string, number>();
  private tokens = new Map<string, { prompt: number; completion: number }>();

  /** Test helper: an obligation as if a persona had set a reminder. */
  addObligation(personaId: string, text: string, dueAt: string | null, kind = "reminder"): ObligationView {
    const view: ObligationView = { id: `obl-${this.nextId++}`, persona_id: personaId, text, kind, due_at: dueAt, minutes_left: null, overdue: false, done: false };
    this.obligations.push(view);
    return view;
  }

  private narrate(persona: PersonaView): string {
    const parts = [`You are ${persona.name}. ${persona.short_description}`.trim()];
    const handover = this.handovers.get(persona.id)?.at(-1);
    if (handover) parts.push(`Your last session ended with this handover: ${handover.text}`);
    const open = this.obligations.filter((o) => o.persona_id === persona.id && !o.done);
    if (open.length) parts.push(`You owe: ${open.map((o) => o.text).join("; ")}.`);
    const c = this.constitutions.get(persona.id);
    if (c) parts.push(`Your constitution: ${c.core_directive}${c.overrides.map((o) => `\n- ${o}`).join("")}`);
    return parts.join("\n\n");
  }

  async whyReply(messageId: string): Promise<WhyView> {
    const message = this.messages.find((m) => m.id === messageId && m.role === "persona") ?? fail("FRAME_NOT_FOUND", "this reply has no recorded context frame");
    const persona = this.persona(message.persona_id);
    const narrative = this.narrate(persona);
    const tokens = Math.ceil(narrative.length / 4);
    const c = this.constitutions.get(persona.id);
    return {
      message_id: messageId,
      frame_hash: fakeHash(`frame|${messageId}|${narrative}`),
      narrative,
      session_type: "assist",
      budget: 4000,
      effective_budget: 700,
      narrative_tokens: tokens,
      counter: "estimate",
      sections: [
        { name: "identity", tokens: Math.ceil(tokens * 0.6), share: 0.6, dropped: 0 },
        { name: "constitution", tokens: Math.floor(tokens * 0.4), share: 0.4, dropped: 0 },
      ],
      handover: this.handovers.get(persona.id)?.at(-1)?.text ?? null,
      sanity_note: this.handovers.get(persona.id)?.at(-1)?.sanity_note ?? null,
      constitution: c ? [c.core_directive, ...c.overrides].join("\n- ") : null,
      sent_profile: "full",
      sent_reason: "remote provider",
      sent_prompt: `[system]\n${narrative}`,
      frame_json: JSON.stringify({ identity: { name: persona.name }, narrative }, null, 2),
      error: null,
    };
  }
  async endSession(personaId: string): Promise<HandoverView | null> {
    const persona = this.persona(personaId);
    const after = this.handovers.get(persona.id)?.at(-1)?.seq ?? 0;
    const session = this.messages.filter((m) => m.persona_id === persona.id && m.seq > after);
    if (session.length === 0) return null;
    const text = `We talked about: ${session.map((m) => m.content).join(" / ").slice(0, 300)}`;
    const seq = this.append("handover_written", persona.id, { text, author: "system", reason: "new" });
    const view: HandoverView = { seq, persona_id: persona.id, text, author: "system", reason: "new", ts: new Date().toISOString(), sanity_note: null };
    this.handovers.set(persona.id, [...(this.handovers.get(persona.id) ?? []), view]);
    return { ...view };
  }
  async listHandovers(personaId: string): Promise<HandoverView[]> {
    return (this.handovers.get(this.persona(personaId).id) ?? []).map((h) => ({ ...h }));
  }
  async getConstitution(personaId: string): Promise<ConstitutionView | null> {
    const c = this.constitutions.get(this.persona(personaId).id);
    return c ? { ...c, overrides: [...c.overrides] } : null;
  }
  async setConstitution(personaId: string, coreDirective: string, overrides: string[]): Promise<ConstitutionView> {
    const persona = this.persona(personaId);
    const clean = overrides.map((o) => o.trim().replace(/\n/g, " ")).filter((o) => o !== "");
    if (!coreDirective.trim() || clean.length > 20) fail("INVALID_INPUT", "a constitution needs a core directive; at most 20 overrides and 4000 characters");
    const version = (this.constitutions.get(persona.id)?.version ?? 0) + 1;
    this.append("constitution_set", persona.id, { version, core_directive: coreDirective.trim(), overrides: clean });
    const view: ConstitutionView = { persona_id: persona.id, version, core_directive: coreDirective.trim(), overrides: clean, ts: new Date().toISOString() };
    this.constitutions.set(persona.id, view);
    return { ...view, overrides: [...clean] };
  }
  async listObligations(personaId: string): Promise<ObligationView[]> {
    const persona = this.persona(personaId);
    const now = Date.now();
    return this.obligations
      .filter((o) => o.persona_id === persona.id)
      .map((o) => {
        const minutes = o.due_at ? Math.trunc((Date.parse(o.due_at) - now) / 60_000) : null;
        return { ...o, minutes_left: minutes, overdue: !o.done && minutes !== null && minutes < 0 };
      })
      .sort((a, b) => Number(a.done) - Number(b.done) || (a.minutes_left ?? Infinity) - (b.minutes_left ?? Infinity));
  }
  async completeObligation(id: string): Promise<void> {
    const o = this.obligations.find((x) => x.id === id) ?? fail("INVALID_INPUT", `no obligation ${id}`);
    o.done = true;
    this.append("reminder_done", o.persona_id, { reminder_id: id });
  }
  async tokenUsage(): Promise<TokenUsageView[]> {
    const day = new Date().toISOString().slice(0, 10);
    return this.personas.map((p) => ({
      entity_id: p.id,
      name: p.name,
      day,
      prompt_tokens: this.tokens.get(p.id)?.prompt ?? 0,
      completion_tokens: this.tokens.get(p.id)?.completion ?? 0,
      daily_limit: this.quotas.get(p.id) ?? 0,
    }));
  }
  async setTokenQuota(personaId: string, dailyLimit: number): Promise<void> {
    const persona = this.persona(personaId);
    if (!Number.isInteger(dailyLimit) || dailyLimit < 0 || dailyLimit > 4_294_967_295) fail("INVALID_INPUT", "the quota must be a whole number of tokens");
    this.quotas.set(persona.id, dailyLimit);
    this.append("token_quota_set", persona.id, { daily_limit: dailyLimit });
  }
  private sessions = new Map<string, { session_type: string; mode: string }>();
  async sessionMode(personaId: string): Promise<SessionModeView> {
    const persona = this.persona(personaId);
    const s = this.sessions.get(persona.id) ?? { session_type: "assist", mode: "deliberation" };
    const onlyDeliberation = s.session_type === "deliberate" || s.session_type === "research";
    return { persona_id: persona.id, ...s, allowed_modes: onlyDeliberation ? ["deliberation"] : ["deliberation", "commitment"] };
  }
  async setSessionMode(personaId: string, sessionType: string, mode: string): Promise<SessionModeView> {
    const persona = this.persona(personaId);
    if (!["work", "assist", "deliberate", "research"].includes(sessionType)) fail("INVALID_INPUT", `unknown session type “${sessionType}”`);
    if (!["deliberation", "commitment"].includes(mode)) fail("INVALID_INPUT", `unknown session mode “${mode}”`);
    if (mode === "commitment" && (sessionType === "deliberate" || sessionType === "research")) fail("INVALID_INPUT", `a ${sessionType} session cannot be in ${mode} mode`);
    this.sessions.set(persona.id, { session_type: sessionType, mode });
    this.append("session_mode_set", persona.id, { session_type: sessionType, mode });
    return this.sessionMode(persona.id);
  }
  async createObligation(personaId: string, text: string, dueAt: string | null, kind: string): Promise<ObligationView> {
    const persona = this.persona(personaId);
    if (!text.trim() || text.length > 500) fail("INVALID_INPUT", "an obligation needs a text of 1 to 500 characters");
    if (dueAt !== null && Number.isNaN(Date.parse(dueAt))) fail("INVALID_INPUT", `“${dueAt}” is not an RFC 3339 date and time`);
    const view = this.addObligation(persona.id, text.trim(), dueAt, kind);
    this.append("reminder_set", persona.id, { reminder_id: view.id, text: view.text, due_at: dueAt, obligation: kind });
    return { ...view };
  }
  /** The mock runs no tools: a proposal's risk is unknown, nothing is simulated. */
  async simulateProposal(_personaId: string, nonce: string): Promise<SimulationView> {
    return {
      nonce, tool: "", kind: "", risk: 0, critical: false, first_time: false, level: "skipped", ran: false, mode: "commitment",
      items_added: [], items_removed: [], obligations_added: [], obligations_closed: [], bookmarks_added: [], rejected: null, recommendation: null,
    };
  }
  /** Test helper: tokens spent today, as the reply worker records them. */
  spendTokens(personaId: string, prompt: number, completion: number): void {
    const t = this.tokens.get(personaId) ?? { prompt: 0, completion: 0 };
    this.tokens.set(personaId, { prompt: t.prompt + prompt, completion: t.completion + completion });
  }

  // ---- documents: an in-memory library whose passages are paragraphs ----
  private documents: { view: DocumentItemView; passages: string[] }[] = [];
  private citationsByMessage = new Map<string, CitationView[]>();

  async importDocuments(paths: string[], _watch = false): Promise<string> {
    const importId = `import-${this.nextId++}`;
    const total = paths.length;
    let done = 0;
    let chunks = 0;
    for (const path of paths) {
      const name = path.split(/[\\/]/).pop() ?? path;
      const passages = [`${name}: a document dropped in the preview.`];
      const id = this.nextId++;
      this.documents.push({
        view: {
          id, path, name, format: name.split(".").pop() ?? "txt", status: "indexed", size: 1024, pages: 1,
          chunks: passages.length, error: null, indexed_at: Date.now(), flagged: 0, groups: [],
        },
        passages,
      });
      done += 1;
      chunks += passages.length;
      this.emit({ type: "document_import", progress: { import_id: importId, done, total, current: path, last_status: "indexed", last_error: null, chunks, finished: false, cancelled: false } });
    }
    this.emit({ type: "document_import", progress: { import_id: importId, done, total, current: null, last_status: "indexed", last_error: null, chunks, finished: true, cancelled: false } });
    this.emit({ type: "documents_changed" });
    return importId;
  }
  async cancelImport(_importId: string): Promise<boolean> {
    return false;
  }
  async listDocuments(): Promise<DocumentItemView[]> {
    return this.documents.map((d) => ({ ...d.view }));
  }
  async removeDocument(id: number): Promise<void> {
    if (!this.documents.some((d) => d.view.id === id)) throw new BackendError({ code: "NOT_FOUND", message: `No document ${id} in the library.` });
    this.documents = this.documents.filter((d) => d.view.id !== id);
    for (const [message, cited] of this.citationsByMessage) {
      this.citationsByMessage.set(message, cited.filter((c) => c.document_id !== id));
    }
  }
  async setDocumentGroups(id: number, groups: string[]): Promise<void> {
    const doc = this.documents.find((d) => d.view.id === id);
    if (!doc) throw new BackendError({ code: "NOT_FOUND", message: `No document ${id} in the library.` });
    doc.view.groups = groups;
  }
  async searchDocuments(query: string, k: number): Promise<DocumentHitView[]> {
    const words = query.toLowerCase().split(/\W+/).filter((w) => w.length > 2);
    const hits: DocumentHitView[] = [];
    for (const d of this.documents) {
      d.passages.forEach((text, i) => {
        const score = words.filter((w) => text.toLowerCase().includes(w)).length / Math.max(words.length, 1);
        if (score > 0) hits.push({ document_id: d.view.id, chunk_id: d.view.id * 1000 + i, document: d.view.path, place: `${d.view.name}, p. 1`, snippet: text, score });
      });
    }
    return hits.sort((a, b) => b.score - a.score).slice(0, k);
  }
  async messageCitations(messageId: string): Promise<CitationView[]> {
    return this.citationsByMessage.get(messageId) ?? [];
  }
  async documentPassage(chunkId: number): Promise<PassageView> {
    const doc = this.documents.find((d) => d.view.id === Math.floor(chunkId / 1000));
    const text = doc?.passages[chunkId % 1000];
    if (!doc || text === undefined) throw new BackendError({ code: "NOT_FOUND", message: "This passage is no longer in the library." });
    return { chunk_id: chunkId, document: doc.view.path, place: `${doc.view.name}, p. 1`, text };
  }
  /** Test helper: a reply's citations, as the reply worker records them. */
  cite(personaId: string, messageId: string, citations: CitationView[]): void {
    this.citationsByMessage.set(messageId, citations);
    this.emit({ type: "reply_citations", persona_id: personaId, message_id: messageId, citations });
  }

  desktop: DesktopView = {
    settings: {
      close_to_tray: true,
      shortcut: "Ctrl+Shift+Space",
      shortcut_mode: "hold",
      voice: { input_device: null, output_device: null, rate_percent: 100, barge_in: true, headphones: false, language: "en" },
    },
    tray: true,
    shortcut_active: true,
    shortcut_problem: null,
  };
  async desktopSettings(): Promise<DesktopView> {
    return structuredClone(this.desktop);
  }
  async setDesktopSettings(settings: DesktopSettings): Promise<DesktopView> {
    const shortcut = settings.shortcut.trim() || "Ctrl+Shift+Space";
    if (!/^((Ctrl|Control|Shift|Alt|Super|Cmd|CmdOrCtrl)\+)*[A-Za-z0-9]+$/i.test(shortcut)) fail("INVALID_INPUT", `“${shortcut}” is not a key combination (try Ctrl+Shift+Space)`);
    this.desktop = { ...this.desktop, settings: { ...settings, shortcut } };
    return structuredClone(this.desktop);
  }
  /** A small catalog: the preview downloads in a few steps of a timer. */
  catalog: ModelChoiceView[] = [
    { id: "qwen2.5-coder-1.5b", name: "Qwen2.5-Coder 1.5B Instruct", family: "qwen2.5", size_bytes: 1_117_320_768, need_bytes: 1_340_000_000, fit: "fits", licence: "Apache-2.0", commercial_use: true, languages: ["en", "pt", "es", "fr", "de"], installed: true, default: true, recommended: false, downloading: false, downloadable: true, caveat: null, speed: null, in_ollama: false },
    { id: "qwen2.5-coder-0.5b", name: "Qwen2.5-Coder 0.5B Instruct", family: "qwen2.5", size_bytes: 491_400_064, need_bytes: 590_000_000, fit: "fits", licence: "Apache-2.0", commercial_use: true, languages: ["en", "pt", "es", "fr", "de"], installed: false, default: false, recommended: false, downloading: false, downloadable: true, caveat: null, speed: null, in_ollama: false },
    { id: "llama3.2-1b", name: "Llama 3.2 1B Instruct", family: "llama3.2", size_bytes: 807_694_368, need_bytes: 1_100_000_000, fit: "fits", licence: "Llama 3.2 Community", commercial_use: true, languages: ["en", "pt", "es", "fr", "de", "it", "hi", "th"], installed: false, default: false, recommended: false, downloading: false, downloadable: true, caveat: "commercial use under Meta's terms", speed: null, in_ollama: false },
    { id: "ollama:mistral:7b", name: "mistral:7b", family: "Ollama", size_bytes: 4_113_301_824, need_bytes: 4_650_000_000, fit: "tight", licence: "", commercial_use: false, languages: [], installed: false, default: false, recommended: false, downloading: false, downloadable: false, caveat: null, speed: null, in_ollama: true },
  ];
  /** Steps a preview download takes (tests set 1). */
  pullSteps = 4;
  private pullTimers = new Map<string, ReturnType<typeof setInterval>>();
  async modelChoices(needs: ModelNeeds): Promise<ModelChoiceView[]> {
    const budget = needs.spare_bytes ?? Infinity;
    const speaks = (m: ModelChoiceView) => !needs.language || m.languages.includes(needs.language.split("-")[0]);
    const usable = this.catalog.filter((m) => speaks(m) && m.downloadable);
    const fitting = usable.filter((m) => m.need_bytes <= budget).sort((a, b) => b.size_bytes - a.size_bytes);
    const pick = fitting[0] ?? usable.sort((a, b) => a.size_bytes - b.size_bytes)[0];
    return this.catalog.map((m) => ({ ...m, recommended: m.id === pick?.id, downloading: this.pullTimers.has(m.id) }));
  }
  async pullModel(id: string): Promise<void> {
    const model = this.catalog.find((m) => m.id === id) ?? fail("MODEL_NOT_FOUND", `No catalog model “${id}”.`);
    if (model.installed) fail("MODEL_EXISTS", `${model.name} is already installed`);
    if (this.pullTimers.has(id)) fail("MODEL_DOWNLOADING", `${model.name} is already downloading`);
    if (model.in_ollama) {
      // Read where Ollama keeps it: nothing to download.
      model.installed = true;
      this.models.push({ spec: `local:${id}`, label: `${model.name} (local)`, local: true, available: true });
      this.emit({ type: "model_pull", id, state: "installed", bytes_done: model.size_bytes, bytes_total: model.size_bytes, rate_bps: 0, message: null });
      return;
    }
    let step = 0;
    const total = model.size_bytes;
    const timer = setInterval(() => {
      step += 1;
      const done = Math.min(total, Math.round((total * step) / this.pullSteps));
      if (step < this.pullSteps) {
        this.emit({ type: "model_pull", id, state: "downloading", bytes_done: done, bytes_total: total, rate_bps: 40_000_000, message: null });
        return;
      }
      clearInterval(timer);
      this.pullTimers.delete(id);
      model.installed = true;
      model.speed = { prompt_tokens_per_s: 48, reply_tokens_per_s: 9 };
      this.models.push({ spec: `local:${id}`, label: `${model.name} (local)`, local: true, available: true });
      this.emit({ type: "model_pull", id, state: "measuring", bytes_done: total, bytes_total: total, rate_bps: 0, message: null });
      this.emit({ type: "model_pull", id, state: "installed", bytes_done: total, bytes_total: total, rate_bps: 0, message: null });
    }, 50);
    this.pullTimers.set(id, timer);
    this.emit({ type: "model_pull", id, state: "downloading", bytes_done: 0, bytes_total: total, rate_bps: 0, message: null });
  }
  async measureModelSpeed(id: string): Promise<SpeedView> {
    const model = this.catalog.find((m) => m.id === id) ?? fail("MODEL_NOT_FOUND", `No catalog model “${id}”.`);
    if (!model.installed) fail("MODEL_NOT_FOUND", `${model.name} is not installed: download it first`);
    model.speed = { prompt_tokens_per_s: 52, reply_tokens_per_s: 10 };
    return model.speed;
  }
  async cancelModelPull(id: string): Promise<boolean> {
    const timer = this.pullTimers.get(id);
    if (!timer) return false;
    clearInterval(timer);
    this.pullTimers.delete(id);
    this.emit({ type: "model_pull", id, state: "cancelled", bytes_done: 0, bytes_total: 0, rate_bps: 0, message: null });
    return true;
  }
  async removeModel(id: string): Promise<void> {
    const model = this.catalog.find((m) => m.id === id) ?? fail("MODEL_NOT_FOUND", `No model “${id}”.`);
    if (model.default) fail("INVALID_INPUT", "replies use this model now: choose another one first");
    model.installed = false;
    this.models = this.models.filter((m) => m.spec !== `local:${id}`);
  }
  async useModel(id: string): Promise<PersonaView[]> {
    const model = this.catalog.find((m) => m.id === id) ?? fail("MODEL_NOT_FOUND", `No model “${id}”.`);
    if (!model.installed) fail("MODEL_NOT_FOUND", `${model.name} is not installed: download it first`);
    for (const m of this.catalog) m.default = m.id === id;
    const spec = `local:${id}`;
    if (!this.models.some((m) => m.spec === spec)) this.models.push({ spec, label: `${model.name} (local)`, local: true, available: true });
    const ei = this.personas.find((p) => p.name === "Ei");
    const before = ei?.model;
    const changed: PersonaView[] = [];
    for (const p of this.personas) {
      if ((p === ei || p.model === before) && p.model !== spec) changed.push(await this.setPersonaModel(p.id, spec));
    }
    return changed;
  }
  /** Servers "running" in the preview (tests set them). */
  servers: ServerView[] = [];
  async localServers(): Promise<ServerView[]> {
    const accounts = await this.listAccounts();
    return this.servers.map((s) => ({ ...s, account: accounts.find((a) => a.base_url === s.url)?.name ?? null }));
  }
  async addServerAccount(url: string, model: string, apiKey: string): Promise<AccountView> {
    const server = this.servers.find((s) => s.url === url) ?? fail("SERVER_NOT_FOUND", `no server was found at ${url}`);
    if ((await this.listAccounts()).some((a) => a.base_url === url)) fail("ACCOUNT_EXISTS", "this server is already an account");
    if (server.models.length && !server.models.includes(model)) fail("INVALID_INPUT", `${server.kind} offers ${server.models.join(", ")}`);
    if (server.needs_key && !apiKey.trim()) fail("INVALID_INPUT", `${server.kind} needs its API key`);
    const taken = (await this.listAccounts()).map((a) => a.name);
    let name = server.kind;
    for (let n = 2; taken.includes(name); n++) name = `${server.kind}-${n}`;
    return this.addAccount({ name, base_url: server.url, api_key: apiKey, default_model: model });
  }
  /** The preview has no autostart folder: the setting lives here. */
  startsAtLogin = false;
  async startAtLogin(): Promise<boolean> {
    return this.startsAtLogin;
  }
  async setStartAtLogin(enabled: boolean): Promise<boolean> {
    this.startsAtLogin = enabled;
    return this.startsAtLogin;
  }
  /** The preview has no microphone: a turn says so, as the app does without one. */
  voiceListener: ((event: VoiceEvent) => void) | null = null;
  /** Steps of a turn that happened before the page opened. */
  latestVoice: VoiceEvent[] = [];
  async voiceLatest(): Promise<VoiceEvent[]> {
    return structuredClone(this.latestVoice);
  }
  async onVoiceEvent(handler: (event: VoiceEvent) => void): Promise<() => void> {
    this.voiceListener = handler;
    return () => {
      this.voiceListener = null;
    };
  }
  async voiceTalk(): Promise<void> {
    const emit = (event: VoiceEvent) => this.voiceListener?.(event);
    emit({ type: "state", state: "listening", persona_id: null });
    emit({ type: "failed", code: "VOICE_DEVICE_UNAVAILABLE", message: "no microphone is available in the preview" });
    emit({ type: "state", state: "error", persona_id: null });
  }
  async voiceStop(): Promise<void> {}
  async voiceDevices(): Promise<VoiceDeviceView[]> {
    fail("VOICE_DEVICE_UNAVAILABLE", "no sound device in the preview");
  }
  async onDragDrop(handler: (event: DragDropEvent) => void): Promise<() => void> {
    if (typeof window === "undefined") return () => {};
    // A plain browser gives file names, not paths: good enough for a preview.
    const names = (e: DragEvent) => Array.from(e.dataTransfer?.files ?? []).map((f) => f.name);
    let depth = 0;
    const enter = (e: DragEvent) => {
      e.preventDefault();
      if (depth++ === 0) handler({ type: "enter", paths: names(e) });
    };
    const over = (e: DragEvent) => {
      e.preventDefault();
      handler({ type: "over" });
    };
    const leave = () => {
      if (--depth <= 0) {
        depth = 0;
        handler({ type: "leave" });
      }
    };
    const drop = (e: DragEvent) => {
      e.preventDefault();
      depth = 0;
      handler({ type: "drop", paths: names(e) });
    };
    window.addEventListener("dragenter", enter);
    window.addEventListener("dragover", over);
    window.addEventListener("dragleave", leave);
    window.addEventListener("drop", drop);
    return () => {
      window.removeEventListener("dragenter", enter);
      window.removeEventListener("dragover", over);
      window.removeEventListener("dragleave", leave);
      window.removeEventListener("drop", drop);
    };
  }

  // ---- internals ----------------------------------------------------------

  /** Runs a checkpoint operation between `checkpoint_started` and its closing event, as the core does. */
  private async checkpointOp<T>(op: string, slot: number | null, run: () => T, done: (result: T) => AppEvent): Promise<T> {
    this.emit({ type: "checkpoint_started", op, slot });
    if (this.options.checkpointDelayMs > 0) await sleep(this.options.checkpointDelayMs);
    let result: T;
    try {
      result = run();
    } catch (error) {
      const view = error instanceof BackendError ? { code: error.code, message: error.message } : { code: "UI_ERROR", message: String(error) };
      this.emit({ type: "checkpoint_failed", op, slot, error: view });
      throw error;
    }
    this.emit(done(result));
    return result;
  }

  private snapshot(): Snapshot {
    return {
      personas: this.personas.map((p) => ({ ...p })),
      messages: this.messages.map((m) => ({ ...m })),
      digest: this.digest,
    };
  }

  /** `slot` null: the next auto slot, dropping slot 0 and shifting when all ten are used. */
  private writeSlot(slot: number | null, name: string): CheckpointView {
    let target = slot;
    if (target === null) {
      const autos = [...this.checkpoints.keys()].filter((s) => s < AUTO_SLOTS).sort((a, b) => a - b);
      if (autos.length < AUTO_SLOTS) {
        target = autos.length;
      } else {
        this.checkpoints.delete(0);
        for (let s = 1; s < AUTO_SLOTS; s++) {
          const entry = this.checkpoints.get(s)!;
          this.checkpoints.delete(s);
          this.checkpoints.set(s - 1, { ...entry, view: { ...entry.view, slot: s - 1 } });
        }
        target = AUTO_SLOTS - 1;
      }
    }
    const view: CheckpointView = {
      slot: target,
      manual: target >= FIRST_MANUAL,
      seq: this.events.length,
      name,
      created_at: new Date().toISOString(),
    };
    this.checkpoints.set(target, { view, snapshot: this.snapshot() });
    return { ...view };
  }

  /** Appends `checkpoint_restored` and puts `state` in place. Nothing is deleted from the ledger. */
  private applyRestore(slot: number | null, targetSeq: number, state: Snapshot): ReceiptView {
    const before = this.snapshot();
    this.personas = state.personas.map((p) => ({ ...p }));
    this.messages = state.messages.map((m) => ({ ...m }));
    const seq = this.append("checkpoint_restored", "human", { slot, target_seq: targetSeq }, state.digest);
    this.beforeRestore.set(seq, before);
    return { ...this.receipts.get(seq)! };
  }

  private persona(id: string): PersonaView {
    return this.personas.find((p) => p.id === id) ?? fail("PERSONA_NOT_FOUND", "That persona no longer exists.");
  }

  private addPersona(name: string, description: string, isSystem: boolean): PersonaView {
    const id = `persona-${this.nextId++}`;
    const seq = this.append("persona_created", id, { name, short_description: description });
    const persona: PersonaView = {
      id,
      name,
      short_description: description,
      long_description: "",
      model: LOCAL_MODEL.spec,
      is_system: isSystem,
      archived: false,
      unread: 0,
      created_seq: seq,
      paused_until: null,
    };
    this.personas.push(persona);
    this.emit({ type: "persona_changed", persona: { ...persona } });
    return persona;
  }

  private addMessage(personaId: string, role: MessageRole, content: string, read: boolean): MessageView {
    const id = `msg-${this.nextId++}`;
    const seq = this.append("message_added", personaId, { id, role, content });
    const message: MessageView = {
      id,
      persona_id: personaId,
      role,
      content,
      ts: new Date().toISOString(),
      read,
      seq,
      context_status: "default",
    };
    this.messages.push(message);
    this.emit({ type: "message_added", message: { ...message } });
    if (!read) {
      const persona = this.persona(personaId);
      persona.unread += 1;
      this.emit({ type: "persona_changed", persona: { ...persona } });
    }
    return message;
  }

  private append(kind: string, entityId: string, payload: unknown, stateAfter?: string): number {
    const seq = this.events.length + 1;
    const prev = this.events.at(-1)?.hash ?? "0".repeat(64);
    const json = JSON.stringify(payload, null, 2);
    const event: EventView = {
      seq,
      id: `evt-${seq}`,
      ts: new Date().toISOString(),
      entity_id: entityId,
      kind,
      payload: json,
      prev_hash: prev,
      hash: fakeHash(`${seq}|${kind}|${entityId}|${prev}|${json}`),
      signer: "device",
    };
    this.events.push(event);
    const before = this.digest;
    this.digest = stateAfter ?? fakeHash(`${before}|${event.hash}`);
    this.receipts.set(seq, {
      seq,
      event_id: event.id,
      kind,
      action_hash: fakeHash(`action|${kind}|${entityId}|${json}`),
      state_before: before,
      state_after: this.digest,
      signer: DEVICE_KEY,
      signature: fakeHash(`sig|${event.hash}`) + fakeHash(`sig2|${event.hash}`),
    });
    this.emit({ type: "ledger_appended", seq, kind });
    return seq;
  }

  private async pump(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      for (let job = this.queue.shift(); job; job = this.queue.shift()) {
        this.emit({ type: "queue_changed", busy: true, pending: this.queue.length });
        await job();
      }
    } finally {
      this.busy = false;
      this.emit({ type: "queue_changed", busy: false, pending: 0 });
    }
  }

  private async streamReply(requestId: string, persona: PersonaView, content: string): Promise<void> {
    this.emit({ type: "reply_started", request_id: requestId, persona_id: persona.id });
    await sleep(this.options.firstTokenDelayMs);
    if (/\/fail\b/.test(content)) {
      this.emit({
        type: "reply_failed",
        request_id: requestId,
        persona_id: persona.id,
        error: { code: "LLM_TIMEOUT", message: "The model took too long to answer. Try again in a moment." },
      });
      return;
    }
    const text = this.options.reply ? this.options.reply(persona, content) : this.cannedReply(persona, content);
    const tokens = text.match(/\s*\S+/g) ?? [text];
    for (const token of tokens) {
      this.emit({ type: "reply_delta", request_id: requestId, persona_id: persona.id, text: token });
      await sleep(this.options.tokenDelayMs);
    }
    const message = this.addMessage(persona.id, "persona", text, false);
    this.emit({ type: "reply_finished", request_id: requestId, message: { ...message } });
  }

  private cannedReply(persona: PersonaView, content: string): string {
    if (/two plus two|2 ?\+ ?2/i.test(content)) return "Two plus two is four. Would you like to try a harder one?";
    return `I'm ${persona.name}, running in the in-memory preview. You said: “${content.trim()}”. In the desktop app a real model answers here.`;
  }
}
