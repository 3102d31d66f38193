//! Link the guest as a freestanding static ELF at the address the VMM loads it to.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let script = format!("{dir}/link.ld");
    for arg in [
        "-nostartfiles",
        "-nostdlib",
        "-static",
        "-no-pie",
        "-Wl,--build-id=none",
        "-Wl,-z,norelro",
        "-Wl,-z,noexecstack",
    ] {
        println!("cargo:rustc-link-arg-bin=irqbench-guest={arg}");
    }
    println!("cargo:rustc-link-arg-bin=irqbench-guest=-Wl,-T,{script}");
    println!("cargo:rerun-if-changed=link.ld");
    println!("cargo:rerun-if-changed=src/ops.S");
}
