//! Voice turns from the tray's Talk and the global shortcut: one turn at a
//! time on its own thread, through `app::voice` (no voice logic here). Each
//! step is emitted to the web view as `voice://event` (the overlay) and
//! drawn on the tray icon.
//!
//! The microphone and speaker: the sound card chosen in Settings (or the
//! system's default), opened for each turn; a machine without one gets a
//! plain "no microphone found" error. `LEDGERMIND_TEST_VOICE_INPUT` names a
//! WAV file to use instead (tests and headless machines only; the file is
//! played at the speed of a real microphone).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use app::voice::{run_turn, Duplex, Paced, PersonaResponder, TurnConfig, TurnControl, VoiceEvent, VoiceState};
use tauri::{AppHandle, Emitter, Manager, Runtime};
use voice::audio::WavLoopback;
use voice::models::{recogniser_for, recogniser_name, whisper_for};
use voice::{EspeakNg, Language, LanguageChoice, VoiceError};

use crate::desktop::{self, Desktop, TrayState};

pub const VOICE_EVENT: &str = "voice://event";
/// Test-only: a WAV file that stands in for the microphone (while it exists).
const TEST_INPUT_ENV: &str = "LEDGERMIND_TEST_VOICE_INPUT";
/// Test-only: where to write what the speaker played during the last turn.
const TEST_OUTPUT_ENV: &str = "LEDGERMIND_TEST_VOICE_OUTPUT";

/// The running turn (if any) and the loaded recogniser with its name, kept
/// between turns (a change of language in Settings may need another).
#[derive(Default)]
pub struct VoiceShell {
    turn: Mutex<Option<Running>>,
    whisper: Arc<Mutex<Option<(String, Recogniser)>>>,
    /// The latest turn's steps (not its level readings), so a page made
    /// anew (the hidden window's released web view shown again) can show
    /// what happened while it was away.
    latest: Mutex<Vec<VoiceEvent>>,
}

type Recogniser = Box<dyn voice::SpeechToText + Send>;

struct Running {
    control: TurnControl,
    state: VoiceState,
}

impl VoiceShell {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Running>> {
        self.turn.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub fn active(&self) -> bool {
        self.lock().is_some()
    }

