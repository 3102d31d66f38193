//! Criterion benchmarks of the harness's OWN costs, not of the strategies it measures:
//!
//! - `boot_to_first_doorbell`: VM creation → guest boot → every vCPU's BOOTED doorbell
//!   (`machine_create` alone, `boot` without the shutdown, `boot_and_shutdown`).
//! - `doorbell_round_trip`: one PING doorbell exit round trip, by host wall time and by the
//!   guest's TSC, and the fixed cost of one dispatch with no PING at all; the vCPU loop's host
//!   share of a PING is printed. `irqbench reference` sets the round trip against a raw
//!   port-I/O exit in the same invocation.
//! - `stats_snapshot`: one `StatsFd::snapshot()` of a vCPU and of a VM stats fd.
//! - `harness_overhead_vs_vcpus`: one zero-iteration dispatch (command, BEGIN and END doorbells,
//!   two stats snapshots per vCPU, validation) at 1, 2, 4 and 8 vCPUs.
//!
//! Without `/dev/kvm` every benchmark prints `skipped: …` and returns.
//! Run with `cargo bench -p irqbench --bench harness`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, SamplingMode};
use irqbench::config::plan::{HypercallTransport, IrqSource, PhasePlan, Plan, Workload};
use irqbench::host;
use irqbench::kvm::stats::StatsFd;
use irqbench::machine::image::GuestImage;
use irqbench::machine::{IrqchipMode, Machine, MachineConfig};
use irqbench::session::descriptor::diagnostic as descriptor_for;
use irqbench::session::{Dispatch, Session};
use irqbench::vcpu::Stop;
use kvm_ioctls::Kvm;

/// PING doorbells per dispatch in `doorbell_round_trip`.
const PINGS: u64 = 200;
/// Watchdog for one dispatch; a healthy one takes milliseconds.
const DISPATCH_TIMEOUT: Duration = Duration::from_secs(60);
/// vCPU counts of `harness_overhead_vs_vcpus` (8 oversubscribes a 2-CPU host on purpose).
const VCPU_COUNTS: [u32; 4] = [1, 2, 4, 8];

/// The open `/dev/kvm` and the embedded guest, shared by one benchmark function.
struct Env {
    kvm: Kvm,
    image: Arc<GuestImage>,
}

/// `None` (after printing `skipped: …`) when `/dev/kvm` cannot be opened.
fn env(bench: &str) -> Option<Env> {
    let Some(kvm) = host::test_kvm() else {
        println!("skipped: {bench}: /dev/kvm cannot be opened");
        return None;
    };
    let image = GuestImage::embedded()
        .unwrap_or_else(|e| panic!("the embedded guest image does not parse: {e}"));
    Some(Env {
        kvm,
        image: Arc::new(image),
    })
}

fn machine_config(vcpus: u32) -> MachineConfig {
    MachineConfig {
        vcpus,
        memory_bytes: 16 << 20,
        irqchip: IrqchipMode::Userspace,
        hypercall_exits: false,
        ipi_sender: false,
    }
}

/// Creates the VM and returns once every vCPU has rung its BOOTED doorbell.
fn boot(env: &Env, vcpus: u32) -> Session {
    Session::boot(
        &env.kvm,
        &env.image,
        machine_config(vcpus),
        HypercallTransport::Port,
        false,
        &Stop::new(),
    )
    .unwrap_or_else(|e| panic!("booting {vcpus} vCPU(s) failed: {e}"))
}

/// The `Doorbells` phase on `vcpus` vCPUs, no interrupt load.
fn doorbell_phase(vcpus: u32) -> PhasePlan {
    Plan::single(Workload::Doorbells, vcpus, 0)
        .phases
        .into_iter()
        .next()
        .expect("Plan::single has one phase")
}

/// One dispatch of `phase` with `pings` PING doorbells per vCPU.
fn ring(session: &mut Session, phase: &PhasePlan, pings: u64) -> Dispatch {
    session
        .dispatch(
            descriptor_for(phase, pings),
            IrqSource::None,
            DISPATCH_TIMEOUT,
        )
        .unwrap_or_else(|e| panic!("dispatching {pings} doorbells failed: {e}"))
}

