//! For build scripts: builds Language components of this workspace for
//! `wasm32-wasip2`, so a plain `cargo build` or `cargo test` produces every
//! component it embeds.
//!
//! The guests are built by a nested cargo in their own target directory
//! (`target/guests`, profile `guest`: small, LTO, panic=abort), then copied
//! into the calling crate's `OUT_DIR`, where `include_bytes!` embeds them.
//! The bundled Languages (`pilotage-bundled`) and the test components
//! (`pilotage-test-support`) each build only their own.
//!
//! Invariant: flags meant for the host build never reach the guest build,
//! and a missing target is installed through rustup before the build asks
//! for it.
//!
//! ```no_run
//! // build.rs of a crate embedding workflow.wasm:
//! pilotage_guest_build::build(&[("workflow", "workflow.wasm")]);
//! ```
#![deny(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The target every Language component is built for.
pub const TARGET: &str = "wasm32-wasip2";

/// Builds `guests` (package name, output file name) with the `guest`
/// profile and copies each file into `OUT_DIR`; sets
/// `PILOTAGE_GUEST_DIR` (that folder) for the crate being built.
///
/// # Panics
/// When the build fails (a build script reports failure by panicking),
/// naming the remedy for a missing target.
pub fn build(guests: &[(&str, &str)]) {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let workspace = workspace_root(&manifest_dir);
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
    for (package, _) in guests {
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
    for (_, file) in guests {
        copy(&built.join(file), &out_dir.join(file));
    }
    println!("cargo:rustc-env=PILOTAGE_GUEST_DIR={}", out_dir.display());
}

/// The folder of the workspace's `Cargo.toml` above `dir`.
fn workspace_root(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|candidate| {
            std::fs::read_to_string(candidate.join("Cargo.toml")).is_ok_and(|text| text.contains("[workspace]"))
        })
        .unwrap_or_else(|| panic!("no workspace Cargo.toml above {}", dir.display()))
        .to_path_buf()
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
