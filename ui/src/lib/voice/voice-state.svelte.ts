//! What the voice overlay shows: the state of the running voice turn, the
//! microphone level, what was heard and the reply as it is spoken. Fed by
//! the shell's `voice://event` stream (typed `VoiceEvent`).

import type { Backend } from "../backend";
import { errorMessage } from "../backend";
import type { VoiceEvent } from "../bindings/VoiceEvent";
import type { VoiceState } from "../bindings/VoiceState";

export class VoiceOverlayState {
  state = $state<VoiceState>("idle");
  level = $state(0);
  heard = $state("");
  spoken = $state("");
  error = $state<string | null>(null);
  interrupted = $state(false);
  /** Shown from the start of a turn until the person closes it (or the next turn). */
  open = $state(false);

  constructor(private backend: Backend) {}

  get active(): boolean {
    return this.state === "listening" || this.state === "thinking" || this.state === "speaking";
  }

  handle(event: VoiceEvent): void {
    switch (event.type) {
      case "state":
        if (event.state === "listening") {
          this.heard = "";
          this.spoken = "";
          this.error = null;
          this.interrupted = false;
          this.open = true;
        }
        if ((event.state === "muted" || event.state === "error") && !this.active) {
          // Not a turn of its own (a muted microphone, a turn that could not
          // start): the words on show belong to an earlier turn.
          this.heard = "";
          this.spoken = "";
          this.interrupted = false;
        }
        if (event.state === "muted" || event.state === "error") this.open = true;
        this.state = event.state;
        if (event.state !== "listening" && event.state !== "speaking") this.level = 0;
        break;
      case "level":
        this.level = event.level;
        break;
      case "heard":
        this.heard = event.text;
        break;
      case "spoken":
        this.spoken = event.text;
        break;
      case "turn_ended":
        this.heard = event.heard;
        this.spoken = event.spoken;
        this.interrupted = event.interrupted;
        break;
      case "failed":
        this.error = event.message;
        this.open = true;
        break;
    }
  }

  async talk(): Promise<void> {
    try {
      await this.backend.voiceTalk();
    } catch (error) {
      this.error = errorMessage(error);
      this.open = true;
    }
  }

  async stop(): Promise<void> {
    try {
      await this.backend.voiceStop();
    } catch (error) {
      this.error = errorMessage(error);
    }
  }

  close(): void {
    if (this.active) void this.stop();
    this.open = false;
  }
}
