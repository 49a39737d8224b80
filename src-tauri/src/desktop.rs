//! Living in the tray: closing the window hides it, the tray menu brings it
//! back or quits, a second launch shows the running copy, and a global
//! shortcut summons Ledgermind with the window hidden. Settings come from
//! `app::DesktopSettings`; this module only wires them to Tauri.
//!
//! On Linux the tray host delivers no clicks on the icon itself, so every
//! action is a menu item.

use std::sync::Mutex;

use app::{DataDir, DesktopSettings, DesktopView, PersonaView};
use tauri::image::Image;
use tauri::menu::{CheckMenuItem, IsMenuItem, Menu, MenuEvent, MenuItem, PredefinedMenuItem, Submenu};
use tauri::tray::{TrayIcon, TrayIconBuilder};
use tauri::{AppHandle, Manager, Runtime};
use tauri_plugin_global_shortcut::Shortcut;

const TRAY_ID: &str = "main";
const MENU_SHOW: &str = "show";
const MENU_TALK: &str = "talk";
const MENU_MUTE: &str = "mute";
const MENU_QUIT: &str = "quit";
const PERSONA_PREFIX: &str = "persona:";

/// What the tray icon shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrayState {
    Idle,
    Listening,
    Speaking,
    Muted,
    Error,
}

/// The shell's desktop state: settings, what the tray and shortcut could do
/// on this machine, and the person's choices in the tray menu.
pub struct Desktop {
    data_dir: DataDir,
    inner: Mutex<Inner>,
}

struct Inner {
    settings: DesktopSettings,
    tray: bool,
    shortcut_active: bool,
    shortcut_problem: Option<String>,
    muted: bool,
    persona: Option<String>,
    /// Set when the person chose Quit: closing then really closes.
    quitting: bool,
    /// Counts hides and shows, so a release timer started by one hide does
    /// nothing once the window has been shown (or hidden again) since.
    visibility_turn: u64,
    /// Where the window was when its web view was released, to put the
    /// new one back there.
    geometry: Option<(tauri::PhysicalPosition<i32>, tauri::PhysicalSize<u32>)>,
    /// What the page keeps here (in memory only: unsent text, the open
    /// chat) so a released web view does not take it along.
    page_state: std::collections::HashMap<String, String>,
}

/// Menu words in the language of the session (the tray is drawn by the
/// desktop, before the web view has told us the person's choice).
struct Words {
    show: &'static str,
    talk: &'static str,
    stop_talking: &'static str,
    talk_unavailable: &'static str,
    mute: &'static str,
    talk_to: &'static str,
    no_personas: &'static str,
    quit: &'static str,
}

fn words() -> Words {
    let lang = std::env::var("LC_ALL").or_else(|_| std::env::var("LC_MESSAGES")).or_else(|_| std::env::var("LANG")).unwrap_or_default();
    if lang.starts_with("pt") {
        Words {
            show: "Mostrar Ledgermind",
            talk: "Falar",
            stop_talking: "Parar de falar",
            talk_unavailable: "Falar (modelo de voz não instalado)",
            mute: "Silenciar microfone",
            talk_to: "Falar com",
            no_personas: "Nenhuma persona ainda",
            quit: "Sair do Ledgermind",
        }
    } else {
        Words {
            show: "Show Ledgermind",
            talk: "Talk",
            stop_talking: "Stop talking",
            talk_unavailable: "Talk (speech model not installed)",
            mute: "Mute microphone",
            talk_to: "Talk to",
            no_personas: "No personas yet",
            quit: "Quit Ledgermind",
        }
    }
}

/// One running copy per data directory: a second launch on the same data
/// shows the first one's window; another profile may run beside it.
pub fn instance_id(data_dir: &DataDir) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    data_dir.root().hash(&mut hasher);
    format!("app.ledgermind.desktop.h{:016x}", hasher.finish())
}

