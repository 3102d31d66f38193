use super::*;

fn short() -> ProbeOptions {
    ProbeOptions {
        rounds: 12,
        iterations: 40,
        exit_iterations: 5,
        ..Default::default()
    }
}

#[test]
fn a_shuffle_is_a_permutation_fixed_by_seed_and_round() {
    for round in 0..50 {
        let mut o = shuffled(4, 7, round);
        assert_eq!(o, shuffled(4, 7, round));
        o.sort_unstable();
        assert_eq!(o, vec![0, 1, 2, 3]);
    }
    let orders: std::collections::BTreeSet<_> = (0..50).map(|r| shuffled(4, 7, r)).collect();
    assert!(orders.len() > 5, "only {} distinct orders", orders.len());
}

#[test]
fn bad_options_are_refused_with_their_value() {
    for (o, needle) in [
        (
            ProbeOptions {
                rounds: 0,
                ..short()
            },
            "rounds = 0",
        ),
        (
            ProbeOptions {
                iterations: 0,
                ..short()
            },
            "iterations = 0",
        ),
        (
            ProbeOptions {
                exit_iterations: 2_000_000,
                ..short()
            },
            "exit iterations = 2000000",
        ),
    ] {
        let e = o.check().expect_err("refused").to_string();
        assert!(e.contains(needle), "{e}");
    }
}

#[test]
fn the_probe_gives_every_variant_a_figure_on_real_kvm() {
    let Some(kvm) = crate::host::test_kvm() else {
        return;
    };
    let r = run_probe(&kvm, &short()).expect("the probe runs");
    assert_eq!(r.table.rounds.len(), 12);
    for row in &r.table.rounds {
        assert!(row.iter().all(Option::is_some), "a block is missing");
    }
    for body in [Body::CliSti, Body::Popf, Body::PortOut] {
        let s = r.net(body);
        assert!(
            s.median.is_finite() && s.ci95[0] <= s.median && s.median <= s.ci95[1],
            "{body:?}: {s:?}"
        );
    }
    // Five instructions against two; a port-I/O exit against two plain instructions.
    assert!(r.net(Body::Popf).median > r.net(Body::CliSti).median);
    assert!(r.raw(Body::PortOut).median > r.raw(Body::CliSti).median);
    let ratio = r.ratio(Body::Popf, Body::CliSti);
    assert!(ratio.median > 0.0 && ratio.median < 1.0, "{ratio:?}");
    // Every out of the exit variant came back to the host, once per iteration.
    for row in &r.table.rounds {
        let exits = row[3].as_ref().map(|c| c.userspace_exits);
        assert_eq!(exits, Some(5));
    }
}

#[test]
fn a_block_that_never_asks_again_times_out() {
    let Some(kvm) = crate::host::test_kvm() else {
        return;
    };
    let mut p = Probe::boot(&kvm, Arc::new(AtomicBool::new(false))).expect("boot");
    // 2^32-1 iterations of popf: hours when emulated, seconds natively; either way past 0.3 s.
    let e = p
        .block(Body::Popf, u32::MAX, Duration::from_millis(300))
        .expect_err("cut short");
    assert!(matches!(e, ReferenceError::Timeout(_)), "{e}");
}

#[test]
#[ignore = "diagnostic: prints KVM stats per block"]
fn stats_per_block() {
    let Some(kvm) = crate::host::test_kvm() else {
        return;
    };
    let mut p = Probe::boot(&kvm, Arc::new(AtomicBool::new(false))).expect("boot");
    let fd = crate::kvm::stats::StatsFd::for_vcpu(p.vcpu_fd()).expect("stats");
    for body in [
        Body::Empty,
        Body::CliSti,
        Body::Popf,
        Body::Empty,
        Body::CliSti,
        Body::Popf,
    ] {
        let a = fd.snapshot().expect("snap");
        let t = p.block(body, 350, Duration::from_secs(5)).expect("block");
        let d = fd.snapshot().expect("snap").delta(&a);
        let v: Vec<_> = d.values.iter().filter(|(_, v)| **v > 0).collect();
        println!("{body:?} {} {v:?}", t.cycles / 350);
    }
}

#[test]
#[ignore = "diagnostic: prints popf blocks in order"]
fn popf_in_order() {
    let Some(kvm) = crate::host::test_kvm() else {
        return;
    };
    let o = ProbeOptions {
        rounds: 40,
        iterations: 350,
        exit_iterations: 0,
        ..Default::default()
    };
    let r = run_probe(&kvm, &o).expect("probe");
    for (i, row) in r.table.rounds.iter().enumerate() {
        let c: Vec<u64> = row
            .iter()
            .map(|c| c.as_ref().map_or(0, |c| c.cycles_mean as u64 / 350))
            .collect();
        println!("{i} {c:?} {:?}", shuffled(3, o.seed, i as u32 + 1));
    }
}