/// Checks once, outside any timing, that a dispatch really rings `pings` doorbells per vCPU.
fn check_pings(session: &mut Session, phase: &PhasePlan, pings: u64) {
    let d = ring(session, phase, pings);
    assert_eq!(d.samples.len(), phase.vcpus as usize, "one sample per vCPU");
    for s in &d.samples {
        assert_eq!(s.pings, pings, "vCPU {} saw {} PINGs", s.index, s.pings);
        if pings > 0 {
            // The vCPU loop's own share of a PING (see `irqbench reference` for the rest).
            let per = |t: Duration| t / u32::try_from(pings).unwrap_or(u32::MAX);
            println!(
                "doorbell_round_trip: vCPU {} host side per PING {:?}, of which {:?} to the \
                 doorbell handled",
                s.index,
                per(s.ping_host),
                per(s.ping_handled)
            );
        }
    }
}

/// Prints, once and outside any timing, where a zero-PING dispatch spends its time: the host
/// wall time of the whole dispatch, the vCPU threads' BEGIN→END window (after the BEGIN
/// snapshot: guest resume, END exit, END snapshot and delta) and the guest's own TSC between
/// its two `rdtsc`s.
fn print_breakdown(bench: &str, session: &mut Session, phase: &PhasePlan, tsc_khz: u64) {
    const WARM_UP: u32 = 10;
    const RUNS: u32 = 50;
    for _ in 0..WARM_UP {
        ring(session, phase, 0);
    }
    let mut dispatch = Duration::ZERO;
    let mut window = Duration::ZERO;
    let mut window_max = Duration::ZERO;
    let mut guest_cycles = 0u64;
    for _ in 0..RUNS {
        let started = Instant::now();
        let d = ring(session, phase, 0);
        dispatch += started.elapsed();
        let walls = d.samples.iter().map(|s| s.wall);
        window += walls.clone().sum::<Duration>() / phase.vcpus;
        window_max += walls.max().unwrap_or_default();
        guest_cycles += d.max_cycles();
    }
    println!(
        "{bench}: {} vCPU(s), zero-PING dispatch {:?}: BEGIN→END window per vCPU {:?} \
         (longest {:?}), guest TSC t0→t1 {:?}; mean of {RUNS}",
        phase.vcpus,
        dispatch / RUNS,
        window / RUNS,
        window_max / RUNS,
        cycles_to_duration(guest_cycles / u64::from(RUNS), tsc_khz)
    );
}

fn cycles_to_duration(cycles: u64, tsc_khz: u64) -> Duration {
    Duration::from_secs_f64(cycles as f64 / (tsc_khz.max(1) as f64 * 1000.0))
}

/// The host's TSC frequency, to turn guest TSC cycles into time.
fn tsc_khz(kvm: &Kvm) -> u64 {
    host::manifest(kvm)
        .map(|m| m.tsc_khz)
        .unwrap_or_else(|e| panic!("reading the host manifest failed: {e}"))
        .max(1)
}

/// Times `iters` PING doorbells as whole `PINGS`-doorbell dispatches; `measure` turns one
/// dispatch and its host wall time into the time charged to its `PINGS` doorbells.
fn per_ping(
    session: &mut Session,
    phase: &PhasePlan,
    iters: u64,
    measure: impl Fn(&Dispatch, Duration) -> Duration,
) -> Duration {
    let dispatches = iters.div_ceil(PINGS).max(1);
    let mut total = Duration::ZERO;
    for _ in 0..dispatches {
        let started = Instant::now();
        let d = ring(session, phase, PINGS);
        total += measure(&d, started.elapsed());
    }
    total.mul_f64(iters as f64 / (dispatches * PINGS) as f64)
}

/// VM creation → guest boot → first (BOOTED) doorbell of a 1-vCPU guest.
fn boot_to_first_doorbell(c: &mut Criterion) {
    let Some(env) = env("boot_to_first_doorbell") else {
        return;
    };
    let mut group = c.benchmark_group("boot_to_first_doorbell");
    group.sampling_mode(SamplingMode::Flat);
    // KVM_CREATE_VM, memory, page tables, image, vCPU setup; nothing runs (then closed).
    group.bench_function("machine_create", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let started = Instant::now();
                let machine = Machine::create(&env.kvm, &env.image, machine_config(1))
                    .unwrap_or_else(|e| panic!("creating the machine failed: {e}"));
                total += started.elapsed();
                drop(black_box(machine));
            }
            total
        });
    });
    // Session::boot up to the BOOTED doorbell; the shutdown is not timed.
    group.bench_function("boot", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let started = Instant::now();
                let session = boot(&env, 1);
                total += started.elapsed();
                session.shutdown();
            }
            total
        });
    });
    // The whole life of an idle session: boot, Shutdown command, threads joined, fds closed.
    group.bench_function("boot_and_shutdown", |b| b.iter(|| boot(&env, 1).shutdown()));
    group.finish();
}