impl Desktop {
    pub fn new(data_dir: DataDir) -> Self {
        let settings = DesktopSettings::load(&data_dir);
        let inner = Inner {
            settings,
            tray: false,
            shortcut_active: false,
            shortcut_problem: None,
            muted: false,
            persona: None,
            quitting: false,
            visibility_turn: 0,
            geometry: None,
            page_state: Default::default(),
        };
        Self { data_dir, inner: Mutex::new(inner) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn view(&self) -> DesktopView {
        let inner = self.lock();
        DesktopView {
            settings: inner.settings.clone(),
            tray: inner.tray,
            shortcut_active: inner.shortcut_active,
            shortcut_problem: inner.shortcut_problem.clone(),
        }
    }

    /// Whether closing the window should hide it instead of quitting: only
    /// when the person wants that *and* a tray icon exists to come back by.
    pub fn set_tray(&self, shown: bool) {
        self.lock().tray = shown;
    }

    pub fn muted(&self) -> bool {
        self.lock().muted
    }

    /// The persona chosen under "Talk to".
    pub fn persona(&self) -> Option<String> {
        self.lock().persona.clone()
    }

    pub fn settings(&self) -> DesktopSettings {
        self.lock().settings.clone()
    }

    pub fn data_dir(&self) -> &DataDir {
        &self.data_dir
    }

    pub fn close_hides(&self) -> bool {
        let inner = self.lock();
        inner.settings.close_to_tray && inner.tray && !inner.quitting
    }

    /// Keeps (or, when empty, forgets) a piece of the page's state.
    pub fn keep_page_state(&self, key: String, text: String) {
        let mut inner = self.lock();
        if text.is_empty() {
            inner.page_state.remove(&key);
        } else {
            inner.page_state.insert(key, text);
        }
    }

    pub fn kept_page_state(&self, key: &str) -> String {
        self.lock().page_state.get(key).cloned().unwrap_or_default()
    }

    fn next_visibility_turn(&self) -> u64 {
        let mut inner = self.lock();
        inner.visibility_turn += 1;
        inner.visibility_turn
    }

    /// Saves new settings and applies the shortcut at once.
    pub fn update<R: Runtime>(&self, app: &AppHandle<R>, settings: DesktopSettings) -> Result<DesktopView, app::AppError> {
        let settings = settings.normalised();
        if settings.shortcut.parse::<Shortcut>().is_err() {
            return Err(app::AppError::new(
                "INVALID_INPUT",
                format!("“{}” is not a key combination (try Ctrl+Shift+Space)", settings.shortcut),
            ));
        }
        settings.save(&self.data_dir)?;
        self.lock().settings = settings;
        self.register_shortcut(app);
        Ok(self.view())
    }

    /// (Re)registers the global shortcut; a failure is kept for Settings to
    /// show (and told once in the window), never fatal.
    pub fn register_shortcut<R: Runtime>(&self, app: &AppHandle<R>) {
        let chosen = self.lock().settings.shortcut.clone();
        let result = if let Some(reason) = shortcuts_unsupported() {
            Err(reason)
        } else {
            match chosen.parse::<Shortcut>() {
                Err(e) => Err(ShortcutProblem::NotACombination { chosen: chosen.clone(), why: e.to_string() }),
                Ok(shortcut) => grab(app, &chosen, shortcut),
            }
        };
        let mut inner = self.lock();
        match result {
            Ok(()) => {
                inner.shortcut_active = true;
                inner.shortcut_problem = None;
            }
            Err(problem) => {
                tracing::warn!("global shortcut unavailable: {problem}");
                inner.shortcut_active = false;
                inner.shortcut_problem = Some(problem.to_string());
            }
        }
    }
}

/// Why the global shortcut does not work; Settings shows the sentence.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ShortcutProblem {
    #[error("global shortcuts are not available in a Wayland session; use the tray menu's Talk, or log in with X11")]
    Wayland,
    #[error("global shortcuts are not available: {0}")]
    NoKeys(String),
    #[error("the shortcut's keys are not connected yet")]
    NotConnected,
    #[error("“{chosen}” is not a key combination: {why}")]
    NotACombination { chosen: String, why: String },
    #[error("another program already uses “{0}”: choose another shortcut in Settings")]
    Taken(String),
    #[error("“{chosen}” could not be registered ({why}): choose another shortcut in Settings")]
    Failed { chosen: String, why: String },
}

/// The shortcut's keys on Linux: our own X11 grab (see `hotkey`), or why
/// there is none (no X display).
#[cfg(target_os = "linux")]
pub struct ShortcutKeys(Result<crate::hotkey::X11Shortcut, ShortcutProblem>);

/// Connects the shortcut's keys to the voice turns; on a Wayland session
/// nothing is connected (Settings says why).
#[cfg(target_os = "linux")]
pub fn start_shortcut_keys<R: Runtime>(app: &AppHandle<R>) {
    let keys = match shortcuts_unsupported() {
        Some(reason) => Err(reason),
        None => {
            let handle = app.clone();
            crate::hotkey::X11Shortcut::start(move |pressed| on_shortcut(&handle, pressed))
                .map_err(|e| ShortcutProblem::NoKeys(e.to_string()))
        }
    };
    app.manage(ShortcutKeys(keys));
}

#[cfg(not(target_os = "linux"))]
pub fn start_shortcut_keys<R: Runtime>(_app: &AppHandle<R>) {}

#[cfg(target_os = "linux")]
fn grab<R: Runtime>(app: &AppHandle<R>, chosen: &str, shortcut: Shortcut) -> Result<(), ShortcutProblem> {
    use crate::hotkey::GrabError;
    let Some(keys) = app.try_state::<ShortcutKeys>() else {
        return Err(ShortcutProblem::NotConnected);
    };
    match &keys.0 {
        Err(why) => Err(why.clone()),
        Ok(keys) => keys.register(&shortcut).map_err(|e| match e {
            GrabError::Taken => ShortcutProblem::Taken(chosen.to_owned()),
            GrabError::Failed(why) => ShortcutProblem::Failed { chosen: chosen.to_owned(), why },
        }),
    }
}

#[cfg(not(target_os = "linux"))]
fn grab<R: Runtime>(app: &AppHandle<R>, chosen: &str, shortcut: Shortcut) -> Result<(), ShortcutProblem> {
    use tauri_plugin_global_shortcut::GlobalShortcutExt;
    let shortcuts = app.global_shortcut();
    let _ = shortcuts.unregister_all();
    shortcuts
        .register(shortcut)
        .map_err(|e| ShortcutProblem::Failed { chosen: chosen.to_owned(), why: format!("{e}; another program may use it") })
}

/// Global shortcuts work through X11 key grabs; a Wayland session gives
/// them to no one (only X11 windows with focus see them under XWayland).
fn shortcuts_unsupported() -> Option<ShortcutProblem> {
    let wayland = std::env::var("XDG_SESSION_TYPE").is_ok_and(|t| t.eq_ignore_ascii_case("wayland"))
        || (std::env::var_os("WAYLAND_DISPLAY").is_some() && std::env::var_os("DISPLAY").is_none());
    wayland.then_some(ShortcutProblem::Wayland)
}

/// Whether a tray host (a StatusNotifierWatcher) is on the session bus.
/// Without one the icon would be invisible, so closing must quit.
///
/// The connection is kept open for the life of the app: closing a zbus
/// connection hands the socket's shutdown to the `blocking` crate's thread
/// pool, whose thread then never exits and wakes twice a second forever.
fn tray_host_present() -> bool {
    static SESSION: std::sync::OnceLock<Option<zbus::blocking::Connection>> = std::sync::OnceLock::new();
    let Some(connection) = SESSION.get_or_init(|| zbus::blocking::Connection::session().ok()) else { return false };
    let Ok(proxy) = zbus::blocking::fdo::DBusProxy::new(connection) else { return false };
    ["org.kde.StatusNotifierWatcher", "org.freedesktop.StatusNotifierWatcher"].iter().any(|name| {
        zbus::names::BusName::try_from(*name).ok().and_then(|bus| proxy.name_has_owner(bus).ok()).unwrap_or(false)
    })
}

/// Shows, unminimises and focuses the main window, making it anew where
/// its web view was released while hidden.
pub fn show_main<R: Runtime>(app: &AppHandle<R>) {
    let desktop = app.try_state::<Desktop>();
    if let Some(desktop) = &desktop {
        desktop.next_visibility_turn();
    }
    let window = match app.get_webview_window("main") {
        Some(window) => window,
        None => match rebuild_main(app, desktop.and_then(|d| d.lock().geometry.take())) {
            Ok(window) => window,
            Err(e) => {
                tracing::error!("the window could not be made again: {e}");
                return;
            }
        },
    };
    let _ = window.show();
    let _ = window.unminimize();
    let _ = window.set_focus();
}

/// The main window from its configuration, where it was before.
fn rebuild_main<R: Runtime>(
    app: &AppHandle<R>,
    geometry: Option<(tauri::PhysicalPosition<i32>, tauri::PhysicalSize<u32>)>,
) -> tauri::Result<tauri::WebviewWindow<R>> {
    let config = app.config().app.windows.iter().find(|w| w.label == "main").cloned().ok_or(tauri::Error::WindowNotFound)?;
    let window = tauri::WebviewWindowBuilder::from_config(app, &config)?.build()?;
    if let Some((position, size)) = geometry {
        let _ = window.set_size(size);
        let _ = window.set_position(position);
    }
    Ok(window)
}

/// How long a hidden window keeps its web view before it is released:
/// showing it again within this time is instant; after it, the tray costs
/// no web content process (a page load when shown again).
fn release_after() -> std::time::Duration {
    let ms = std::env::var("LEDGERMIND_TRAY_RELEASE_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(60_000);
    std::time::Duration::from_millis(ms)
}

/// Closing the window: hide it into the tray when that is the setting and a
/// tray exists; otherwise let it close (which quits).
pub fn on_close_requested<R: Runtime>(window: &tauri::Window<R>, api: &tauri::CloseRequestApi) {
    let Some(desktop) = window.app_handle().try_state::<Desktop>() else { return };
    if !desktop.close_hides() {
        return;
    }
    api.prevent_close();
    let _ = window.hide();
    let turn = desktop.next_visibility_turn();
    let app = window.app_handle().clone();
    std::thread::spawn(move || {
        std::thread::sleep(release_after());
        let handle = app.clone();
        let _ = app.run_on_main_thread(move || release_if_still_hidden(&handle, turn));
    });
}

/// Destroys the hidden window's web view (its web content process exits)
/// unless the window was shown or hidden again since `turn`.
fn release_if_still_hidden<R: Runtime>(app: &AppHandle<R>, turn: u64) {
    let Some(desktop) = app.try_state::<Desktop>() else { return };
    let Some(window) = app.get_webview_window("main") else { return };
    {
        let mut inner = desktop.lock();
        if inner.visibility_turn != turn || inner.quitting || window.is_visible().unwrap_or(true) {
            return;
        }
        if let (Ok(position), Ok(size)) = (window.outer_position(), window.inner_size()) {
            inner.geometry = Some((position, size));
        }
    }
    tracing::info!("releasing the hidden window's web view");
    if let Err(e) = window.destroy() {
        tracing::warn!("the hidden window could not be released: {e}");
        return;
    }
    give_back_freed_memory();
}

/// Returns the heap the released web view freed to the system (glibc keeps
/// freed pages otherwise).
fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim only releases free heap pages; it takes no pointers.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A recoloured copy of the app icon for a tray state.
fn icon_for(base: &Image<'_>, state: TrayState) -> Image<'static> {
    let mut rgba = base.rgba().to_vec();
    for px in rgba.chunks_exact_mut(4) {
        let (r, g, b) = (f32::from(px[0]), f32::from(px[1]), f32::from(px[2]));
        let grey = 0.3 * r + 0.59 * g + 0.11 * b;
        let (nr, ng, nb) = match state {
            TrayState::Idle => (r, g, b),
            TrayState::Muted => (grey * 0.8, grey * 0.8, grey * 0.8),
            TrayState::Error => (grey * 0.4 + 150.0, grey * 0.3, grey * 0.3),
            TrayState::Listening => (grey * 0.3, grey * 0.4 + 120.0, grey * 0.3),
            TrayState::Speaking => (grey * 0.3, grey * 0.4 + 60.0, grey * 0.4 + 150.0),
        };
        px[0] = nr.min(255.0) as u8;
        px[1] = ng.min(255.0) as u8;
        px[2] = nb.min(255.0) as u8;
    }
    Image::new_owned(rgba, base.width(), base.height())
}

pub fn set_tray_state<R: Runtime>(app: &AppHandle<R>, state: TrayState) {
    let (Some(tray), Some(base)) = (app.tray_by_id(TRAY_ID), app.default_window_icon()) else { return };
    let _ = tray.set_icon(Some(icon_for(base, state)));
}

/// Builds the tray icon and its menu. Returns false when there is no tray
/// host to show it (the app then behaves as a plain window).
pub fn install_tray<R: Runtime>(app: &AppHandle<R>) -> bool {
    if !tray_host_present() {
        tracing::info!("no tray host on the session bus: closing the window quits");
        return false;
    }
    match build_tray(app) {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!("the tray icon could not be created: {e}");
            false
        }
    }
}

fn build_tray<R: Runtime>(app: &AppHandle<R>) -> tauri::Result<TrayIcon<R>> {
    let w = words();
    let show = MenuItem::with_id(app, MENU_SHOW, w.show, true, None::<&str>)?;
    let can_talk = app.try_state::<Desktop>().is_some_and(|d| crate::talk::available(d.data_dir()));
    let talk = MenuItem::with_id(app, MENU_TALK, if can_talk { w.talk } else { w.talk_unavailable }, can_talk, None::<&str>)?;
    let mute = CheckMenuItem::with_id(app, MENU_MUTE, w.mute, true, false, None::<&str>)?;
    let personas = Submenu::with_id(app, "personas", w.talk_to, true)?;
    personas.append(&MenuItem::with_id(app, "persona-none", w.no_personas, false, None::<&str>)?)?;
    let quit = MenuItem::with_id(app, MENU_QUIT, w.quit, true, None::<&str>)?;
    let separator = PredefinedMenuItem::separator(app)?;
    let menu = Menu::with_items(app, &[&show, &talk, &mute, &personas, &separator, &quit])?;
    let mut builder = TrayIconBuilder::with_id(TRAY_ID).menu(&menu).tooltip("Ledgermind").on_menu_event(on_menu_event);
    if let Some(icon) = app.default_window_icon() {
        builder = builder.icon(icon.clone());
    }
    let tray = builder.build(app)?;
    app.manage(TrayMenu { personas, talk });
    Ok(tray)
}

fn on_menu_event<R: Runtime>(app: &AppHandle<R>, event: MenuEvent) {
    let id = event.id.as_ref();
    match id {
        MENU_SHOW => show_main(app),
        MENU_TALK => crate::talk::talk_or_stop(app),
        MENU_MUTE => {
            if let Some(desktop) = app.try_state::<Desktop>() {
                let muted = {
                    let mut inner = desktop.lock();
                    inner.muted = !inner.muted;
                    inner.muted
                };
                if muted {
                    crate::talk::stop(app);
                }
                set_tray_state(app, if muted { TrayState::Muted } else { TrayState::Idle });
            }
        }
        MENU_QUIT => quit(app),
        _ => {
            if let Some(persona) = id.strip_prefix(PERSONA_PREFIX) {
                if let Some(desktop) = app.try_state::<Desktop>() {
                    desktop.lock().persona = Some(persona.to_owned());
                }
                refresh_persona_checks(app, persona);
            }
        }
    }
}

/// Quit from the tray: the window closes for real and the app exits through
/// the normal shutdown (sessions closed, queue kept).
pub fn quit<R: Runtime>(app: &AppHandle<R>) {
    if let Some(desktop) = app.try_state::<Desktop>() {
        desktop.lock().quitting = true;
    }
    app.exit(0);
}

fn persona_submenu<R: Runtime>(app: &AppHandle<R>) -> Option<Submenu<R>> {
    app.try_state::<TrayMenu<R>>().map(|menu| menu.personas.clone())
}

/// The tray's persona submenu, kept so it can be refilled.
pub struct TrayMenu<R: Runtime> {
    personas: Submenu<R>,
    talk: MenuItem<R>,
}

/// The tray's Talk entry says Stop talking while a turn runs.
pub fn set_talking<R: Runtime>(app: &AppHandle<R>, talking: bool) {
    if let Some(menu) = app.try_state::<TrayMenu<R>>() {
        let w = words();
        let _ = menu.talk.set_text(if talking { w.stop_talking } else { w.talk });
    }
}

fn refresh_persona_checks<R: Runtime>(app: &AppHandle<R>, chosen: &str) {
    let Some(submenu) = persona_submenu(app) else { return };
    let Ok(items) = submenu.items() else { return };
    for item in items {
        if let Some(check) = item.as_check_menuitem() {
            let _ = check.set_checked(check.id().as_ref() == format!("{PERSONA_PREFIX}{chosen}"));
        }
    }
}

/// Refills "Talk to" with the active personas; the chosen one stays checked
/// (the first one when nothing was chosen yet).
/// Without a tray the choice is still made: the shortcut talks to it.
pub fn set_personas<R: Runtime>(app: &AppHandle<R>, personas: &[PersonaView]) {
    let Some(desktop) = app.try_state::<Desktop>() else { return };
    let chosen = {
        let mut inner = desktop.lock();
        let still_there = inner.persona.as_ref().is_some_and(|p| personas.iter().any(|v| &v.id == p));
        if !still_there {
            inner.persona = personas.first().map(|p| p.id.clone());
        }
        inner.persona.clone()
    };
    let Some(submenu) = persona_submenu(app) else { return };
    if let Ok(items) = submenu.items() {
        for item in items {
            let _ = submenu.remove(&item as &dyn IsMenuItem<R>);
        }
    }
    if personas.is_empty() {
        if let Ok(none) = MenuItem::with_id(app, "persona-none", words().no_personas, false, None::<&str>) {
            let _ = submenu.append(&none);
        }
        return;
    }
    for persona in personas {
        let checked = chosen.as_deref() == Some(persona.id.as_str());
        if let Ok(item) =
            CheckMenuItem::with_id(app, format!("{PERSONA_PREFIX}{}", persona.id), &persona.name, true, checked, None::<&str>)
        {
            let _ = submenu.append(&item);
        }
    }
}

/// The global shortcut's handler: a voice turn, held or toggled as chosen
/// in Settings; it works with the window hidden.
pub fn on_shortcut<R: Runtime>(app: &AppHandle<R>, pressed: bool) {
    let hold = app.try_state::<Desktop>().is_none_or(|d| d.settings().shortcut_mode == app::ShortcutMode::Hold);
    crate::talk::on_shortcut(app, pressed, hold);
}

/// Keeps the tray's persona list in step with the engine: filled once it
/// has started, refilled whenever a persona changes.
pub fn follow_personas<R: Runtime>(app: AppHandle<R>, engine: std::sync::Arc<app::Engine>) {
    let mut events = engine.subscribe();
    tauri::async_runtime::spawn(async move {
        loop {
            if let Ok(personas) = engine.personas().list_personas().await {
                set_personas(&app, &personas);
            }
            loop {
                match events.recv().await {
                    Ok(app::AppEvent::PersonaChanged { .. }) => break,
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                }
            }
        }
    });
}
