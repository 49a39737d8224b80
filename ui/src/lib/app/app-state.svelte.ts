//! The UI's state: a projection of what the core tells it. Views read it;
//! only this class (and the feature states it owns) calls the backend for
//! personas, messages and the event stream.

import { errorMessage, toBackendError, type Backend, type DragDropEvent } from "../backend";
import type { AppEvent } from "../bindings/AppEvent";
import type { MessageView } from "../bindings/MessageView";
import type { ModelView } from "../bindings/ModelView";
import type { PersonaView } from "../bindings/PersonaView";
import type { ReceiptView } from "../bindings/ReceiptView";
import type { StatusView } from "../bindings/StatusView";
import { t } from "../i18n/i18n";
import { CheckpointsState, isCheckpointEvent } from "../checkpoints/checkpoints-state.svelte";
import { LedgerState } from "../ledger/ledger-state.svelte";
import { MemoryState } from "../memory/memory-state.svelte";
import { AccountsState } from "../settings/accounts-state.svelte";
import { Notices } from "./notices.svelte";
import { isRuntimeEvent, RuntimeState } from "../runtime/runtime-state.svelte";
import { OfficeState } from "../office/office-state.svelte";
import { KEY_ERROR_CODES, KeysState } from "../keys/keys-state.svelte";
import { isLibraryEvent, LibraryState } from "../library/library-state.svelte";
import { VoiceOverlayState } from "../voice/voice-state.svelte";

/** One model download as the window shows it (a `model_pull` event without its tag). */
export type ModelPull = Omit<Extract<AppEvent, { type: "model_pull" }>, "type">;

export type View = "chat" | "ledger" | "settings" | "checkpoints" | "memory" | "items" | "library";
export const VIEWS: readonly View[] = ["chat", "ledger", "settings", "checkpoints", "memory", "items", "library"];

/** A reply being streamed for one persona. */
export interface ReplyStream {
  requestId: string;
  text: string;
}

/** A reply that failed, shown inline after the message it answered. */
export interface FailedReply {
  requestId: string;
  personaId: string;
  /** Placed after the message with this seq. */
  afterSeq: number;
  code: string;
  message: string;
}

/** "sending": the send call is in flight; "queued": sent, waiting for the reply to start. */
type Awaiting = "sending" | "queued";

function byPersonaOrder(a: PersonaView, b: PersonaView): number {
  if (a.is_system !== b.is_system) return a.is_system ? -1 : 1;
  return a.created_seq - b.created_seq;
}

export class AppState {
  readonly backend: Backend;
  readonly notices = new Notices();
  readonly ledger: LedgerState;
  readonly accounts: AccountsState;
  readonly checkpoints: CheckpointsState;
  readonly memory: MemoryState;
  readonly runtime: RuntimeState;
  readonly office: OfficeState;
  /** Whether this keychain holds the signing keys; the banner and the new key epoch. */
  readonly keys: KeysState;
  /** The document library: documents, imports, citations under replies. */
  readonly library: LibraryState;
  readonly voice: VoiceOverlayState;

  ready = $state(false);
  loadError = $state<string | null>(null);
  view = $state<View>("chat");

  personas = $state<PersonaView[]>([]);
  selectedId = $state<string | null>(null);
  messages = $state<Record<string, MessageView[]>>({});
  loadingMessages = $state<Record<string, boolean>>({});
  streams = $state<Record<string, ReplyStream>>({});
  awaiting = $state<Record<string, Awaiting>>({});
  failures = $state<Record<string, FailedReply[]>>({});
  /** Model downloads by catalog id: the latest `model_pull` of each. */
  modelPulls = $state<Record<string, ModelPull>>({});

  models = $state<ModelView[]>([]);
  status = $state<StatusView | null>(null);
  queue = $state({ busy: false, pending: 0 });
  /** The highest ledger seq seen, i.e. the number of events. */
  eventCount = $state(0);
  /** Seq of the last `session_mode_set` seen: the header's switch reads the mode again (an assist session escalates itself). */
  sessionModeSeq = $state(0);
  dragging = $state(false);

  sortedPersonas = $derived(this.personas.filter((p) => !p.archived).sort(byPersonaOrder));
  selected = $derived(this.personas.find((p) => p.id === this.selectedId) ?? null);

