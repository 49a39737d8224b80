fn main() {
    // Linked like the app it is the baseline for (see src-tauri/build.rs).
    println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    tauri_build::build()
}
