//! Parser robustness over third-party files: every file must end with a
//! clear status (indexed text, needs_password, no_text, failed with a
//! reason), with no crash and no hang. Each file is extracted by the
//! worker executable in its own process with a deadline, as in the app.
//!
//! ```text
//! cargo build -p library --bins --examples
//! target/debug/examples/robustness [--timeout SECS] DIR...
//! ```
//! (the worker is `library-extract` next to `examples/`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use library::{Extraction, Extractor, Format, WORKER_ARG};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut timeout = Duration::from_secs(30);
    if let Some(i) = args.iter().position(|a| a == "--timeout") {
        timeout = Duration::from_secs(args.get(i + 1).and_then(|s| s.parse().ok()).ok_or("--timeout SECS")?);
        args.drain(i..i + 2);
    }
    let exe = std::env::current_exe()?;
    let worker = exe.parent().and_then(|p| p.parent()).map(|p| p.join("library-extract")).ok_or("no worker path")?;
    if !worker.exists() {
        return Err(format!("{} is missing: cargo build -p library --bins", worker.display()).into());
    }
    let extractor = Extractor::Child { program: worker, args: vec![WORKER_ARG.into()], timeout };
    if let Some(missing) = args.iter().find(|d| !std::path::Path::new(d).is_dir()) {
        return Err(format!("{missing} is not a folder (scripts/setup.sh --test fetches the fixtures)").into());
    }
    let mut files: Vec<PathBuf> = args.iter().flat_map(|d| library::expand(std::path::Path::new(d))).collect();
    files.sort();
    // format → status → count
    let mut table: BTreeMap<&str, BTreeMap<String, usize>> = BTreeMap::new();
    let (mut crashes, mut hangs, mut chars_total) = (0, 0, 0usize);
    // PDFs poppler reads: (file, our visible characters, poppler's).
    let mut against_poppler: Vec<(PathBuf, usize, usize)> = Vec::new();
    let poppler = std::process::Command::new("pdftotext").arg("-v").output().is_ok();
    let mut times = Vec::new();
    for f in &files {
        let format = Format::of(f).map_or("other", Format::name);
        let start = Instant::now();
        let x = extractor.extract(f);
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        let status = match &x {
            Extraction::Text { blocks, .. } => {
                chars_total += blocks.iter().map(|b| b.text.chars().count()).sum::<usize>();
                if poppler && format == "pdf" {
                    let ours: usize = blocks.iter().map(|b| visible(&b.text)).sum();
                    if let Some(theirs) = poppler_chars(f).filter(|&n| n > 0) {
                        against_poppler.push((f.clone(), ours, theirs));
                    }
                }
                "indexed".to_owned()
            }
            Extraction::NeedsPassword { .. } => "needs_password".to_owned(),
            Extraction::NoText { .. } => {
                if poppler && format == "pdf" {
                    // Scans have no text for poppler either; one it reads is a miss of ours.
                    if let Some(theirs) = poppler_chars(f).filter(|&n| n > 0) {
                        against_poppler.push((f.clone(), 0, theirs));
                    }
                }
                "no_text".to_owned()
            }
            Extraction::Failed { reason } => {
                crashes += usize::from(reason.contains("crashed"));
                hangs += usize::from(reason.contains("longer than"));
                if std::env::var("ROBUSTNESS_VERBOSE").is_ok() {
                    eprintln!("failed {}: {reason}", f.display());
                }
                "failed".to_owned()
            }
        };
        *table.entry(format).or_default().entry(status).or_default() += 1;
    }
    times.sort_by(f64::total_cmp);
    println!("{} files, {} characters of text; crashes {crashes}, hangs (>{} s) {hangs}", files.len(), chars_total, timeout.as_secs());
    for (format, statuses) in &table {
        let n: usize = statuses.values().sum();
        let parts: Vec<String> = statuses.iter().map(|(s, c)| format!("{s} {c}")).collect();
        println!("  {format:<6} {n:>4}: {}", parts.join(", "));
    }
    if !times.is_empty() {
        println!(
            "per file (child process included): median {:.0} ms, p95 {:.0} ms, max {:.0} ms",
            times[times.len() / 2],
            times[(times.len() * 95 / 100).min(times.len() - 1)],
            times[times.len() - 1]
        );
    }
    if poppler {
        let within = against_poppler.iter().filter(|(_, ours, theirs)| *ours as f64 >= 0.8 * *theirs as f64).count();
        println!(
            "text of PDFs poppler reads: {within}/{} within 80 % of pdftotext's visible characters",
            against_poppler.len()
        );
        for (f, ours, theirs) in against_poppler.iter().filter(|(_, ours, theirs)| (*ours as f64) < 0.8 * *theirs as f64) {
            println!("    short: {} ours {ours}, pdftotext {theirs}", f.display());
        }
    } else {
        println!("text against poppler: not measured (pdftotext is not installed)");
    }
    if crashes + hangs > 0 {
        return Err(format!("{crashes} crashes and {hangs} hangs").into());
    }
    Ok(())
}

fn visible(text: &str) -> usize {
    text.chars().filter(|c| !c.is_whitespace()).count()
}

/// Visible characters of poppler's text for `file`, if poppler reads it.
fn poppler_chars(file: &std::path::Path) -> Option<usize> {
    let out = std::process::Command::new("pdftotext").arg("-q").arg(file).arg("-").output().ok()?;
    out.status.success().then(|| visible(&String::from_utf8_lossy(&out.stdout)))
}