  /** The newest restore receipt whose state has been reloaded. */
  private reloadedSeq = 0;
  private subscribed = false;
  private unlistenDrop: (() => void) | null = null;
  private unlistenVoice: (() => void) | null = null;

  constructor(backend: Backend) {
    this.backend = backend;
    this.ledger = new LedgerState(backend, this.notices);
    this.memory = new MemoryState(backend, this.notices);
    this.accounts = new AccountsState(backend, this.notices, () => void this.refreshModels());
    this.checkpoints = new CheckpointsState(backend, this.notices, (receipt) => this.reloadAfterRestore(receipt));
    this.runtime = new RuntimeState(backend, this.notices, (personaId) => this.messages[personaId]?.at(-1)?.seq ?? 0);
    this.office = new OfficeState(backend, this.notices);
    this.keys = new KeysState(backend, this.notices);
    this.library = new LibraryState(backend, this.notices);
    this.voice = new VoiceOverlayState(backend);
  }

  /** True between `checkpoint_started` and its closing event: the whole UI is held. */
  get held(): boolean {
    return this.checkpoints.held;
  }

  // ---- start-up -------------------------------------------------------------

  async start(): Promise<void> {
    this.loadError = null;
    try {
      performance.mark("ledgermind:start");
      // The persona list is what makes the window usable: ask for it together
      // with the event stream and show it as soon as it arrives; the status
      // bar and the model list fill in right after.
      const subscribed = this.subscribed
        ? Promise.resolve()
        : this.backend.subscribe((event) => this.handle(event)).then(() => {
            this.subscribed = true;
          });
      const personas = this.backend.listPersonas();
      const rest = Promise.all([this.backend.status(), this.backend.listModels()]);
      // Each is awaited below; these only keep an early failure from going unhandled.
      subscribed.catch(() => {});
      personas.catch(() => {});
      rest.catch(() => {});
      await subscribed;
      for (const persona of await personas) this.upsertPersona(persona);
      this.ready = true;
      performance.mark("ledgermind:personas");
      // The next frame shows them.
      requestAnimationFrame(() => performance.mark("ledgermind:painted"));
      void this.keys.check();
      const [statusView, modelList] = await rest;
      this.applyStatus(statusView);
      this.models = modelList;
      // A page made anew (the hidden window's web view was released)
      // opens the chat that was open.
      const kept = await this.backend.keptPageState("selected").catch(() => "");
      const first = this.selectedId ?? this.sortedPersonas.find((p) => p.id === kept)?.id ?? this.sortedPersonas[0]?.id;
      if (first) await this.select(first, false);
    } catch (error) {
      this.loadError = errorMessage(error);
      return;
    }
    if (!this.unlistenDrop) {
      try {
        this.unlistenDrop = await this.backend.onDragDrop((event) => void this.onDragDrop(event));
      } catch (error) {
        // Dropping files is a convenience; the app works without it.
        console.warn("file drop unavailable:", errorMessage(error));
      }
    }
    if (!this.unlistenVoice) {
      try {
        this.unlistenVoice = await this.backend.onVoiceEvent((event) => this.voice.handle(event));
        // A turn that ran while this page did not exist (the window was
        // hidden and its page released) shows as it ended; a turn running
        // now continues from its steps so far.
        for (const event of await this.backend.voiceLatest()) this.voice.handle(event);
      } catch (error) {
        console.warn("voice events unavailable:", errorMessage(error));
      }
      // A shortcut another program holds is said at once, not only in Settings.
      this.backend.desktopSettings().then(
        (view) => {
          if (view.shortcut_problem) this.notices.push("error", t("desktop.shortcutProblem", { reason: view.shortcut_problem }), 20_000);
        },
        () => {},
      );
    }
  }

  stop(): void {
    this.unlistenDrop?.();
    this.unlistenDrop = null;
    this.unlistenVoice?.();
    this.unlistenVoice = null;
  }

  // ---- the event stream -----------------------------------------------------

