//! Private keys live in the OS keychain, never in the database.

use thiserror::Error;

#[derive(Debug, Error, Clone)]
pub enum KeyStoreError {
    #[error("the OS keychain is not reachable ({0}). Ledgermind keeps signing keys and API keys only in the keychain and will not fall back to plaintext: start a Secret Service (e.g. gnome-keyring) and unlock it")]
    Unavailable(String),
    #[error("the OS keychain refused access ({0}); unlock it and try again")]
    Locked(String),
    #[error("keychain error: {0}")]
    Other(String),
}

/// A secret store. `account` names one secret inside Ledgermind's service.
pub trait KeyStore: Send + Sync {
    fn load(&self, account: &str) -> Result<Option<Vec<u8>>, KeyStoreError>;
    /// `load`, failing as `Locked` if the store has not answered within
    /// `deadline`. Stores that cannot hang just load.
    fn load_within(&self, account: &str, deadline: std::time::Duration) -> Result<Option<Vec<u8>>, KeyStoreError> {
        let _cannot_hang = deadline;
        self.load(account)
    }
    fn store(&self, account: &str, secret: &[u8]) -> Result<(), KeyStoreError>;
    fn delete(&self, account: &str) -> Result<(), KeyStoreError>;
}

/// The real OS keychain (Secret Service on Linux) through `keyring`.
///
/// Every call has a deadline ([`KEYCHAIN_TIMEOUT`]): a Secret Service that
/// waits on an unlock prompt nobody answers (a headless session, a daemon
/// restarted locked) would otherwise hold the calling thread, and with it
/// the app's async workers, for ever.
#[derive(Debug, Clone)]
pub struct KeyringStore {
    service: String,
    timeout: std::time::Duration,
}

/// How long one keychain call may take before it fails as `Locked`.
pub const KEYCHAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long reading a signing key or checking the keys may take. A read
/// that answers "no such key" returns at once; one that waits this long is
/// waiting on a locked keychain (an unlock prompt), and the person should
/// hear so within seconds, not after [`KEYCHAIN_TIMEOUT`]. The call goes on
/// in the background: once the prompt is answered, the next try succeeds.
pub const KEY_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(4);

impl KeyringStore {
    pub fn new(service: impl Into<String>) -> Self {
        Self { service: service.into(), timeout: KEYCHAIN_TIMEOUT }
    }

    /// Runs `op` on the entry for `account` on its own thread, giving up
    /// after the deadline (the thread is left to finish on its own).
    fn with_entry<T: Send + 'static>(
        &self,
        account: &str,
        op: impl Fn(keyring::Entry) -> Result<T, KeyStoreError> + Send + 'static,
    ) -> Result<T, KeyStoreError> {
        let (service, account) = (self.service.clone(), account.to_owned());
        with_deadline(self.timeout, move || {
            once_more_if_unreachable(|| op(keyring::Entry::new(&service, &account).map_err(map_keyring)?))
        })
    }

    /// Round-trips a probe secret to tell whether the keychain works now.
    pub fn probe(&self) -> Result<(), KeyStoreError> {
        let account = "probe";
        self.store(account, b"ok")?;
        let back = self.load(account)?;
        self.delete(account)?;
        match back.as_deref() {
            Some(b"ok") => Ok(()),
            _ => Err(KeyStoreError::Other("probe secret did not round-trip".into())),
        }
    }
}

/// How long to wait before asking a keychain that dropped a call again.
const RECONNECT_PAUSE: std::time::Duration = std::time::Duration::from_millis(300);

/// Runs `op`, and once more after a short pause if the Secret Service was
/// unreachable. gnome-keyring-daemon is known to crash when a client leaves
/// mid-call; the session bus (or systemd) starts it again, so the second
/// call usually reaches a live daemon instead of failing the person's action.
fn once_more_if_unreachable<T>(op: impl Fn() -> Result<T, KeyStoreError>) -> Result<T, KeyStoreError> {
    match op() {
        Err(KeyStoreError::Unavailable(first)) => {
            tracing::debug!(error = %first, "the keychain dropped a call; asking once more");
            std::thread::sleep(RECONNECT_PAUSE);
            op()
        }
        other => other,
    }
}

