//! Writes the q8_0 GGUF of converted Whisper models, beside their
//! `model.safetensors` (`model-q8_0.gguf`), for setup. The output is the
//! same bytes for the same input.
//!
//! cargo run -p voice --example whisper_quantize -- MODEL_DIR [MODEL_DIR ...]

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let dirs: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if dirs.is_empty() {
        eprintln!("usage: whisper_quantize MODEL_DIR [MODEL_DIR ...]");
        return ExitCode::from(2);
    }
    for dir in dirs {
        let started = Instant::now();
        match voice::whisper::quantize::quantize_dir(&dir) {
            Ok(path) => {
                let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                println!("{} ({size} bytes, {} ms)", path.display(), started.elapsed().as_millis());
            }
            Err(e) => {
                eprintln!("error [{}]: {}: {e}", e.code(), dir.display());
                return ExitCode::from(1);
            }
        }
    }
    ExitCode::SUCCESS
}