  handle(event: AppEvent): void {
    if (isCheckpointEvent(event)) {
      this.checkpoints.handle(event);
      return;
    }
    if (isRuntimeEvent(event)) {
      this.runtime.handle(event);
      return;
    }
    if (isLibraryEvent(event)) {
      this.library.handle(event);
      return;
    }
    switch (event.type) {
      case "persona_changed": {
        this.upsertPersona(event.persona);
        if (event.persona.id === this.selectedId && event.persona.unread > 0 && this.isReading()) {
          void this.markRead(event.persona.id);
        }
        break;
      }
      case "message_added":
        // runtime: a line the core wrote itself (an intent's answer, a
        // question for a missing argument) answers a send that queued no reply.
        if (event.message.role !== "human" && !this.streams[event.message.persona_id]) delete this.awaiting[event.message.persona_id];
        this.addMessage(event.message);
        break;
      case "reply_started":
        delete this.awaiting[event.persona_id];
        this.streams[event.persona_id] = { requestId: event.request_id, text: "" };
        break;
      case "reply_delta": {
        delete this.awaiting[event.persona_id];
        const stream = this.streams[event.persona_id];
        if (stream && stream.requestId === event.request_id) stream.text += event.text;
        else this.streams[event.persona_id] = { requestId: event.request_id, text: event.text };
        break;
      }
      case "reply_finished": {
        const personaId = event.message.persona_id;
        if (this.streams[personaId]?.requestId === event.request_id) delete this.streams[personaId];
        delete this.awaiting[personaId];
        this.addMessage(event.message);
        break;
      }
      case "reply_failed": {
        if (this.streams[event.persona_id]?.requestId === event.request_id) delete this.streams[event.persona_id];
        delete this.awaiting[event.persona_id];
        const list = this.messages[event.persona_id] ?? [];
        const failure: FailedReply = {
          requestId: event.request_id,
          personaId: event.persona_id,
          afterSeq: list.at(-1)?.seq ?? 0,
          code: event.error.code,
          message: event.error.message,
        };
        this.failures[event.persona_id] ??= [];
        this.failures[event.persona_id].push(failure);
        if (KEY_ERROR_CODES.has(failure.code)) void this.keys.check();
        break;
      }
      case "model_pull": {
        const { type: _type, ...pull } = event;
        this.modelPulls[event.id] = pull;
        if (pull.state === "installed") {
          const fromOllama = event.id.startsWith("ollama:");
          this.notices.push("success", t(fromOllama ? "models.ollamaNotice" : "models.installedNotice", { id: event.id }));
          // The new file is a model personas can be given.
          void this.refreshModels();
        }
        if (pull.state === "failed" || pull.state === "paused") this.notices.push("error", t("models.failedNotice", { id: event.id, message: pull.message ?? "" }), 20_000);
        break;
      }
      case "queue_changed":
        this.queue = { busy: event.busy, pending: event.pending };
        if (!event.busy && event.pending === 0) {
          // Nothing left to run: no reply is coming for sends that already returned.
          for (const [id, state] of Object.entries(this.awaiting)) {
            if (state === "queued") delete this.awaiting[id];
          }
        }
        break;
      case "memories_changed":
        this.memory.noteChanged();
        break;
      case "job_failed":
        this.notices.push("error", t("memory.jobFailed", { kind: event.kind, code: event.error.code, message: event.error.message }));
        void this.memory.refreshQueue();
        break;
      case "ledger_appended":
        this.eventCount = Math.max(this.eventCount, event.seq);
        this.ledger.noteAppended(event.seq);
        if (event.kind === "session_mode_set") this.sessionModeSeq = event.seq;
        // A voice turn was recorded: a reply cut off while spoken now shows
        // what was said aloud.
        if (event.kind === "voice_turn" && this.selectedId) void this.loadMessages(this.selectedId);
        break;
    }
  }

  // ---- restores --------------------------------------------------------------

