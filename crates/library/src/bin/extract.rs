//! The extraction worker as its own executable, for the crate's tests and
//! the robustness benchmark: `library-extract __library-extract PATH`.

fn main() {
    let code = library::run_if_worker().unwrap_or_else(|| {
        eprintln!("usage: library-extract {} PATH", library::WORKER_ARG);
        2
    });
    std::process::exit(code);
}
