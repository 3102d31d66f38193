//! Builds the guest kernel (its own workspace in ../guest) and hands its path to the VMM, which
//! embeds it with `include_bytes!`: `irqbench` is one self-contained binary.
//!
//! The guest is always built in release mode: its code is what is being measured, and the hosts we
//! build on emulate it instruction by instruction.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let guest_dir = manifest_dir.join("../guest");
    let abi_dir = manifest_dir.join("../abi");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let target_dir = out_dir.join("guest-target");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());

    for path in [
        "src",
        "Cargo.toml",
        "build.rs",
        "link.ld",
        ".cargo/config.toml",
    ] {
        println!("cargo:rerun-if-changed={}", guest_dir.join(path).display());
    }
    println!("cargo:rerun-if-changed={}", abi_dir.join("src").display());
    println!(
        "cargo:rerun-if-changed={}",
        abi_dir.join("Cargo.toml").display()
    );

    let mut cmd = Command::new(cargo);
    // Run from the guest directory so that its .cargo/config.toml (rustflags) applies, and drop
    // what the outer cargo exported for *this* package: flags, wrappers (clippy, coverage) and the
    // target directory belong to the VMM build, not to the freestanding guest.
    cmd.current_dir(&guest_dir)
        .args([
            "build",
            "--release",
            "--offline",
            "--locked",
            "--bin",
            "irqbench-guest",
        ])
        .arg("--target-dir")
        .arg(&target_dir);
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_MAKEFLAGS",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_LLVM_COV",
        "LLVM_PROFILE_FILE",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build the guest: {e}"));
    if !status.success() {
        panic!(
            "building the guest kernel failed ({status}); try `cd guest && cargo build --release` \
             to see why"
        );
    }
    let elf = target_dir.join("release/irqbench-guest");
    println!("cargo:rustc-env=IRQBENCH_GUEST_ELF={}", elf.display());
}
