//! The one seam between the UI and the desktop core. Components and state
//! only ever talk to a `Backend`; `tauri.ts` is the real one, `mock.ts` an
//! in-memory fake for component tests and `vite dev` in a plain browser.

import type { AccountView } from "../bindings/AccountView";
import type { ModelChoiceView } from "../bindings/ModelChoiceView";
import type { ModelNeeds } from "../bindings/ModelNeeds";
import type { ServerView } from "../bindings/ServerView";
import type { SpeedView } from "../bindings/SpeedView";
import type { AppEvent } from "../bindings/AppEvent";
import type { CeremonySettingsView } from "../bindings/CeremonySettingsView";
import type { CheckpointView } from "../bindings/CheckpointView";
import type { ErrorView } from "../bindings/ErrorView";
import type { ExportView } from "../bindings/ExportView";
import type { FolderView } from "../bindings/FolderView";
import type { ImportView } from "../bindings/ImportView";
import type { EventView } from "../bindings/EventView";
import type { ItemView } from "../bindings/ItemView";
import type { MetadataServiceView } from "../bindings/MetadataServiceView";
import type { ToolSettingView } from "../bindings/ToolSettingView";
import type { ProposalView } from "../bindings/ProposalView";
import type { AwaitingInputView } from "../bindings/AwaitingInputView";
import type { ToolResultView } from "../bindings/ToolResultView";
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
import type { KeyReplacementView } from "../bindings/KeyReplacementView";
import type { KeyStatusView } from "../bindings/KeyStatusView";
// office
import type { ConstitutionView } from "../bindings/ConstitutionView";
import type { HandoverView } from "../bindings/HandoverView";
import type { ObligationView } from "../bindings/ObligationView";
import type { SessionModeView } from "../bindings/SessionModeView";
import type { SimulationView } from "../bindings/SimulationView";
import type { TokenUsageView } from "../bindings/TokenUsageView";
import type { WhyView } from "../bindings/WhyView";
// documents
import type { CitationView } from "../bindings/CitationView";
import type { DocumentHitView } from "../bindings/DocumentHitView";
import type { DocumentItemView } from "../bindings/DocumentItemView";
import type { PassageView } from "../bindings/PassageView";
import type { DesktopSettings } from "../bindings/DesktopSettings";
import type { DesktopView } from "../bindings/DesktopView";
import type { VoiceDeviceView } from "../bindings/VoiceDeviceView";
import type { VoiceEvent } from "../bindings/VoiceEvent";

/** What the window reports while files are dragged over it. */
export type DragDropEvent =
  | { type: "enter"; paths: string[] }
  | { type: "over" }
  | { type: "drop"; paths: string[] }
  | { type: "leave" };

