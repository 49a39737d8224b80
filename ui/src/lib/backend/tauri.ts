import type { ModelChoiceView } from "../bindings/ModelChoiceView";
import type { ModelNeeds } from "../bindings/ModelNeeds";
import type { ServerView } from "../bindings/ServerView";
import type { SpeedView } from "../bindings/SpeedView";
import type { FolderView } from "../bindings/FolderView";
import type { ExportView } from "../bindings/ExportView";
import type { ImportView } from "../bindings/ImportView";
//! The real backend: Tauri commands over `invoke`, events over one `Channel`.

import { Channel, invoke } from "@tauri-apps/api/core";
import { getCurrentWebview } from "@tauri-apps/api/webview";
import { listen } from "@tauri-apps/api/event";
import type { DesktopSettings } from "../bindings/DesktopSettings";
import type { DesktopView } from "../bindings/DesktopView";
import type { VoiceDeviceView } from "../bindings/VoiceDeviceView";
import type { VoiceEvent } from "../bindings/VoiceEvent";
import type { AccountView } from "../bindings/AccountView";
import type { AppEvent } from "../bindings/AppEvent";
import type { CeremonySettingsView } from "../bindings/CeremonySettingsView";
import type { CheckpointView } from "../bindings/CheckpointView";
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
import type { KeyReplacementView } from "../bindings/KeyReplacementView";
import type { KeyStatusView } from "../bindings/KeyStatusView";
import type { VerifyView } from "../bindings/VerifyView";
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
import { toBackendError, type Backend, type DragDropEvent } from "./backend";

async function call<T>(command: string, args?: Record<string, unknown>): Promise<T> {
  try {
    return await invoke<T>(command, args);
  } catch (error) {
    throw toBackendError(error);
  }
}

export class TauriBackend implements Backend {
  // Held so the channel (and its callback) lives as long as the backend.
  private channel: Channel<AppEvent> | null = null;

  async subscribe(onEvent: (event: AppEvent) => void): Promise<void> {
    const channel = new Channel<AppEvent>();
    channel.onmessage = onEvent;
    this.channel = channel;
    await call<void>("subscribe", { onEvent: channel });
  }

  status() {
    return call<StatusView>("status");
  }
  listPersonas() {
    return call<PersonaView[]>("list_personas");
  }
  createPersona(name: string, description: string) {
    return call<PersonaView>("create_persona", { name, description });
  }
  setPersonaModel(personaId: string, model: string) {
    return call<PersonaView>("set_persona_model", { personaId, model });
  }
  listMessages(personaId: string) {
    return call<MessageView[]>("list_messages", { personaId });
  }
  openChat(personaId: string) {
    return call<void>("open_chat", { personaId });
  }
  sendMessage(personaId: string, content: string) {
    return call<MessageView>("send_message", { personaId, content });
  }
  markRead(personaId: string) {
    return call<void>("mark_read", { personaId });
  }
  verifyLedger() {
    return call<VerifyView>("verify_ledger");
  }
  keyStatus() {
    return call<KeyStatusView[]>("key_status");
  }
  rotateMissingKeys() {
    return call<KeyReplacementView[]>("rotate_missing_keys");
  }
  listEvents(beforeSeq: number | null, limit: number) {
    return call<EventView[]>("list_events", { beforeSeq, limit });
  }
  listAccounts() {
    return call<AccountView[]>("list_accounts");
  }
  addAccount(account: NewAccount) {
    return call<AccountView>("add_account", { account });
  }
  removeAccount(name: string) {
    return call<void>("remove_account", { name });
  }
  listModels() {
    return call<ModelView[]>("list_models");
  }
  importModel(path: string) {
    return call<ModelView>("import_model", { path });
  }
  browseFolder(path: string | null, extensions: string[]) {
    return call<FolderView>("browse_folder", { path, extensions });
  }
  listCheckpoints() {
    return call<CheckpointView[]>("list_checkpoints");
  }
  saveCheckpoint(slot: number, name: string) {
    return call<CheckpointView>("save_checkpoint", { slot, name });
  }
  deleteCheckpoint(slot: number) {
    return call<void>("delete_checkpoint", { slot });
  }
  restoreCheckpoint(slot: number) {
    return call<ReceiptView>("restore_checkpoint", { slot });
  }
  undoRestore() {
    return call<ReceiptView>("undo_restore");
  }
  exportProfile(path: string, passphrase: string) {
    return call<ExportView>("export_profile", { path, passphrase });
  }
  importProfile(path: string, passphrase: string, replace: boolean) {
    return call<ImportView>("import_profile", { path, passphrase, replace });
  }
  restartApp() {
    return call<void>("restart_app");
  }

