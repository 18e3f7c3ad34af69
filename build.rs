//! Tells the crate the target triple it is built for, for
//! `plantstore_build_info` in `/metrics`.

fn main() {
    let target = std::env::var("TARGET").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=PLANTSTORE_TARGET={target}");
    println!("cargo:rerun-if-changed=build.rs");
}