fn with_deadline<T: Send + 'static>(
    timeout: std::time::Duration,
    op: impl FnOnce() -> Result<T, KeyStoreError> + Send + 'static,
) -> Result<T, KeyStoreError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    std::thread::Builder::new()
        .name("keychain".into())
        .spawn(move || {
            let _ = tx.send(op());
        })
        .map_err(|e| KeyStoreError::Other(format!("cannot start a keychain call: {e}")))?;
    match rx.recv_timeout(timeout) {
        Ok(result) => result,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(KeyStoreError::Locked(format!(
            "the keychain did not answer within {} s; it may be waiting for an unlock prompt",
            timeout.as_secs_f32()
        ))),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
            Err(KeyStoreError::Other("the keychain call stopped without an answer".into()))
        }
    }
}

fn map_keyring(e: keyring::Error) -> KeyStoreError {
    match e {
        keyring::Error::PlatformFailure(inner) => KeyStoreError::Unavailable(inner.to_string()),
        keyring::Error::NoStorageAccess(inner) => KeyStoreError::Locked(inner.to_string()),
        other => KeyStoreError::Other(other.to_string()),
    }
}

fn get_secret(entry: keyring::Entry) -> Result<Option<Vec<u8>>, KeyStoreError> {
    match entry.get_secret() {
        Ok(secret) => Ok(Some(secret)),
        Err(keyring::Error::NoEntry) => Ok(None),
        Err(e) => Err(map_keyring(e)),
    }
}

impl KeyStore for KeyringStore {
    fn load(&self, account: &str) -> Result<Option<Vec<u8>>, KeyStoreError> {
        self.with_entry(account, get_secret)
    }

    fn load_within(&self, account: &str, deadline: std::time::Duration) -> Result<Option<Vec<u8>>, KeyStoreError> {
        let (service, account) = (self.service.clone(), account.to_owned());
        with_deadline(deadline.min(self.timeout), move || {
            once_more_if_unreachable(|| get_secret(keyring::Entry::new(&service, &account).map_err(map_keyring)?))
        })
    }

    fn store(&self, account: &str, secret: &[u8]) -> Result<(), KeyStoreError> {
        let secret = zeroize::Zeroizing::new(secret.to_vec());
        self.with_entry(account, move |entry| entry.set_secret(&secret).map_err(map_keyring))
    }

    fn delete(&self, account: &str) -> Result<(), KeyStoreError> {
        self.with_entry(account, |entry| match entry.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(map_keyring(e)),
        })
    }
}

#[cfg(any(test, feature = "test-support"))]
pub use memory::{FileKeyStore, MemoryKeyStore};

#[cfg(any(test, feature = "test-support"))]
mod memory {
    use std::collections::HashMap;
    use std::sync::Mutex;

    use super::{KeyStore, KeyStoreError};

    /// In-memory keychain for tests. Can be switched off to test failures.
    #[derive(Debug, Default)]
    pub struct MemoryKeyStore {
        secrets: Mutex<HashMap<String, Vec<u8>>>,
        unavailable: std::sync::atomic::AtomicBool,
        /// Every read takes this long first (a keychain waiting on a prompt).
        read_delay: Mutex<Option<std::time::Duration>>,
    }

    impl MemoryKeyStore {
        /// Makes every read wait `delay` first, as a locked keychain waiting
        /// on an unlock prompt does (`None`: answer at once).
        pub fn set_read_delay(&self, delay: Option<std::time::Duration>) {
            if let Ok(mut d) = self.read_delay.lock() {
                *d = delay;
            }
        }
        /// Forgets every secret: a wiped or new keychain.
        pub fn wipe(&self) {
            if let Ok(mut m) = self.secrets.lock() {
                m.clear();
            }
        }
        fn delay(&self) -> Option<std::time::Duration> {
            self.read_delay.lock().ok().and_then(|d| *d)
        }
        pub fn set_unavailable(&self, down: bool) {
            self.unavailable.store(down, std::sync::atomic::Ordering::SeqCst);
        }
        fn check(&self) -> Result<(), KeyStoreError> {
            if self.unavailable.load(std::sync::atomic::Ordering::SeqCst) {
                Err(KeyStoreError::Unavailable("test keychain switched off".into()))
            } else {
                Ok(())
            }
        }
        pub fn accounts(&self) -> Vec<String> {
            self.secrets.lock().map(|m| m.keys().cloned().collect()).unwrap_or_default()
        }
    }

