//! A run leaves nothing behind: the same open fds and threads after it as before. Its own test
//! binary, so no other test opens or closes fds meanwhile.

use std::sync::Arc;

use irqbench::config::plan::{Plan, StrategyId, Workload};
use irqbench::machine::image::GuestImage;
use irqbench::measure::run_plan;
use irqbench::session::RunOptions;

fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0)
}

#[test]
fn fds_and_threads_after_runs_equal_those_before() {
    let Some(kvm) = irqbench::host::test_kvm() else {
        return;
    };
    let image = Arc::new(GuestImage::embedded().expect("embedded guest"));
    let mut plan = Plan::single(
        Workload::Strategy {
            strategy: StrategyId::from_name("native-skip").expect("strategy"),
        },
        2,
        64,
    );
    // A second phase on another vCPU count forces a second VM.
    let mut second = plan.phases[0].clone();
    second.vcpus = 1;
    second.name = "second".into();
    plan.phases.push(second);
    // Warm up process-wide state (signal handler, lazy statics) once.
    run_plan(
        &kvm,
        &plan,
        &image,
        &RunOptions::default(),
        &mut |_, _, _, _| {},
    )
    .expect("run");
    let fds = count("/proc/self/fd");
    let threads = count("/proc/self/task");
    for _ in 0..3 {
        let report = run_plan(
            &kvm,
            &plan,
            &image,
            &RunOptions::default(),
            &mut |_, _, _, _| {},
        )
        .expect("run");
        assert_eq!(report.results.len(), 2, "{:?}", report.failures);
    }
    assert_eq!(count("/proc/self/fd"), fds, "fds leaked");
    assert_eq!(count("/proc/self/task"), threads, "threads left running");
}
