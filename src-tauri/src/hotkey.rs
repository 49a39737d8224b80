//! The global shortcut on Linux: a key grab on the X root window, and one
//! thread that sleeps inside the X connection until a key arrives.
//!
//! Why not `tauri-plugin-global-shortcut` here: its X11 backend wakes every
//! 50 ms to poll for keys, twenty wake-ups a second while the app sits idle
//! in the tray. This one blocks in `wait_for_event` and costs nothing until
//! the keys are pressed. The plugin still parses the combination (and does
//! the work on the other systems).

use std::sync::{Arc, Mutex};

use tauri_plugin_global_shortcut::{Code, Modifiers, Shortcut};
use x11rb::connection::Connection;
use x11rb::errors::ReplyError;
use x11rb::protocol::xkb::{self, ConnectionExt as _};
use x11rb::protocol::xproto::{ConnectionExt as _, GrabMode, KeyButMask, Keycode, ModMask, Window};
use x11rb::protocol::{ErrorKind, Event};
use x11rb::rust_connection::RustConnection;

/// Why the shortcut's keys could not be listened to at all.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("no X display: {0}")]
    NoDisplay(#[from] x11rb::errors::ConnectError),
    #[error("the X server: {0}")]
    Connection(#[from] x11rb::errors::ConnectionError),
    #[error("the X keyboard extension: {0}")]
    Keyboard(#[from] ReplyError),
    #[error("cannot start the listening thread: {0}")]
    Thread(std::io::Error),
}

/// Why a combination could not be grabbed.
#[derive(Debug)]
pub enum GrabError {
    /// Another X client holds these keys.
    Taken,
    /// The key has no key code on this keyboard, or X refused otherwise.
    Failed(String),
}

impl std::fmt::Display for GrabError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Taken => f.write_str("another program already uses these keys"),
            Self::Failed(why) => f.write_str(why),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Grab {
    keycode: Keycode,
    mods: ModMask,
}

/// The shortcut's X connection and its listening thread.
pub struct X11Shortcut {
    conn: Arc<RustConnection>,
    root: Window,
    grab: Arc<Mutex<Option<Grab>>>,
}

/// X counts NumLock and CapsLock as modifiers: the same keys are grabbed
/// with each of them on too.
fn lock_variants() -> [ModMask; 4] {
    [ModMask::default(), ModMask::M2, ModMask::LOCK, ModMask::M2 | ModMask::LOCK]
}

impl X11Shortcut {
    /// Connects to the X display and starts the listening thread, which
    /// calls `on_key(true)` when the combination goes down and
    /// `on_key(false)` when it is released.
    pub fn start(on_key: impl Fn(bool) + Send + 'static) -> Result<Self, StartError> {
        let (conn, screen) = RustConnection::connect(None)?;
        // A held key repeats as presses alone, without a release between them.
        conn.xkb_use_extension(1, 0)?.reply()?;
        conn.xkb_per_client_flags(
            xkb::ID::USE_CORE_KBD.into(),
            xkb::PerClientFlag::DETECTABLE_AUTO_REPEAT,
            xkb::PerClientFlag::DETECTABLE_AUTO_REPEAT,
            xkb::BoolCtrl::default(),
            xkb::BoolCtrl::default(),
            xkb::BoolCtrl::default(),
        )?
        .reply()?;
        let root = conn.setup().roots[screen].root;
        let conn = Arc::new(conn);
        let grab = Arc::new(Mutex::new(None::<Grab>));
        let (listener, grabbed) = (conn.clone(), grab.clone());
        std::thread::Builder::new()
            .name("global-shortcut".into())
            .spawn(move || listen(&listener, &grabbed, on_key))
            .map_err(StartError::Thread)?;
        Ok(Self { conn, root, grab })
    }

    /// Grabs `shortcut` instead of the current one.
    pub fn register(&self, shortcut: &Shortcut) -> Result<(), GrabError> {
        self.unregister();
        let keysym = keysym(shortcut.key).ok_or_else(|| GrabError::Failed(format!("the key {} is not supported", shortcut.key)))?;
        let keycode = self.keycode(keysym)?.ok_or_else(|| GrabError::Failed(format!("this keyboard has no {} key", shortcut.key)))?;
        let wanted = Grab { keycode, mods: x11_mods(shortcut.mods) };
        for variant in lock_variants() {
            let checked = self
                .conn
                .grab_key(false, self.root, wanted.mods | variant, keycode, GrabMode::ASYNC, GrabMode::ASYNC)
                .map_err(|e| GrabError::Failed(e.to_string()))?
                .check();
            if let Err(e) = checked {
                self.ungrab(wanted);
                return Err(match e {
                    ReplyError::X11Error(x) if x.error_kind == ErrorKind::Access => GrabError::Taken,
                    other => GrabError::Failed(other.to_string()),
                });
            }
        }
        *self.lock() = Some(wanted);
        Ok(())
    }

    /// Lets go of the current combination, if any.
    pub fn unregister(&self) {
        let previous = self.lock().take();
        if let Some(grab) = previous {
            self.ungrab(grab);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Grab>> {
        self.grab.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ungrab(&self, grab: Grab) {
        for variant in lock_variants() {
            if let Ok(cookie) = self.conn.ungrab_key(grab.keycode, self.root, grab.mods | variant) {
                cookie.ignore_error();
            }
        }
        let _ = self.conn.flush();
    }

    fn keycode(&self, keysym: u32) -> Result<Option<Keycode>, GrabError> {
        let setup = self.conn.setup();
        let (min, max) = (setup.min_keycode, setup.max_keycode);
        let mapping = self
            .conn
            .get_keyboard_mapping(min, max - min + 1)
            .map_err(|e| GrabError::Failed(e.to_string()))?
            .reply()
            .map_err(|e| GrabError::Failed(e.to_string()))?;
        let per_keycode = usize::from(mapping.keysyms_per_keycode.max(1));
        Ok(mapping
            .keysyms
            .chunks(per_keycode)
            .position(|syms| syms.contains(&keysym))
            .and_then(|i| u8::try_from(i).ok())
            .map(|i| min + i))
    }
}

/// The listening thread: asleep in the X connection between events.
fn listen(conn: &RustConnection, grab: &Mutex<Option<Grab>>, on_key: impl Fn(bool)) {
    let relevant = KeyButMask::CONTROL | KeyButMask::SHIFT | KeyButMask::MOD1 | KeyButMask::MOD4;
    let mut down = false;
    loop {
        let event = match conn.wait_for_event() {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!("the global shortcut stopped listening: {e}");
                return;
            }
        };
        let current = *grab.lock().unwrap_or_else(|p| p.into_inner());
        let Some(current) = current else { continue };
        match event {
            Event::KeyPress(key) if key.detail == current.keycode => {
                let mods = ModMask::from(u16::from(key.state & relevant));
                if mods == current.mods && !down {
                    down = true;
                    on_key(true);
                }
            }
            Event::KeyRelease(key) if key.detail == current.keycode && down => {
                down = false;
                on_key(false);
            }
            _ => {}
        }
    }
}

fn x11_mods(mods: Modifiers) -> ModMask {
    let mut x = ModMask::default();
    if mods.contains(Modifiers::SHIFT) {
        x |= ModMask::SHIFT;
    }
    if mods.contains(Modifiers::CONTROL) {
        x |= ModMask::CONTROL;
    }
    if mods.contains(Modifiers::ALT) {
        x |= ModMask::M1;
    }
    if mods.intersects(Modifiers::SUPER | Modifiers::META) {
        x |= ModMask::M4;
    }
    x
}

/// The X keysym of a key: letters, digits and F-keys by name, the rest
/// from a table.
fn keysym(code: Code) -> Option<u32> {
    let name = code.to_string();
    if let Some(letter) = name.strip_prefix("Key").filter(|l| l.len() == 1) {
        return letter.chars().next().map(|c| u32::from(c.to_ascii_lowercase()));
    }
    if let Some(digit) = name.strip_prefix("Digit").filter(|d| d.len() == 1) {
        return digit.chars().next().map(u32::from);
    }
    if let Some(n) = name.strip_prefix('F').and_then(|n| n.parse::<u32>().ok()).filter(|n| (1..=24).contains(n)) {
        return Some(0xffbe + n - 1);
    }
    Some(match code {
        Code::Space => 0x20,
        Code::Quote => 0x27,
        Code::Comma => 0x2c,
        Code::Minus => 0x2d,
        Code::Period => 0x2e,
        Code::Slash => 0x2f,
        Code::Semicolon => 0x3b,
        Code::Equal => 0x3d,
        Code::BracketLeft => 0x5b,
        Code::Backslash => 0x5c,
        Code::BracketRight => 0x5d,
        Code::Backquote => 0x60,
        Code::Backspace => 0xff08,
        Code::Tab => 0xff09,
        Code::Enter => 0xff0d,
        Code::Escape => 0xff1b,
        Code::Home => 0xff50,
        Code::ArrowLeft => 0xff51,
        Code::ArrowUp => 0xff52,
        Code::ArrowRight => 0xff53,
        Code::ArrowDown => 0xff54,
        Code::PageUp => 0xff55,
        Code::PageDown => 0xff56,
        Code::End => 0xff57,
        Code::Insert => 0xff63,
        Code::Delete => 0xffff,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_map_to_their_x_keysyms() {
        assert_eq!(keysym(Code::KeyA), Some(0x61));
        assert_eq!(keysym(Code::Digit7), Some(0x37));
        assert_eq!(keysym(Code::F1), Some(0xffbe));
        assert_eq!(keysym(Code::F12), Some(0xffc9));
        assert_eq!(keysym(Code::Space), Some(0x20));
        assert_eq!(keysym(Code::NumpadAdd), None);
        let shortcut: Shortcut = "Ctrl+Shift+Space".parse().expect("a combination");
        assert_eq!(x11_mods(shortcut.mods), ModMask::CONTROL | ModMask::SHIFT);
    }
}
