//! "Start at login": an XDG autostart entry
//! (`$XDG_CONFIG_HOME/autostart/ledgermind.desktop`) that starts the app
//! hidden in the tray. The entry itself is the setting: present and not
//! `Hidden=true` means on, so a person who removes it by hand (or turns it
//! off in the desktop's own startup-applications panel) sees the switch off.
//! Nothing goes to `/etc/xdg/autostart`: that would start it for every user.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The command-line flag the entry passes: start in the tray, no window.
pub const HIDDEN_FLAG: &str = "--hidden";

#[derive(Debug, thiserror::Error)]
pub enum AutostartError {
    #[error("no configuration folder (neither XDG_CONFIG_HOME nor HOME is set)")]
    NoConfigDir,
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
    #[error("cannot remove {}: {source}", path.display())]
    Remove { path: PathBuf, source: std::io::Error },
}

/// `$XDG_CONFIG_HOME/autostart/ledgermind.desktop`, else under `~/.config`.
pub fn entry_path() -> Result<PathBuf, AutostartError> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".config")))
        .ok_or(AutostartError::NoConfigDir)?;
    Ok(config.join("autostart").join("ledgermind.desktop"))
}

/// Whether the entry at `path` starts the app at login.
pub fn enabled_at(path: &Path) -> bool {
    match std::fs::read_to_string(path) {
        Ok(text) => !text.lines().any(|l| {
            let l = l.trim();
            l.eq_ignore_ascii_case("Hidden=true") || l.eq_ignore_ascii_case("X-GNOME-Autostart-enabled=false")
        }),
        Err(_) => false,
    }
}

/// The entry's text for the program at `exe`. The path is quoted as the
/// Desktop Entry spec asks (backslash, quote, dollar and backquote escaped).
pub fn entry_text(exe: &Path) -> String {
    let mut quoted = String::from("\"");
    for c in exe.to_string_lossy().chars() {
        if matches!(c, '"' | '`' | '$' | '\\') {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('"');
    format!(
        "[Desktop Entry]\nType=Application\nName=Ledgermind\nComment=Starts Ledgermind in the tray at login\n\
         Exec={quoted} {HIDDEN_FLAG}\nIcon=ledgermind\nTerminal=false\nX-GNOME-Autostart-enabled=true\n"
    )
}

/// Writes (atomically) or removes the entry at `path`.
pub fn set_at(path: &Path, on: bool, exe: &Path) -> Result<(), AutostartError> {
    if !on {
        return match std::fs::remove_file(path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(AutostartError::Remove { path: path.to_path_buf(), source }),
        };
    }
    let write = |path: &Path| -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("desktop.partial");
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(entry_text(exe).as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write(path).map_err(|source| AutostartError::Write { path: path.to_path_buf(), source })
}

/// The program the entry should start: this one, as installed.
pub fn current_program() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("ledgermind-desktop"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ledgermind-autostart-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn turning_it_on_writes_an_entry_that_starts_hidden_and_off_removes_it() {
        let dir = scratch("toggle");
        let path = dir.join("autostart").join("ledgermind.desktop");
        assert!(!enabled_at(&path));
        set_at(&path, true, Path::new("/usr/bin/ledgermind-desktop")).expect("on");
        assert!(enabled_at(&path));
        let text = std::fs::read_to_string(&path).expect("read");
        assert!(text.contains("Exec=\"/usr/bin/ledgermind-desktop\" --hidden\n"), "{text}");
        assert!(text.starts_with("[Desktop Entry]\nType=Application\n"), "{text}");
        set_at(&path, false, Path::new("/usr/bin/ledgermind-desktop")).expect("off");
        assert!(!path.exists());
        // Off twice is not an error.
        set_at(&path, false, Path::new("/usr/bin/ledgermind-desktop")).expect("off again");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_entry_the_desktop_disabled_reads_as_off() {
        let dir = scratch("hidden");
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("ledgermind.desktop");
        std::fs::write(&path, "[Desktop Entry]\nType=Application\nExec=x --hidden\nHidden=true\n").expect("write");
        assert!(!enabled_at(&path));
        std::fs::write(&path, "[Desktop Entry]\nType=Application\nExec=x\nX-GNOME-Autostart-enabled=false\n").expect("write");
        assert!(!enabled_at(&path));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn paths_with_spaces_and_quotes_are_quoted() {
        let text = entry_text(Path::new("/opt/my apps/led\"ger$mind"));
        assert!(text.contains("Exec=\"/opt/my apps/led\\\"ger\\$mind\" --hidden"), "{text}");
    }
}