  forgetMessage(messageId: string) {
    return call<void>("forget_message", { messageId });
  }

  archivePersona(personaId: string, archived: boolean) {
    return call<void>("archive_persona", { personaId, archived });
  }

  deletePersona(personaId: string, withHumanData: boolean) {
    return call<void>("delete_persona", { personaId, withHumanData });
  }

  prefetchDraft(text: string, personaId?: string) {
    return call<void>("prefetch_draft", { text, personaId: personaId ?? null });
  }

  keepPageState(key: string, text: string) {
    return call<void>("keep_page_state", { key, text });
  }

  keptPageState(key: string) {
    return call<string>("kept_page_state", { key });
  }

  getReceipt(seq: number) {
    return call<ReceiptView>("get_receipt", { seq });
  }
  listItems(query: string | null) {
    return call<ItemView[]>("list_items", { query });
  }
  pendingProposal(personaId: string) {
    return call<ProposalView | null>("pending_proposal", { personaId });
  }
  awaitingInput(personaId: string) {
    return call<AwaitingInputView | null>("awaiting_input", { personaId });
  }
  confirmProposal(personaId: string, nonce: string) {
    return call<ToolResultView>("confirm_proposal", { personaId, nonce });
  }
  rejectProposal(personaId: string) {
    return call<boolean>("reject_proposal", { personaId });
  }
  getMetadataService() {
    return call<MetadataServiceView>("get_metadata_service");
  }
  setMetadataService(baseUrl: string, apiKey: string) {
    return call<MetadataServiceView>("set_metadata_service", { baseUrl, apiKey });
  }
  listToolSettings() {
    return call<ToolSettingView[]>("list_tool_settings");
  }
  setToolEnabled(tool: string, enabled: boolean) {
    return call<ToolSettingView[]>("set_tool_enabled", { tool, enabled });
  }

  // documents
  importDocuments(paths: string[], watch = false) {
    return call<string>("import_documents", { paths, watch });
  }
  cancelImport(importId: string) {
    return call<boolean>("cancel_import", { importId });
  }
  listDocuments() {
    return call<DocumentItemView[]>("list_documents");
  }
  removeDocument(id: number) {
    return call<void>("remove_document", { id });
  }
  setDocumentGroups(id: number, groups: string[]) {
    return call<void>("set_document_groups", { id, groups });
  }
  searchDocuments(query: string, k: number) {
    return call<DocumentHitView[]>("search_documents", { query, k });
  }
  messageCitations(messageId: string) {
    return call<CitationView[]>("message_citations", { messageId });
  }
  documentPassage(chunkId: number) {
    return call<PassageView>("document_passage", { chunkId });
  }

  desktopSettings() {
    return call<DesktopView>("desktop_settings");
  }
  setDesktopSettings(settings: DesktopSettings) {
    return call<DesktopView>("set_desktop_settings", { settings });
  }
  modelChoices(needs: ModelNeeds) {
    return call<ModelChoiceView[]>("model_choices", { needs });
  }
  pullModel(id: string) {
    return call<void>("pull_model", { id });
  }
  measureModelSpeed(id: string) {
    return call<SpeedView>("measure_model_speed", { id });
  }
  cancelModelPull(id: string) {
    return call<boolean>("cancel_model_pull", { id });
  }
  removeModel(id: string) {
    return call<void>("remove_model", { id });
  }
  useModel(id: string) {
    return call<PersonaView[]>("use_model", { id });
  }
  localServers() {
    return call<ServerView[]>("local_servers");
  }
  addServerAccount(url: string, model: string, apiKey: string) {
    return call<AccountView>("add_server_account", { url, model, apiKey });
  }
  startAtLogin() {
    return call<boolean>("start_at_login");
  }
  setStartAtLogin(enabled: boolean) {
    return call<boolean>("set_start_at_login", { enabled });
  }
  voiceLatest() {
    return call<VoiceEvent[]>("voice_latest");
  }