  /**
   * A restore (or its undo) replaced the projected state wholesale: read the
   * personas and the open conversation again. Runs once per receipt, whether
   * the command's answer or the `checkpoint_restored` event comes first.
   */
  async reloadAfterRestore(receipt: ReceiptView): Promise<void> {
    if (receipt.seq <= this.reloadedSeq) return;
    this.reloadedSeq = receipt.seq;
    this.eventCount = Math.max(this.eventCount, receipt.seq);
    try {
      const personas = await this.backend.listPersonas();
      this.personas = personas;
      this.failures = {};
      const visible = this.sortedPersonas;
      const keep = visible.some((p) => p.id === this.selectedId) ? this.selectedId : (visible[0]?.id ?? null);
      const messages: Record<string, MessageView[]> = {};
      if (keep) messages[keep] = await this.backend.listMessages(keep);
      this.selectedId = keep;
      this.messages = messages;
      if (keep && this.isReading()) await this.markRead(keep);
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  // ---- personas -------------------------------------------------------------

  upsertPersona(persona: PersonaView): void {
    const index = this.personas.findIndex((p) => p.id === persona.id);
    if (index >= 0) this.personas[index] = persona;
    else this.personas.push(persona);
  }

  /** Creates a persona and opens its chat. Rejects with a `BackendError`. */
  async createPersona(name: string, description: string): Promise<PersonaView> {
    const persona = await this.backend.createPersona(name, description);
    this.upsertPersona(persona);
    await this.select(persona.id);
    return persona;
  }

  async select(personaId: string, focusChat = true): Promise<void> {
    this.selectedId = personaId;
    this.backend.keepPageState("selected", personaId).catch(() => {});
    if (focusChat) this.view = "chat";
    // Not awaited: the model gets ready while the person reads and types.
    this.backend.openChat(personaId).catch(() => {});
    await Promise.all([this.loadMessages(personaId), this.runtime.loadPending(personaId)]);
    await this.markRead(personaId);
  }

  /** Archives (or brings back) a persona. Resolves false with a notice when refused. */
  async archivePersona(personaId: string, archived: boolean): Promise<boolean> {
    try {
      await this.backend.archivePersona(personaId, archived);
      const persona = this.personas.find((p) => p.id === personaId);
      if (persona) persona.archived = archived;
      return true;
    } catch (error) {
      this.notices.push("error", errorMessage(error));
      return false;
    }
  }

  /** Deletes an archived persona for real, optionally with what the person told it. */
  async deletePersona(personaId: string, withHumanData: boolean): Promise<boolean> {
    const name = this.personas.find((p) => p.id === personaId)?.name ?? "";
    try {
      await this.backend.deletePersona(personaId, withHumanData);
    } catch (error) {
      this.notices.push("error", errorMessage(error));
      return false;
    }
    this.personas = this.personas.filter((p) => p.id !== personaId);
    delete this.messages[personaId];
    this.notices.push("success", t("personas.deleted", { name }));
    if (this.selectedId === personaId) {
      const next = this.sortedPersonas[0]?.id;
      this.selectedId = null;
      if (next) await this.select(next, false);
    }
    return true;
  }

  async setModel(personaId: string, model: string): Promise<void> {
    try {
      const persona = await this.backend.setPersonaModel(personaId, model);
      this.upsertPersona(persona);
      const label = this.models.find((m) => m.spec === model)?.label ?? model;
      this.notices.push("success", t("chat.modelChanged", { name: persona.name, model: label }));
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  async refreshModels(): Promise<void> {
    try {
      this.models = await this.backend.listModels();
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  // ---- messages -------------------------------------------------------------

  async loadMessages(personaId: string): Promise<void> {
    this.loadingMessages[personaId] = true;
    try {
      const list = await this.backend.listMessages(personaId);
      for (const message of list) this.addMessage(message);
      this.messages[personaId] ??= [];
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    } finally {
      delete this.loadingMessages[personaId];
    }
  }

  /** Deletes one message for real; it leaves the conversation at once. */
  async forgetMessage(message: MessageView): Promise<boolean> {
    try {
      await this.backend.forgetMessage(message.id);
    } catch (error) {
      this.notices.push("error", errorMessage(error));
      return false;
    }
    const list = this.messages[message.persona_id];
    if (list) this.messages[message.persona_id] = list.filter((m) => m.id !== message.id);
    this.notices.push("success", t("chat.forgotten"));
    return true;
  }

  addMessage(message: MessageView): void {
    // Read back through the state proxy: `??=` evaluates to the raw array.
    this.messages[message.persona_id] ??= [];
    const list = this.messages[message.persona_id];
    const index = list.findIndex((m) => m.id === message.id);
    if (index >= 0) {
      list[index] = message;
      return;
    }
    // Keep ledger order; messages almost always arrive last, so scan from the end.
    let at = list.length;
    while (at > 0 && list[at - 1].seq > message.seq) at--;
    list.splice(at, 0, message);
    const open = message.persona_id === this.selectedId && !this.loadingMessages[message.persona_id];
    if (open && message.role === "persona" && !message.read && this.isReading()) {
      void this.markRead(message.persona_id);
    }
  }

  /** Sends `content` to the persona; resolves false (with a notice) when the core refused it. */
  async send(personaId: string, content: string): Promise<boolean> {
    this.awaiting[personaId] = "sending";
    try {
      const message = await this.backend.sendMessage(personaId, content);
      this.addMessage(message);
      if (this.awaiting[personaId] === "sending") this.awaiting[personaId] = "queued";
      return true;
    } catch (error) {
      delete this.awaiting[personaId];
      const failure = toBackendError(error);
      // A key problem gets the banner (what happened, what to do), not a notice that fades.
      if (KEY_ERROR_CODES.has(failure.code)) void this.keys.check();
      else this.notices.push("error", failure.message);
      return false;
    }
  }

  /**
   * A draft the person paused typing on: the core embeds it and reads the
   * prompt its reply would get into the model now, so the reply does not
   * wait for either. Best effort; failures only cost speed.
   */
  prefetchDraft(content: string): void {
    if (content.trim() === "") return;
    this.backend.prefetchDraft(content.trim(), this.selectedId ?? undefined).catch(() => {});
  }

  /** Keeps unsent text in the shell (memory only): best effort. */
  keepDraft(personaId: string, text: string): void {
    this.backend.keepPageState(`draft:${personaId}`, text).catch(() => {});
  }

  keptDraft(personaId: string): Promise<string> {
    return this.backend.keptPageState(`draft:${personaId}`).catch(() => "");
  }

  async markRead(personaId: string): Promise<void> {
    const persona = this.personas.find((p) => p.id === personaId);
    if (persona) persona.unread = 0;
    // memory: each message's own read state follows (bubbles show "new" until read).
    for (const m of this.messages[personaId] ?? []) if (!m.read) m.read = true;
    try {
      await this.backend.markRead(personaId);
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  /** Whether the person is looking at the open chat right now. */
  private isReading(): boolean {
    const visible = typeof document === "undefined" || document.visibilityState !== "hidden";
    return this.view === "chat" && visible;
  }

  // ---- status ---------------------------------------------------------------

  async refreshStatus(): Promise<void> {
    try {
      this.applyStatus(await this.backend.status());
    } catch (error) {
      this.notices.push("error", errorMessage(error));
    }
  }

  private applyStatus(status: StatusView): void {
    this.status = status;
    this.queue = { busy: status.queue_busy, pending: status.queue_pending };
    this.eventCount = Math.max(this.eventCount, status.events);
  }

  // ---- dropped files --------------------------------------------------------

  async onDragDrop(event: DragDropEvent): Promise<void> {
    switch (event.type) {
      case "enter":
      case "over":
        this.dragging = true;
        return;
      case "leave":
        this.dragging = false;
        return;
      case "drop":
        this.dragging = false;
        if (this.held) return;
        await this.importDropped(event.paths);
    }
  }

  async importDropped(paths: string[]): Promise<void> {
    // Documents and folders are imported by the core itself when they are
    // dropped (their progress arrives as events); models are imported here.
    const models = paths.filter((p) => p.toLowerCase().endsWith(".gguf"));
    if (models.length < paths.length) this.notices.push("info", t("drop.documents"), 4000);
    for (const path of models) {
      const file = path.split(/[\\/]/).pop() ?? path;
      const progress = this.notices.push("info", t("drop.importing", { file }), 0);
      try {
        const model = await this.backend.importModel(path);
        if (!this.models.some((m) => m.spec === model.spec)) this.models.push(model);
        this.notices.push("success", t("drop.imported", { label: model.label }));
      } catch (error) {
        this.notices.push("error", errorMessage(error));
      } finally {
        this.notices.dismiss(progress);
      }
    }
  }
}
