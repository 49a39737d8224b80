//! The desktop shell's own settings: what closing the window does and the
//! global voice shortcut. They belong to this machine's install, not to the
//! ledger (nothing a persona did), so they live in a small JSON file in the
//! data directory, written atomically.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::{AppError, DataDir};

/// The shortcut a fresh install offers for talking to a persona.
pub const DEFAULT_SHORTCUT: &str = "Ctrl+Shift+Space";

/// How the global shortcut drives the microphone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS, Default)]
#[serde(rename_all = "snake_case")]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub enum ShortcutMode {
    /// Talk while the keys are held; release to send.
    #[default]
    Hold,
    /// Press once to start, again to stop.
    Toggle,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(default)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct DesktopSettings {
    /// Closing the window keeps Ledgermind in the tray (false: closing quits).
    pub close_to_tray: bool,
    /// The global shortcut, in the accelerator syntax ("Ctrl+Shift+Space").
    pub shortcut: String,
    pub shortcut_mode: ShortcutMode,
    pub voice: VoiceSettings,
}

impl Default for DesktopSettings {
    fn default() -> Self {
        Self {
            close_to_tray: true,
            shortcut: DEFAULT_SHORTCUT.to_owned(),
            shortcut_mode: ShortcutMode::Hold,
            voice: VoiceSettings::default(),
        }
    }
}

/// How the voice assistant listens and speaks on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, TS)]
#[serde(default)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct VoiceSettings {
    /// A device id from the device list; None: the system's default.
    pub input_device: Option<String>,
    pub output_device: Option<String>,
    /// Speaking rate in percent of the voice's normal speed (50 to 200).
    pub rate_percent: u16,
    /// Speaking over the reply interrupts it.
    pub barge_in: bool,
    /// The person wears headphones: the microphone cannot hear the reply,
    /// so barge-in is safe without an echo canceller.
    pub headphones: bool,
    /// The language the person speaks to the persona.
    pub language: VoiceLanguage,
}

impl Default for VoiceSettings {
    fn default() -> Self {
        Self {
            input_device: None,
            output_device: None,
            rate_percent: 100,
            barge_in: true,
            headphones: false,
            language: VoiceLanguage::En,
        }
    }
}

/// The language spoken to the persona, which decides the recogniser: the
/// English-only one is the fastest and hears English best, Portuguese
/// needs the multilingual one, and so does telling the two apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, TS, Default)]
#[serde(rename_all = "snake_case")]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub enum VoiceLanguage {
    Pt,
    /// English or Portuguese, told apart turn by turn.
    Auto,
    /// Also a language this version does not know (a newer one wrote it),
    /// rather than the other settings lost with it (serde reads an unknown
    /// value as the last variant only).
    #[default]
    #[serde(other)]
    En,
}

impl VoiceLanguage {
    /// What the recogniser listens for, and the voice of a reply whose
    /// turn was not heard as Portuguese (one that was is answered in it).
    pub fn listen_and_speak(self) -> (voice::LanguageChoice, voice::Language) {
        use voice::{Language, LanguageChoice};
        match self {
            Self::En => (LanguageChoice::Fixed(Language::En), Language::En),
            Self::Pt => (LanguageChoice::Fixed(Language::Pt), Language::Pt),
            Self::Auto => (LanguageChoice::Auto, Language::En),
        }
    }
}

impl VoiceSettings {
    /// Barge-in is only listened for when the reply cannot reach the
    /// microphone (headphones): the desktop turn has no echo canceller yet.
    pub fn listens_during_reply(&self) -> bool {
        self.barge_in && self.headphones
    }
}

/// What the shell could make of the settings on this machine, for the
/// Settings view: a shortcut that cannot work says why instead of failing
/// silently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, TS)]
#[ts(export, export_to = "../../../ui/src/lib/bindings/")]
pub struct DesktopView {
    pub settings: DesktopSettings,
    /// The tray icon is shown (false when no tray host could be reached).
    pub tray: bool,
    /// The global shortcut is registered and will fire with the window hidden.
    pub shortcut_active: bool,
    /// Why the shortcut is not active, in plain words (None when it is).
    pub shortcut_problem: Option<String>,
}

impl DesktopSettings {
    fn path(data_dir: &DataDir) -> PathBuf {
        data_dir.root().join("desktop.json")
    }

