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
    fn store(&self, account: &str, secret: &[u8]) -> Result<(), KeyStoreError>;
    fn delete(&self, account: &str) -> Result<(), KeyStoreError>;
}

/// The real OS keychain (Secret Service on Linux) through `keyring`.
#[derive(Debug, Clone)]
pub struct KeyringStore {
    service: String,
}

impl KeyringStore {
    pub fn new(service: impl Into<String>) -> Self {
        Self { service: service.into() }
    }

    fn entry(&self, account: &str) -> Result<keyring::Entry, KeyStoreError> {
        keyring::Entry::new(&self.service, account).map_err(map_keyring)
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

fn map_keyring(e: keyring::Error) -> KeyStoreError {
    match e {
        keyring::Error::PlatformFailure(inner) => KeyStoreError::Unavailable(inner.to_string()),
        keyring::Error::NoStorageAccess(inner) => KeyStoreError::Locked(inner.to_string()),
        other => KeyStoreError::Other(other.to_string()),
    }
}

impl KeyStore for KeyringStore {
    fn load(&self, account: &str) -> Result<Option<Vec<u8>>, KeyStoreError> {
        match self.entry(account)?.get_secret() {
            Ok(secret) => Ok(Some(secret)),
            Err(keyring::Error::NoEntry) => Ok(None),
            Err(e) => Err(map_keyring(e)),
        }
    }

    fn store(&self, account: &str, secret: &[u8]) -> Result<(), KeyStoreError> {
        self.entry(account)?.set_secret(secret).map_err(map_keyring)
    }

    fn delete(&self, account: &str) -> Result<(), KeyStoreError> {
        match self.entry(account)?.delete_credential() {
            Ok(()) | Err(keyring::Error::NoEntry) => Ok(()),
            Err(e) => Err(map_keyring(e)),
        }
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
    }

    impl MemoryKeyStore {
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
        fn load(&self, account: &str) -> Result<Option<Vec<u8>>, KeyStoreError> {
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