    impl KeyStore for MemoryKeyStore {
        fn load_within(&self, account: &str, deadline: std::time::Duration) -> Result<Option<Vec<u8>>, KeyStoreError> {
            match self.delay() {
                Some(d) if d > deadline => {
                    std::thread::sleep(deadline);
                    Err(KeyStoreError::Locked("the test keychain did not answer in time".into()))
                }
                _ => self.load(account),
            }
        }
        fn load(&self, account: &str) -> Result<Option<Vec<u8>>, KeyStoreError> {
            if let Some(d) = self.delay() {
                std::thread::sleep(d);
            }
            self.check()?;
            Ok(self.secrets.lock().map_err(|e| KeyStoreError::Other(e.to_string()))?.get(account).cloned())
        }
        fn store(&self, account: &str, secret: &[u8]) -> Result<(), KeyStoreError> {
            self.check()?;
            self.secrets
                .lock()
                .map_err(|e| KeyStoreError::Other(e.to_string()))?
                .insert(account.to_owned(), secret.to_vec());
            Ok(())
        }
        fn delete(&self, account: &str) -> Result<(), KeyStoreError> {
            self.check()?;
            self.secrets.lock().map_err(|e| KeyStoreError::Other(e.to_string()))?.remove(account);
            Ok(())
        }
    }

    /// A keychain in plain files, for tests that need keys to outlive a
    /// process (the crash test). Test support only: never in production.
    #[derive(Debug, Clone)]
    pub struct FileKeyStore {
        dir: std::path::PathBuf,
    }

    impl FileKeyStore {
        pub fn new(dir: impl Into<std::path::PathBuf>) -> Self {
            Self { dir: dir.into() }
        }
        fn file(&self, account: &str) -> std::path::PathBuf {
            self.dir.join(hex::encode(account.as_bytes()))
        }
    }

    fn io(e: std::io::Error) -> KeyStoreError {
        KeyStoreError::Other(e.to_string())
    }

    impl KeyStore for FileKeyStore {
        fn load(&self, account: &str) -> Result<Option<Vec<u8>>, KeyStoreError> {
            match std::fs::read(self.file(account)) {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(io(e)),
            }
        }
        fn store(&self, account: &str, secret: &[u8]) -> Result<(), KeyStoreError> {
            std::fs::create_dir_all(&self.dir).map_err(io)?;
            // Write then rename: a kill mid-write never leaves half a key.
            let tmp = self.dir.join(format!(".tmp-{}-{}", std::process::id(), hex::encode(account.as_bytes())));
            std::fs::write(&tmp, secret).map_err(io)?;
            std::fs::rename(&tmp, self.file(account)).map_err(io)
        }
        fn delete(&self, account: &str) -> Result<(), KeyStoreError> {
            match std::fs::remove_file(self.file(account)) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use std::cell::Cell;

    use super::{once_more_if_unreachable, with_deadline, KeyStoreError};

    #[test]
    fn a_keychain_call_that_hangs_fails_as_locked_at_its_deadline() {
        let t = Instant::now();
        let r: Result<(), _> = with_deadline(Duration::from_millis(100), || {
            std::thread::sleep(Duration::from_secs(5));
            Ok(())
        });
        assert!(matches!(&r, Err(KeyStoreError::Locked(m)) if m.contains("did not answer")), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        // A call that answers in time gives its own answer, error or not.
        assert_eq!(with_deadline(Duration::from_secs(5), || Ok(7)).ok(), Some(7));
        let e = with_deadline::<()>(Duration::from_secs(5), || Err(KeyStoreError::Unavailable("down".into())));
        assert!(matches!(e, Err(KeyStoreError::Unavailable(_))));
    }

    #[test]
    fn a_dropped_keychain_call_is_asked_once_more_and_other_failures_are_not() {
        let calls = Cell::new(0);
        let back = once_more_if_unreachable(|| {
            calls.set(calls.get() + 1);
            if calls.get() == 1 {
                Err(KeyStoreError::Unavailable("recipient disconnected".into()))
            } else {
                Ok(7)
            }
        });
        assert_eq!((back.ok(), calls.get()), (Some(7), 2));

        calls.set(0);
        let down = once_more_if_unreachable(|| -> Result<(), _> {
            calls.set(calls.get() + 1);
            Err(KeyStoreError::Unavailable("no secret service".into()))
        });
        assert!(matches!(down, Err(KeyStoreError::Unavailable(_))));
        assert_eq!(calls.get(), 2, "asked once more, not for ever");

        calls.set(0);
        let locked = once_more_if_unreachable(|| -> Result<(), _> {
            calls.set(calls.get() + 1);
            Err(KeyStoreError::Locked("prompt".into()))
        });
        assert!(matches!(locked, Err(KeyStoreError::Locked(_))));
        assert_eq!(calls.get(), 1, "a locked keychain is not asked again at once");
    }
}