/// One PING doorbell exit round trip, and the fixed cost of one dispatch.
fn doorbell_round_trip(c: &mut Criterion) {
    let Some(env) = env("doorbell_round_trip") else {
        return;
    };
    let tsc_khz = tsc_khz(&env.kvm);
    let mut session = boot(&env, 1);
    let phase = doorbell_phase(1);
    check_pings(&mut session, &phase, PINGS);
    check_pings(&mut session, &phase, 0);
    print_breakdown("doorbell_round_trip", &mut session, &phase, tsc_khz);

    let mut group = c.benchmark_group("doorbell_round_trip");
    // Host wall time of a PINGS-doorbell dispatch / PINGS: includes 1/PINGS of the fixed cost.
    group.bench_function(format!("ping_wall_k{PINGS}"), |b| {
        b.iter_custom(|iters| per_ping(&mut session, &phase, iters, |_, wall| wall));
    });
    // The guest's TSC between BEGIN and END / PINGS: the PING exits alone.
    group.bench_function(format!("ping_guest_tsc_k{PINGS}"), |b| {
        b.iter_custom(|iters| {
            per_ping(&mut session, &phase, iters, |d, _| {
                cycles_to_duration(d.max_cycles(), tsc_khz)
            })
        });
    });
    // No PING at all: command exit, BEGIN and END doorbells, two stats snapshots, validation.
    group.bench_function("dispatch_k0", |b| {
        b.iter(|| ring(&mut session, &phase, 0));
    });
    group.finish();
    session.shutdown();
}

/// One read of a stats fd and its decoding, for a vCPU and for the VM.
fn stats_snapshot(c: &mut Criterion) {
    let Some(env) = env("stats_snapshot") else {
        return;
    };
    let machine = Machine::create(&env.kvm, &env.image, machine_config(1))
        .unwrap_or_else(|e| panic!("creating the machine failed: {e}"));
    let Some(vcpu) = machine.vcpus.first() else {
        panic!("the machine has no vCPU");
    };
    let fds = StatsFd::for_vcpu(vcpu).and_then(|v| Ok((v, StatsFd::for_vm(&machine.vm)?)));
    let (vcpu_stats, vm_stats) = match fds {
        Ok(fds) => fds,
        Err(e) => {
            println!("skipped: stats_snapshot: no binary stats fd ({e})");
            return;
        }
    };
    for (what, fd) in [("vCPU", &vcpu_stats), ("VM", &vm_stats)] {
        println!(
            "stats_snapshot: the {what} stats fd publishes {} stats in {} bytes",
            fd.schema().descriptors.len(),
            fd.schema().data_len()
        );
    }

    let mut group = c.benchmark_group("stats_snapshot");
    group.sample_size(20);
    group.bench_function("vcpu", |b| {
        b.iter(|| vcpu_stats.snapshot().expect("vCPU stats snapshot"));
    });
    group.bench_function("vm", |b| {
        b.iter(|| vm_stats.snapshot().expect("VM stats snapshot"));
    });
    // What the END doorbell does besides its snapshot: the per-vCPU delta.
    let earlier = vcpu_stats.snapshot().expect("vCPU stats snapshot");
    let later = vcpu_stats.snapshot().expect("vCPU stats snapshot");
    group.bench_function("vcpu_delta", |b| {
        b.iter(|| black_box(&later).delta(black_box(&earlier)));
    });
    group.finish();
}

/// The per-phase harness overhead (a zero-iteration dispatch) as the vCPU count grows.
fn harness_overhead_vs_vcpus(c: &mut Criterion) {
    let Some(env) = env("harness_overhead_vs_vcpus") else {
        return;
    };
    let tsc_khz = tsc_khz(&env.kvm);
    let mut group = c.benchmark_group("harness_overhead_vs_vcpus");
    for vcpus in VCPU_COUNTS {
        let booted = Instant::now();
        let mut session = boot(&env, vcpus);
        println!(
            "harness_overhead_vs_vcpus: booted {vcpus} vCPU(s) in {:?}",
            booted.elapsed()
        );
        let phase = doorbell_phase(vcpus);
        check_pings(&mut session, &phase, 0);
        print_breakdown("harness_overhead_vs_vcpus", &mut session, &phase, tsc_khz);
        group.bench_with_input(BenchmarkId::from_parameter(vcpus), &vcpus, |b, _| {
            b.iter(|| ring(&mut session, &phase, 0));
        });
        session.shutdown();
    }
    group.finish();
}

fn criterion_config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
}

criterion_group! {
    name = benches;
    config = criterion_config();
    targets = boot_to_first_doorbell, doorbell_round_trip, stats_snapshot, harness_overhead_vs_vcpus
}
criterion_main!(benches);
