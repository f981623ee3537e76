//! Puts memory.x and device.x where cortex-m-rt's link.x finds them.
use std::{env, fs, path::PathBuf};

fn main() {
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    for file in ["memory.x", "device.x"] {
        fs::copy(file, out.join(file)).expect("copy linker script");
        println!("cargo:rerun-if-changed={file}");
    }
    println!("cargo:rustc-link-search={}", out.display());
    println!("cargo:rerun-if-changed=build.rs");
}