    /// The saved settings; defaults when there is no file. A file that cannot
    /// be read as settings is kept aside (`desktop.json.bad`) rather than
    /// silently overwritten, and the defaults are used.
    pub fn load(data_dir: &DataDir) -> Self {
        let path = Self::path(data_dir);
        let Ok(text) = std::fs::read_to_string(&path) else { return Self::default() };
        match serde_json::from_str::<Self>(&text) {
            Ok(settings) => settings.normalised(),
            Err(e) => {
                tracing::warn!("desktop settings unreadable ({e}); using defaults, the file is kept as desktop.json.bad");
                let _ = std::fs::rename(&path, path.with_extension("json.bad"));
                Self::default()
            }
        }
    }

    /// Writes the settings (a temporary file renamed over the old one, so a
    /// crash leaves either the old or the new settings, never half of them).
    pub fn save(&self, data_dir: &DataDir) -> Result<(), AppError> {
        let path = Self::path(data_dir);
        crate::paths::write_atomically(&path, &serde_json::to_vec_pretty(&self.clone().normalised()).unwrap_or_default())
            .map_err(|e| AppError::new("STORAGE_SAVE_FAILED", format!("could not save the desktop settings: {e}")))
    }

    /// Trims the shortcut (an empty one falls back to the default), keeps
    /// the speech rate within what the synthesiser can say, and forgets
    /// empty device names.
    pub fn normalised(mut self) -> Self {
        self.shortcut = self.shortcut.trim().to_owned();
        if self.shortcut.is_empty() {
            self.shortcut = DEFAULT_SHORTCUT.to_owned();
        }
        self.voice.rate_percent = self.voice.rate_percent.clamp(50, 200);
        for device in [&mut self.voice.input_device, &mut self.voice.output_device] {
            if device.as_deref().is_some_and(|d| d.trim().is_empty()) {
                *device = None;
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_and_default_when_absent() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = DataDir::new(dir.path());
        assert_eq!(DesktopSettings::load(&data), DesktopSettings::default());
        let chosen = DesktopSettings {
            close_to_tray: false,
            shortcut: " Alt+F9 ".into(),
            shortcut_mode: ShortcutMode::Toggle,
            voice: VoiceSettings {
                input_device: Some("alsa:hw:1".into()),
                output_device: Some(" ".into()),
                rate_percent: 400,
                barge_in: false,
                headphones: true,
                language: VoiceLanguage::Pt,
            },
        };
        chosen.save(&data).expect("save");
        let read = DesktopSettings::load(&data);
        assert_eq!(read.shortcut, "Alt+F9");
        assert!(!read.close_to_tray);
        assert_eq!(read.shortcut_mode, ShortcutMode::Toggle);
        assert_eq!(read.voice.input_device.as_deref(), Some("alsa:hw:1"));
        assert_eq!(read.voice.output_device, None);
        assert_eq!(read.voice.rate_percent, 200);
        assert!(!read.voice.listens_during_reply());
        assert_eq!(read.voice.language, VoiceLanguage::Pt);
    }

    #[test]
    fn a_voice_language_this_version_does_not_know_is_read_as_english() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = DataDir::new(dir.path());
        let text = br#"{"close_to_tray": false, "voice": {"rate_percent": 120, "language": "fr"}}"#;
        std::fs::write(dir.path().join("desktop.json"), text).expect("write");
        let read = DesktopSettings::load(&data);
        assert_eq!(read.voice.language, VoiceLanguage::En);
        // The rest of the file is kept, not thrown away with the unknown value.
        assert!(!read.close_to_tray);
        assert_eq!(read.voice.rate_percent, 120);
    }

    #[test]
    fn an_unreadable_file_is_kept_aside_and_defaults_are_used() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = DataDir::new(dir.path());
        std::fs::write(dir.path().join("desktop.json"), b"{not json").expect("write");
        assert_eq!(DesktopSettings::load(&data), DesktopSettings::default());
        assert!(dir.path().join("desktop.json.bad").exists());
    }

    #[test]
    fn missing_fields_take_their_defaults() {
        let dir = tempfile::tempdir().expect("tempdir");
        let data = DataDir::new(dir.path());
        std::fs::write(dir.path().join("desktop.json"), br#"{"close_to_tray": false}"#).expect("write");
        let read = DesktopSettings::load(&data);
        assert!(!read.close_to_tray);
        assert_eq!(read.shortcut, DEFAULT_SHORTCUT);
        assert_eq!(read.voice, VoiceSettings::default());
    }
}