    /// The latest turn's steps, in order.
    pub fn latest(&self) -> Vec<VoiceEvent> {
        self.latest.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn remember(&self, event: &VoiceEvent) {
        // A turn's steps are a few dozen; the cap only guards a stuck turn.
        const MOST: usize = 256;
        let mut latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            VoiceEvent::Level { .. } => return,
            // A new turn (or a turn that could not start) replaces the last one.
            VoiceEvent::State { state: VoiceState::Listening | VoiceState::Muted, .. } => latest.clear(),
            _ if latest.len() >= MOST => return,
            _ => {}
        }
        latest.push(event.clone());
    }
}

/// Whether a voice turn can be tried: the recogniser is installed.
pub fn available(data_dir: &app::DataDir) -> bool {
    whisper_for(&data_dir.models(), LanguageChoice::Fixed(Language::En)).is_ok()
}

fn tell<R: Runtime>(app: &AppHandle<R>, event: &VoiceEvent) {
    let _ = app.emit(VOICE_EVENT, event);
    if let Some(shell) = app.try_state::<VoiceShell>() {
        shell.remember(event);
    }
    if let VoiceEvent::State { state, .. } = event {
        if let Some(shell) = app.try_state::<VoiceShell>() {
            let mut turn = shell.lock();
            if let Some(r) = turn.as_mut() {
                r.state = *state;
            }
        }
        let muted = app.try_state::<Desktop>().is_some_and(|d| d.muted());
        desktop::set_tray_state(
            app,
            match state {
                VoiceState::Idle if muted => TrayState::Muted,
                VoiceState::Idle => TrayState::Idle,
                VoiceState::Listening | VoiceState::Thinking => TrayState::Listening,
                VoiceState::Speaking => TrayState::Speaking,
                VoiceState::Muted => TrayState::Muted,
                VoiceState::Error => TrayState::Error,
            },
        );
    }
}

fn fail<R: Runtime>(app: &AppHandle<R>, e: &VoiceError) {
    tell(app, &VoiceEvent::Failed { code: e.code().to_owned(), message: e.to_string() });
    tell(app, &VoiceEvent::State { state: VoiceState::Error, persona_id: None });
}

/// Talk: starts a turn, or when one runs, ends it (Stop).
pub fn talk_or_stop<R: Runtime>(app: &AppHandle<R>) {
    let Some(shell) = app.try_state::<VoiceShell>() else { return };
    if shell.active() {
        stop(app);
    } else {
        start(app);
    }
}

/// Stop: ends the listening, the thinking or the reply at once.
pub fn stop<R: Runtime>(app: &AppHandle<R>) {
    if let Some(shell) = app.try_state::<VoiceShell>() {
        if let Some(r) = shell.lock().as_ref() {
            r.control.stop();
        }
    }
}

/// The global shortcut. Hold: pressed starts (or cuts a reply), released
/// sends what was said. Toggle: a press starts, the next one sends what was
/// said while listening, or stops the turn after that.
pub fn on_shortcut<R: Runtime>(app: &AppHandle<R>, pressed: bool, hold: bool) {
    let Some(shell) = app.try_state::<VoiceShell>() else { return };
    let running = shell.lock().as_ref().map(|r| (r.control.clone(), r.state));
    match (running, pressed, hold) {
        (None, true, _) => start(app),
        (Some((control, VoiceState::Listening)), false, true) | (Some((control, VoiceState::Listening)), true, false) => {
            control.release()
        }
        (Some((control, _)), true, _) => control.stop(),
        _ => {}
    }
}

/// Starts a turn with the persona chosen in the tray.
pub fn start<R: Runtime>(app: &AppHandle<R>) {
    let (Some(shell), Some(desktop)) = (app.try_state::<VoiceShell>(), app.try_state::<Desktop>()) else { return };
    if desktop.muted() {
        tell(app, &VoiceEvent::Failed {
            code: "VOICE_MUTED".into(),
            message: "the microphone is muted: untick Mute microphone in the tray".into(),
        });
        tell(app, &VoiceEvent::State { state: VoiceState::Muted, persona_id: None });
        return;
    }
    let Some(engine) = app.try_state::<crate::Backend>().and_then(|b| b.started()) else {
        fail(app, &VoiceError::Device("Ledgermind is still starting; try again in a moment".into()));
        return;
    };
    let Some(persona) = desktop.persona() else {
        fail(app, &VoiceError::Device("there is no persona to talk to yet: create one first".into()));
        return;
    };
    let control = TurnControl::new();
    {
        let mut turn = shell.lock();
        if turn.is_some() {
            return;
        }
        *turn = Some(Running { control: control.clone(), state: VoiceState::Listening });
    }
    desktop::set_talking(app, true);
    let settings = desktop.settings().voice;
    let models = desktop.data_dir().models();
    let (listen, speak) = settings.language.listen_and_speak();
    let config = TurnConfig {
        listen,
        speak,
        rate: f32::from(settings.rate_percent) / 100.0,
        barge_in: settings.listens_during_reply(),
        persona_id: Some(persona.clone()),
        // Silero's certainty lets a finished sentence end the turn early.
        silero_models: Some(models.clone()),
        ..TurnConfig::default()
    };
    let whisper = shell.whisper.clone();
    let app = app.clone();
    let runtime = tauri::async_runtime::handle().inner().clone();
    // The persona's model loads while the person speaks, not after.
    {
        let (conversation, persona) = (engine.conversation().clone(), persona.clone());
        runtime.spawn(async move { conversation.warm_up(&persona).await });
    }
    std::thread::spawn(move || {
        let result = (|| -> Result<(), VoiceError> {
            let mut audio = open_audio(settings.input_device.as_deref(), settings.output_device.as_deref())?;
            let mut guard = whisper.lock().unwrap_or_else(|p| p.into_inner());
            let wanted = recogniser_name(&models, listen)?;
            if guard.as_ref().is_none_or(|(name, _)| *name != wanted) {
                // The one loaded for another language is let go first.
                *guard = None;
                *guard = Some(load_recogniser(&models, listen)?);
            }
            let Some((_, stt)) = guard.as_mut() else { return Ok(()) };
            let stt = stt.as_mut();
            let mut responder = PersonaResponder::new(engine.conversation().clone(), persona, runtime);
            let tts = EspeakNg::default();
            let io: &mut dyn Duplex = match &mut audio {
                Audio::File(io) => io,
                Audio::Live(io) => io,
            };
            // run_turn tells its own failure (Failed, then the error state).
            let outcome = run_turn(io, stt, &mut responder, &tts, &config, &control, &mut |e| tell(&app, &e));
            if let (Ok(path), Audio::File(io)) = (std::env::var(TEST_OUTPUT_ENV), audio) {
                let played = voice::wav::Pcm { samples: io.into_inner().played().to_vec(), rate: voice::SAMPLE_RATE };
                let _ = voice::wav::write_pcm16(&PathBuf::from(path), &played);
            }
            match outcome {
                Ok(_) => Ok(()),
                Err(e) => {
                    tracing::warn!("voice turn failed: {e}");
                    Ok(())
                }
            }
        })();
        if let Err(e) = result {
            tracing::warn!("voice turn could not start: {e}");
            fail(&app, &e);
        }
        if let Some(shell) = app.try_state::<VoiceShell>() {
            *shell.lock() = None;
        }
        desktop::set_talking(&app, false);
    });
}

/// The recogniser for `listen`, with its name, timed in the log.
fn load_recogniser(models: &std::path::Path, listen: LanguageChoice) -> Result<(String, Recogniser), VoiceError> {
    let started = std::time::Instant::now();
    let (recogniser, name) = recogniser_for(models, listen)?;
    tracing::info!(ms = started.elapsed().as_millis() as u64, model = %name, "voice: recogniser loaded");
    Ok((name, recogniser))
}

enum Audio {
    File(Paced<WavLoopback>),
    Live(voice::live::LiveAudio),
}

/// The microphone and speaker of a turn: the test file when one is named
/// and exists, else the sound card's devices chosen in Settings (None: the
/// default). A named file that is gone means the sound card, so a test can
/// take its microphone away mid-run and meet the machine's real devices.
fn open_audio(input: Option<&str>, output: Option<&str>) -> Result<Audio, VoiceError> {
    match std::env::var(TEST_INPUT_ENV) {
        Ok(path) if std::path::Path::new(&path).exists() => open_test_audio(&path),
        _ => Ok(Audio::Live(voice::live::open(input, output)?)),
    }
}

fn open_test_audio(path: &str) -> Result<Audio, VoiceError> {
    let pcm = voice::wav::read_mono(std::path::Path::new(path), voice::SAMPLE_RATE)?;
    Ok(Audio::File(Paced::new(WavLoopback::new(pcm, None))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_test_input_file_is_an_error_not_a_panic() {
        let missing = std::env::temp_dir().join(format!("ledgermind-no-such-{}.wav", std::process::id()));
        let missing = missing.display().to_string();
        assert!(open_test_audio(&missing).is_err());
    }
}
