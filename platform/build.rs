//! Builds the Language components the platform bundles (and the hostile
//! test component) for `wasm32-wasip2`, so a plain `cargo build` or
//! `cargo test` produces everything it needs.
//!
//! The guests are built by a nested cargo in their own target directory
//! (`target/guests`, profile `guest`: small, LTO, panic=abort), then copied
//! into `OUT_DIR`, where `include_bytes!` embeds them.

use std::path::{Path, PathBuf};
use std::process::Command;

const GUESTS: [(&str, &str); 7] = [
    ("workflow", "workflow.wasm"),
    ("sql", "sql.wasm"),
    ("automation", "automation.wasm"),
    ("recipe", "recipe.wasm"),
    ("hostile", "hostile.wasm"),
    ("unfit", "unfit.wasm"),
    ("deployer", "deployer.wasm"),
];
const TARGET: &str = "wasm32-wasip2";

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = manifest_dir.parent().expect("platform/ sits in the workspace root").to_path_buf();
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    for watched in ["guest-sdk", "languages", "test-programs", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", workspace.join(watched).display());
    }
    println!("cargo:rerun-if-env-changed=PILOTAGE_GUEST_PROFILE");

    ensure_target_installed();
    let target_dir = workspace.join("target").join("guests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut command = Command::new(&cargo);
    command
        .current_dir(&workspace)
        .args(["build", "--profile", "guest", "--target", TARGET, "--target-dir"])
        .arg(&target_dir);
    for (package, _) in GUESTS {
        command.args(["-p", package]);
    }
    // Flags meant for the host build must not leak into the guest build.
    for variable in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_DIR",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
    ] {
        command.env_remove(variable);
    }
    let status =
        command.status().unwrap_or_else(|error| panic!("cannot run {cargo} to build the Language components: {error}"));
    if !status.success() {
        panic!(
            "building the Language components for {TARGET} failed (see above). If the target is missing, run: rustup target add {TARGET}"
        );
    }
    let built = target_dir.join(TARGET).join("guest");
    for (_, file) in GUESTS {
        copy(&built.join(file), &out_dir.join(file));
    }
    println!("cargo:rustc-env=PILOTAGE_GUEST_DIR={}", out_dir.display());
}

/// Installs the guest target through rustup when the active toolchain lacks
/// it. `rust-toolchain.toml` lists the target, but rustup only honours that
/// list when it installs a toolchain, not for one already present, so a fresh
/// machine with a stable toolchain would otherwise fail here.
fn ensure_target_installed() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let sysroot = Command::new(&rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()));
    if let Some(sysroot) = sysroot
        && sysroot.join("lib").join("rustlib").join(TARGET).is_dir()
    {
        return;
    }
    eprintln!("the {TARGET} target is missing; installing it with rustup");
    // A failure here is reported by the guest build below, with the hint.
    let _ = Command::new("rustup").args(["target", "add", TARGET]).status();
}

fn copy(from: &Path, to: &Path) {
    std::fs::copy(from, to)
        .unwrap_or_else(|error| panic!("cannot copy {} to {}: {error}", from.display(), to.display()));
}
