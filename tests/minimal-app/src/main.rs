//! Baseline for benchmarks: a window with one static page, nothing else.
fn main() {
    if let Err(e) = tauri::Builder::default().run(tauri::generate_context!()) {
        eprintln!("minimal app failed: {e}");
        std::process::exit(1);
    }
}