/** One method per backend command. Every method rejects with a `BackendError`. */
export interface Backend {
  /** `subscribe`: opens the single event stream. Call once at start. */
  subscribe(onEvent: (event: AppEvent) => void): Promise<void>;
  /** `status` */
  status(): Promise<StatusView>;
  /** `list_personas` */
  listPersonas(): Promise<PersonaView[]>;
  /** `create_persona` */
  createPersona(name: string, description: string): Promise<PersonaView>;
  /** `set_persona_model` */
  setPersonaModel(personaId: string, model: string): Promise<PersonaView>;
  /** `list_messages` */
  listMessages(personaId: string): Promise<MessageView[]>;
  /** `open_chat`: the chat is on screen; its model gets ready for the next message (returns at once). */
  openChat(personaId: string): Promise<void>;
  /** `send_message`: resolves with the human's message; the reply streams as events. */
  sendMessage(personaId: string, content: string): Promise<MessageView>;
  /** `prefetch_draft`: a draft being typed, so the reply's retrieval finds its embedding ready and, with the chat's persona, its prompt already read by the model. */
  prefetchDraft(text: string, personaId?: string): Promise<void>;
  /** `keep_page_state`: what a page made anew would lose (unsent text, the open chat), kept by the shell in memory; "" forgets the key. */
  keepPageState(key: string, text: string): Promise<void>;
  /** `kept_page_state`: the text kept under `key` ("" when none). */
  keptPageState(key: string): Promise<string>;
  /** `export_profile`: the whole profile, encrypted with `passphrase`, to a new file at `path`. */
  exportProfile(path: string, passphrase: string): Promise<ExportView>;
  /** `import_profile`: checks an export and stages it for the next start; `replace` confirms replacing a profile in use (kept aside). */
  importProfile(path: string, passphrase: string, replace: boolean): Promise<ImportView>;
  /** `restart_app`: quits cleanly and starts again (opens a staged import). */
  restartApp(): Promise<void>;
  /** `forget_message`: erases one message for real (database, WAL, index, later snapshots). */
  forgetMessage(messageId: string): Promise<void>;
  /** `archive_persona` */
  archivePersona(personaId: string, archived: boolean): Promise<void>;
  /** `delete_persona`: archived personas only; optionally with what the human told it. */
  deletePersona(personaId: string, withHumanData: boolean): Promise<void>;
  /** `mark_read` */
  markRead(personaId: string): Promise<void>;
  /** `key_status`: each signing entity and whether this keychain holds its private key. */
  keyStatus(): Promise<KeyStatusView[]>;
  /** `rotate_missing_keys`: a new key epoch for every missing private key. */
  rotateMissingKeys(): Promise<KeyReplacementView[]>;
  /** `verify_ledger` */
  verifyLedger(): Promise<VerifyView>;
  /** `list_events`: newest first, strictly before `beforeSeq` when given. */
  listEvents(beforeSeq: number | null, limit: number): Promise<EventView[]>;
  /** `list_accounts` */
  listAccounts(): Promise<AccountView[]>;
  /** `add_account` */
  addAccount(account: NewAccount): Promise<AccountView>;
  /** `remove_account` */
  removeAccount(name: string): Promise<void>;
  /** `list_models` */
  listModels(): Promise<ModelView[]>;
  /** `import_model` */
  importModel(path: string): Promise<ModelView>;
  /** `browse_folder`: one folder for the in-app file chooser (home when `path` is null). */
  browseFolder(path: string | null, extensions: string[]): Promise<FolderView>;
  /** `list_checkpoints`: only the filled slots, by slot number. */
  listCheckpoints(): Promise<CheckpointView[]>;
  /** `save_checkpoint`: manual slots 10–14; overwrites a filled one. */
  saveCheckpoint(slot: number, name: string): Promise<CheckpointView>;
  /** `delete_checkpoint`: manual slots only (`CHECKPOINT_SLOT_PROTECTED` otherwise). */
  deleteCheckpoint(slot: number): Promise<void>;
  /** `restore_checkpoint`: appends `checkpoint_restored`; nothing is deleted. */
  restoreCheckpoint(slot: number): Promise<ReceiptView>;
  /** `undo_restore`: restores the state just before the latest restore. */
  undoRestore(): Promise<ReceiptView>;
  /** `get_receipt` */
  getReceipt(seq: number): Promise<ReceiptView>;
  /** `list_items`: saved items, newest first; every word of `query` must match. */
  listItems(query: string | null): Promise<ItemView[]>;
  /** `pending_proposal`: the tool call waiting for Confirm / Reject in this conversation. */
  pendingProposal(personaId: string): Promise<ProposalView | null>;
  /** `awaiting_input`: the question this conversation waits on (AWAITING_INPUT). */
  awaitingInput(personaId: string): Promise<AwaitingInputView | null>;
  /** `confirm_proposal`: runs the call once with its one-time nonce. */
  confirmProposal(personaId: string, nonce: string): Promise<ToolResultView>;
  /** `reject_proposal`: resolves false when nothing was pending. */
  rejectProposal(personaId: string): Promise<boolean>;
  /** `get_metadata_service` */
  getMetadataService(): Promise<MetadataServiceView>;
  /** `set_metadata_service`: an empty URL removes it; an empty key keeps the stored one. */
  setMetadataService(baseUrl: string, apiKey: string): Promise<MetadataServiceView>;
  /** `list_tool_settings`: every tool with its on/off state. */
  listToolSettings(): Promise<ToolSettingView[]>;
  /** `set_tool_enabled`: an off tool is not offered to models and is refused. */
  setToolEnabled(tool: string, enabled: boolean): Promise<ToolSettingView[]>;
  // ---- memory ----
  /** `list_memories`: all of them, or only what `personaId` may see (its groups). */
  listMemories(personaId: string | null, includeSuperseded: boolean): Promise<MemoryView[]>;
  /** `confirm_memory`: validation "human" (locked, never decays). */
  confirmMemory(id: string): Promise<MemoryView>;
  /** `edit_memory`: corrects the text (also confirms it). */
  editMemory(id: string, text: string): Promise<MemoryView>;
  /** `forget_memory`: erases it for real. */
  forgetMemory(id: string): Promise<void>;
  /** `memories_used`: what retrieval gave the reply `messageId`. */
  memoriesUsed(messageId: string): Promise<UsedItemView[]>;
  /** `persona_groups` */
  personaGroups(personaId: string): Promise<PersonaGroupsView>;
  /** `set_persona_groups` */
  setPersonaGroups(personaId: string, groupPrimary: string, groupsVisible: string[]): Promise<PersonaGroupsView>;
  /** `queue_view`: pending, running and dead-lettered work. */
  queueView(): Promise<QueueView>;
  /** `pause_queue` */
  pauseQueue(): Promise<void>;
  /** `resume_queue` */
  resumeQueue(): Promise<void>;
  /** `abort_current`: cancels the model call running now; false when none. */
  abortCurrent(): Promise<boolean>;
  // ---- memory: persona management and chat state ----
  /** `persona_profile`: traits, topics, settings and groups, for the editor. */
  personaProfile(personaId: string): Promise<PersonaProfileView>;
  /** `update_persona`: saves the editor's values (only what changed is written). */
  updatePersona(personaId: string, edit: PersonaEdit): Promise<PersonaProfileView>;
  /** `pause_persona`: until an RFC 3339 time in the future; null resumes. */
  pausePersona(personaId: string, until: string | null): Promise<PersonaView>;
  /** `list_archived_personas` */
  listArchivedPersonas(): Promise<PersonaView[]>;
  /** `set_message_context`: "default" | "always" | "never". */
  setMessageContext(messageId: string, status: string): Promise<MessageView>;
  /** `recall_message`: takes back a message whose reply has not started; resolves with its text. */
  recallMessage(messageId: string): Promise<string>;
  /** `set_queue_priority`: "high" | "normal" | "low", pending background work only. */
  setQueuePriority(id: string, priority: string): Promise<void>;
  /** `ceremony_settings`: the nightly ceremony's time (HH:MM, UTC) and its last run. */
  ceremonySettings(): Promise<CeremonySettingsView>;
  /** `set_ceremony_time` */
  setCeremonyTime(time: string): Promise<CeremonySettingsView>;
  // ---- office ----
  /** `why_reply`: the frame, narrative, hash and token counts a reply was generated from. */
  whyReply(messageId: string): Promise<WhyView>;
  /** `end_session` ("New"): writes the handover and starts a new session; null when the session was empty. */
  endSession(personaId: string): Promise<HandoverView | null>;
  /** `list_handovers`: the persona's session endings, oldest first (the chat's session boundaries). */
  listHandovers(personaId: string): Promise<HandoverView[]>;
  /** `get_constitution`: the persona's current constitution, null when it has none. */
  getConstitution(personaId: string): Promise<ConstitutionView | null>;
  /** `set_constitution`: writes its next version. */
  setConstitution(personaId: string, coreDirective: string, overrides: string[]): Promise<ConstitutionView>;
  /** `list_obligations`: most urgent first, then the finished ones. */
  listObligations(personaId: string): Promise<ObligationView[]>;
  /** `complete_obligation` */
  completeObligation(id: string): Promise<void>;
  /** `token_usage`: today's tokens and quota per persona. */
  tokenUsage(): Promise<TokenUsageView[]>;
  /** `set_token_quota`: 0 removes the limit. */
  setTokenQuota(personaId: string, dailyLimit: number): Promise<void>;
  /** `session_mode`: the persona's session type and mode, and the modes its type allows. */
  sessionMode(personaId: string): Promise<SessionModeView>;
  /** `set_session_mode`: switches them (recorded as an event; the next frame and narrative follow). */
  setSessionMode(personaId: string, sessionType: string, mode: string): Promise<SessionModeView>;
  /** `add_obligation`: a reminder or commitment added by the person; `dueAt` RFC 3339 or null. */
  createObligation(personaId: string, text: string, dueAt: string | null, kind: string): Promise<ObligationView>;
  /** `simulate_proposal`: the pending proposal's risk, and what it would change when a simulation is required or recommended. */
  simulateProposal(personaId: string, nonce: string): Promise<SimulationView>;
  // ---- documents ----
  /** `import_documents`: files and folders (recursively; with `watch`, folders stay watched); resolves with the import id, progress arrives as `document_import` events. */
  importDocuments(paths: string[], watch?: boolean): Promise<string>;
  /** `cancel_import`: stops after the file being read. */
  cancelImport(importId: string): Promise<boolean>;
  /** `list_documents` */
  listDocuments(): Promise<DocumentItemView[]>;
  /** `remove_document`: its text, passages, vectors and citations are deleted. */
  removeDocument(id: number): Promise<void>;
  /** `set_document_groups`: which personas' groups may use it (empty: every persona). */
  setDocumentGroups(id: number, groups: string[]): Promise<void>;
  /** `search_documents` */
  searchDocuments(query: string, k: number): Promise<DocumentHitView[]>;
  /** `message_citations`: the passages a reply cited. */
  messageCitations(messageId: string): Promise<CitationView[]>;
  /** `document_passage`: the whole passage behind a citation. */
  documentPassage(chunkId: number): Promise<PassageView>;
  /** `desktop_settings`: close-to-tray and the global shortcut, with what works on this machine. */
  desktopSettings(): Promise<DesktopView>;
  /** `set_desktop_settings`: saves them and registers the shortcut again. */
  setDesktopSettings(settings: DesktopSettings): Promise<DesktopView>;
  /** `model_choices`: the catalog with fit, install state and one model recommended for `needs`. */
  modelChoices(needs: ModelNeeds): Promise<ModelChoiceView[]>;
  /** `pull_model`: starts a verified download; `model_pull` events follow. */
  pullModel(id: string): Promise<void>;
  /** `cancel_model_pull`: stops it, keeping what was downloaded for the next try. */
  /** `measure_model_speed`: how fast an installed model reads and writes here (kept and shown in the picker). */
  measureModelSpeed(id: string): Promise<SpeedView>;
  cancelModelPull(id: string): Promise<boolean>;
  /** `remove_model`: deletes an installed model that replies do not use. */
  removeModel(id: string): Promise<void>;
  /** `use_model`: replies use this model (Ei and the personas on Ei's model); answers the personas changed. */
  useModel(id: string): Promise<PersonaView[]>;
  /** `local_servers`: model servers running on this machine (Ollama, LM Studio, Jan, llama.cpp, vLLM). */
  localServers(): Promise<ServerView[]>;
  /** `add_server_account`: the server the last look found at `url` as an account, `model` (one it offers) its default model. */
  addServerAccount(url: string, model: string, apiKey: string): Promise<AccountView>;
  /** `start_at_login`: whether an autostart entry starts Ledgermind, hidden in the tray, at login. */
  startAtLogin(): Promise<boolean>;
  /** `set_start_at_login`: writes or removes that entry; answers the new state. */
  setStartAtLogin(enabled: boolean): Promise<boolean>;
  /** The voice turn's steps (the shell's `voice://event`). Returns an unlisten function. */
  onVoiceEvent(handler: (event: VoiceEvent) => void): Promise<() => void>;
  /** `voice_latest`: the latest turn's steps (no level readings), for a page opened after them. */
  voiceLatest(): Promise<VoiceEvent[]>;
  /** `voice_talk`: starts a voice turn with the persona chosen in the tray (or stops the running one). */
  voiceTalk(): Promise<void>;
  /** `voice_stop`: ends the running voice turn at once. */
  voiceStop(): Promise<void>;
  /** `voice_devices`: the machine's sound devices (an error when there is none). */
  voiceDevices(): Promise<VoiceDeviceView[]>;
  /** Files dragged onto the window (not a command: a window event). Returns an unlisten function. */
  onDragDrop(handler: (event: DragDropEvent) => void): Promise<() => void>;
}

/** The boundary error, as an `Error` so it has a stack and works with `instanceof`. */
export class BackendError extends Error implements ErrorView {
  readonly code: string;

  constructor(view: ErrorView) {
    super(view.message);
    this.name = "BackendError";
    this.code = view.code;
  }
}

function isErrorView(value: unknown): value is ErrorView {
  return (
    typeof value === "object" &&
    value !== null &&
    typeof (value as ErrorView).code === "string" &&
    typeof (value as ErrorView).message === "string"
  );
}

/** Turns whatever a rejected call produced into a `BackendError`. */
export function toBackendError(error: unknown): BackendError {
  if (error instanceof BackendError) return error;
  if (isErrorView(error)) return new BackendError(error);
  if (error instanceof Error) return new BackendError({ code: "UI_ERROR", message: error.message });
  if (typeof error === "string") return new BackendError({ code: "UI_ERROR", message: error });
  return new BackendError({ code: "UI_ERROR", message: String(error) });
}

/** The text to show a person for any failure. */
export function errorMessage(error: unknown): string {
  return toBackendError(error).message;
}