  async onVoiceEvent(handler: (event: VoiceEvent) => void): Promise<() => void> {
    return listen<VoiceEvent>("voice://event", (event) => handler(event.payload));
  }
  voiceTalk() {
    return call<void>("voice_talk");
  }
  voiceStop() {
    return call<void>("voice_stop");
  }
  voiceDevices() {
    return call<VoiceDeviceView[]>("voice_devices");
  }
  async onDragDrop(handler: (event: DragDropEvent) => void): Promise<() => void> {
    return getCurrentWebview().onDragDropEvent((event) => {
      const payload = event.payload;
      switch (payload.type) {
        case "enter":
          handler({ type: "enter", paths: payload.paths });
          break;
        case "over":
          handler({ type: "over" });
          break;
        case "drop":
          handler({ type: "drop", paths: payload.paths });
          break;
        case "leave":
          handler({ type: "leave" });
          break;
      }
    });
  }
  // ---- memory ----
  listMemories(personaId: string | null, includeSuperseded: boolean) {
    return call<MemoryView[]>("list_memories", { personaId, includeSuperseded });
  }
  confirmMemory(id: string) {
    return call<MemoryView>("confirm_memory", { id });
  }
  editMemory(id: string, text: string) {
    return call<MemoryView>("edit_memory", { id, text });
  }
  forgetMemory(id: string) {
    return call<void>("forget_memory", { id });
  }
  memoriesUsed(messageId: string) {
    return call<UsedItemView[]>("memories_used", { messageId });
  }
  personaGroups(personaId: string) {
    return call<PersonaGroupsView>("persona_groups", { personaId });
  }
  setPersonaGroups(personaId: string, groupPrimary: string, groupsVisible: string[]) {
    return call<PersonaGroupsView>("set_persona_groups", { personaId, groupPrimary, groupsVisible });
  }
  queueView() {
    return call<QueueView>("queue_view");
  }
  pauseQueue() {
    return call<void>("pause_queue");
  }
  resumeQueue() {
    return call<void>("resume_queue");
  }
  abortCurrent() {
    return call<boolean>("abort_current");
  }
  // ---- memory: persona management and chat state ----
  personaProfile(personaId: string) {
    return call<PersonaProfileView>("persona_profile", { personaId });
  }
  updatePersona(personaId: string, edit: PersonaEdit) {
    return call<PersonaProfileView>("update_persona", { personaId, edit });
  }
  pausePersona(personaId: string, until: string | null) {
    return call<PersonaView>("pause_persona", { personaId, until });
  }
  listArchivedPersonas() {
    return call<PersonaView[]>("list_archived_personas");
  }
  setMessageContext(messageId: string, status: string) {
    return call<MessageView>("set_message_context", { messageId, status });
  }
  recallMessage(messageId: string) {
    return call<string>("recall_message", { messageId });
  }
  setQueuePriority(id: string, priority: string) {
    return call<void>("set_queue_priority", { id, priority });
  }
  ceremonySettings() {
    return call<CeremonySettingsView>("ceremony_settings");
  }
  setCeremonyTime(time: string) {
    return call<CeremonySettingsView>("set_ceremony_time", { time });
  }
  // ---- office ----
  whyReply(messageId: string) {
    return call<WhyView>("why_reply", { messageId });
  }
  endSession(personaId: string) {
    return call<HandoverView | null>("end_session", { persona: personaId });
  }
  listHandovers(personaId: string) {
    return call<HandoverView[]>("list_handovers", { persona: personaId });
  }
  getConstitution(personaId: string) {
    return call<ConstitutionView | null>("get_constitution", { persona: personaId });
  }
  setConstitution(personaId: string, coreDirective: string, overrides: string[]) {
    return call<ConstitutionView>("set_constitution", { persona: personaId, coreDirective, overrides });
  }
  listObligations(personaId: string) {
    return call<ObligationView[]>("list_obligations", { persona: personaId });
  }
  completeObligation(id: string) {
    return call<void>("complete_obligation", { id });
  }
  tokenUsage() {
    return call<TokenUsageView[]>("token_usage");
  }
  setTokenQuota(personaId: string, dailyLimit: number) {
    return call<void>("set_token_quota", { persona: personaId, dailyLimit });
  }
  sessionMode(personaId: string) {
    return call<SessionModeView>("session_mode", { persona: personaId });
  }
  setSessionMode(personaId: string, sessionType: string, mode: string) {
    return call<SessionModeView>("set_session_mode", { persona: personaId, sessionType, mode });
  }
  createObligation(personaId: string, text: string, dueAt: string | null, kind: string) {
    return call<ObligationView>("add_obligation", { persona: personaId, text, dueAt, kind });
  }
  simulateProposal(personaId: string, nonce: string) {
    return call<SimulationView>("simulate_proposal", { persona: personaId, nonce });
  }
}
