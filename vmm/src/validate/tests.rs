//! Every check failed by construction from synthetic measurements, the checks that can pass only
//! on VMX/SVM passed the same way, and the measuring side on the real KVM.

use super::judge::*;
use super::noise::{cpufreq, load, smt, steal};
use super::*;
use crate::identity::InsnId;
use crate::results::host::classify;
use crate::results::KvmFlavour;
use crate::results::{CpuFreq, Smt};

const FLAVOURS: [KvmFlavour; 3] = [KvmFlavour::Vmx, KvmFlavour::Svm, KvmFlavour::Pvm];

fn e(flavour: KvmFlavour) -> Expectations {
    Expectations::new(flavour, Some("1024"))
}

fn verdict_of(j: &Judged) -> Verdict {
    assert!(!j.expected.is_empty() && !j.measured.is_empty(), "{j:?}");
    if j.verdict != Verdict::Pass {
        assert!(!j.note.is_empty(), "a {} says why: {j:?}", j.verdict.name());
    }
    j.verdict
}

#[test]
fn flavour_check_fails_on_a_contradiction_and_warns_where_the_behaviour_decides() {
    let obs = |declared, ambiguous, per_cli| FlavourObs {
        declared,
        ambiguous,
        behaviour: classify(per_cli),
    };
    for f in [KvmFlavour::Vmx, KvmFlavour::Svm] {
        assert_eq!(
            verdict_of(&flavour(&e(f), &obs(f, false, 0.0))),
            Verdict::Pass
        );
        assert_eq!(
            verdict_of(&flavour(&e(f), &obs(f, false, 1.0))),
            Verdict::Fail
        );
        assert_eq!(
            verdict_of(&flavour(&e(f), &obs(f, true, 1.0))),
            Verdict::Warn
        );
    }
    let pvm = KvmFlavour::Pvm;
    assert_eq!(
        verdict_of(&flavour(&e(pvm), &obs(pvm, false, 1.0))),
        Verdict::Pass
    );
    assert_eq!(
        verdict_of(&flavour(&e(pvm), &obs(pvm, false, 0.0))),
        Verdict::Fail
    );
    let unknown = KvmFlavour::Unknown;
    assert_eq!(
        verdict_of(&flavour(&e(unknown), &obs(unknown, false, 0.0))),
        Verdict::Warn
    );
}

#[test]
fn a_lost_or_extra_doorbell_fails_accounting() {
    let vcpu = |seen, other, stat| DoorbellVcpu {
        seen,
        other_exits: other,
        exits_stat: stat,
    };
    let good = DoorbellObs {
        rung: 64,
        vcpus: vec![vcpu(64, 0, Some(65)), vcpu(64, 0, None)],
    };
    for f in FLAVOURS {
        assert_eq!(verdict_of(&doorbells(&e(f), &good)), Verdict::Pass);
        for bad in [
            vcpu(63, 0, Some(65)),
            vcpu(65, 0, Some(66)),
            vcpu(64, 1, Some(66)),
            vcpu(64, 0, Some(10)),
        ] {
            let mut m = good.clone();
            m.vcpus[1] = bad;
            assert_eq!(verdict_of(&doorbells(&e(f), &m)), Verdict::Fail, "{m:?}");
        }
        let none = DoorbellObs {
            rung: 4,
            vcpus: vec![],
        };
        assert_eq!(verdict_of(&doorbells(&e(f), &none)), Verdict::Fail);
    }
}

#[test]
fn hypercalls_must_balance() {
    let m = |issued, seen| HypercallObs { issued, seen };
    for f in FLAVOURS {
        assert_eq!(verdict_of(&hypercalls(&e(f), &m(10, 10))), Verdict::Pass);
        assert_eq!(verdict_of(&hypercalls(&e(f), &m(10, 9))), Verdict::Fail);
        assert_eq!(verdict_of(&hypercalls(&e(f), &m(9, 10))), Verdict::Fail);
        assert_eq!(verdict_of(&hypercalls(&e(f), &m(0, 0))), Verdict::Warn);
    }
}

#[test]
fn a_variant_tsc_or_a_wrong_rate_fails() {
    let pvm = e(KvmFlavour::Pvm);
    assert_eq!(verdict_of(&tsc_invariant(&pvm, Some(true))), Verdict::Pass);
    assert_eq!(verdict_of(&tsc_invariant(&pvm, Some(false))), Verdict::Fail);
    assert_eq!(verdict_of(&tsc_invariant(&pvm, None)), Verdict::Warn);
    let rate = |khz: f64, uncertainty| TscRate {
        method: "synthetic".into(),
        kvm_khz: 2_600_000,
        kvm_reported: true,
        estimates_khz: vec![khz, khz],
        long_ms: 100.0,
        uncertainty,
    };
    for f in FLAVOURS {
        assert_eq!(
            verdict_of(&tsc_rate(&e(f), &rate(2_600_500.0, 0.0))),
            Verdict::Pass
        );
        // 0.5% fast: cycles → ns would be off by 0.5%.
        assert_eq!(
            verdict_of(&tsc_rate(&e(f), &rate(2_613_000.0, 0.0))),
            Verdict::Fail
        );
        assert_eq!(
            verdict_of(&tsc_rate(&e(f), &rate(2_613_000.0, 0.01))),
            Verdict::Warn
        );
        assert_eq!(
            verdict_of(&tsc_rate(&e(f), &rate(2_613_000.0, 0.001))),
            Verdict::Fail
        );
        let none = TscRate {
            estimates_khz: vec![],
            ..rate(0.0, 0.0)
        };
        assert_eq!(verdict_of(&tsc_rate(&e(f), &none)), Verdict::Fail);
    }
    let unreported = TscRate {
        kvm_reported: false,
        ..rate(2_600_100.0, 0.0)
    };
    assert_eq!(verdict_of(&tsc_rate(&pvm, &unreported)), Verdict::Warn);
}

#[test]
fn vcpus_with_offset_tscs_fail_and_preemption_alone_does_not() {
    let khz = 2_600_000;
    // Synchronized TSCs: a few µs of jitter and a third of the blocks preempted (±3 ms).
    let mut skews: Vec<i64> = (0..30).map(|i| (i % 7 - 3) * 2_600).collect();
    skews.extend((0..10).map(|i| if i % 2 == 0 { 7_800_000 } else { -7_800_000 }));
    let good = TscSkew {
        method: "synthetic".into(),
        khz,
        skews_cycles: skews.clone(),
        preempted: 3,
    };
    assert_eq!(
        verdict_of(&tsc_vcpus(&e(KvmFlavour::Vmx), &good)),
        Verdict::Pass
    );
    // vCPU 1's TSC 2 ms ahead in every block.
    let offset = TscSkew {
        method: "synthetic".into(),
        khz,
        skews_cycles: skews.iter().map(|s| s + 5_200_000).collect(),
        preempted: 0,
    };
    assert_eq!(
        verdict_of(&tsc_vcpus(&e(KvmFlavour::Vmx), &offset)),
        Verdict::Fail
    );
    let busy = TscSkew {
        method: "synthetic".into(),
        khz,
        skews_cycles: vec![0; 3],
        preempted: 61,
    };
    assert_eq!(
        verdict_of(&tsc_vcpus(&e(KvmFlavour::Pvm), &busy)),
        Verdict::Warn
    );
}

fn net(insn: InsnId, exits: f64, instructions: u32) -> InsnNet {
    InsnNet {
        insn,
        units: 4096,
        blocks: 4,
        exits,
        insn_emulation: 0.0,
        instructions,
    }
}

#[test]
fn cpuid_exits_as_each_flavour_counts_them() {
    for f in [KvmFlavour::Vmx, KvmFlavour::Svm] {
        // Only on VMX/SVM: CPUID always exits.
        assert_eq!(
            verdict_of(&cpuid_exits(&e(f), &net(InsnId::CPUID, 1.0, 5))),
            Verdict::Pass
        );
        assert_eq!(
            verdict_of(&cpuid_exits(&e(f), &net(InsnId::CPUID, 0.0, 5))),
            Verdict::Fail
        );
        assert_eq!(
            verdict_of(&cpuid_exits(&e(f), &net(InsnId::CPUID, 2.0, 5))),
            Verdict::Fail
        );
    }
    let pvm = e(KvmFlavour::Pvm);
    assert_eq!(
        verdict_of(&cpuid_exits(&pvm, &net(InsnId::CPUID, 0.008, 5))),
        Verdict::Pass
    );
    assert_eq!(
        verdict_of(&cpuid_exits(&pvm, &net(InsnId::CPUID, 1.0, 5))),
        Verdict::Fail
    );
}

#[test]
fn flag_instructions_that_exit_fail() {
    let quiet = [
        net(InsnId::CLI, 0.0, 1),
        net(InsnId::STI, 0.0001, 1),
        net(InsnId::POPF_SET_IF, 0.0, 3),
    ];
    for f in [KvmFlavour::Vmx, KvmFlavour::Svm] {
        // Only on VMX/SVM: no exit at all.
        assert_eq!(verdict_of(&flag_insn_exits(&e(f), &quiet)), Verdict::Pass);
        let mut exiting = quiet.clone();
        exiting[2].exits = 1.0;
        assert_eq!(verdict_of(&flag_insn_exits(&e(f), &exiting)), Verdict::Fail);
        assert_eq!(verdict_of(&flag_insn_exits(&e(f), &[])), Verdict::Fail);
    }
    let pvm = e(KvmFlavour::Pvm);
    // One exit per 1024 emulated instructions: 3/1024 for cli; push; popf.
    let batches = [
        net(InsnId::CLI, 1.0 / 1024.0, 1),
        net(InsnId::POPF_SET_IF, 3.0 / 1024.0, 3),
    ];
    let j = flag_insn_exits(&pvm, &batches);
    assert_eq!(verdict_of(&j), Verdict::Pass);
    assert!(j.note.contains("batch"), "{j:?}");
    let exiting = [net(InsnId::CLI, 0.05, 1)];
    assert_eq!(verdict_of(&flag_insn_exits(&pvm, &exiting)), Verdict::Fail);
}

#[test]
fn window_hlt_and_injection_failures() {
    let inj = |raised, taken, windows| InjectObs {
        vcpus: 2,
        phases: 1,
        raised,
        injected: taken,
        taken,
        window_exits: windows,
        share: Share {
            taken: taken as f64,
            offered: raised as f64,
            while_preempted: 0.0,
        },
    };
    for f in FLAVOURS {
        assert_eq!(
            verdict_of(&irq_window(&e(f), &inj(200, 190, 40))),
            Verdict::Pass
        );
        assert_eq!(
            verdict_of(&irq_window(&e(f), &inj(200, 190, 0))),
            Verdict::Fail
        );
        assert_eq!(verdict_of(&irq_window(&e(f), &inj(0, 0, 0))), Verdict::Fail);
        // A retried probe says how many phases its sums are over.
        let retried = irq_window(
            &e(f),
            &InjectObs {
                phases: 3,
                ..inj(600, 570, 2)
            },
        );
        assert_eq!(verdict_of(&retried), Verdict::Pass);
        assert!(
            retried.measured.ends_with("570 taken in 3 phases"),
            "{}",
            retried.measured
        );
        let hlt = |executed, exits| HltObs { executed, exits };
        assert_eq!(verdict_of(&hlt_exits(&e(f), &hlt(512, 512))), Verdict::Pass);
        assert_eq!(verdict_of(&hlt_exits(&e(f), &hlt(512, 511))), Verdict::Fail);
        assert_eq!(verdict_of(&hlt_exits(&e(f), &hlt(0, 0))), Verdict::Fail);
        assert_eq!(
            verdict_of(&inject(&e(f), &inj(200, 199, 40))),
            Verdict::Pass
        );
        assert_eq!(
            verdict_of(&inject(&e(f), &inj(200, 201, 40))),
            Verdict::Fail
        );
        assert_eq!(verdict_of(&inject(&e(f), &inj(200, 0, 0))), Verdict::Fail);
    }
    // Only on VMX/SVM is a shortfall a failure; PVM's late windows merge interrupts.
    assert_eq!(
        verdict_of(&inject(&e(KvmFlavour::Vmx), &inj(200, 40, 30))),
        Verdict::Fail
    );
    assert_eq!(
        verdict_of(&inject(&e(KvmFlavour::Pvm), &inj(200, 40, 30))),
        Verdict::Warn
    );
    // … however few (10 of 200: the share says how late its windows opened), as long as the
    // guest took every interrupt KVM accepted; an accepted one it never took is lost, on PVM
    // too (one per vCPU and phase may still be queued at the phase's end).
    assert_eq!(
        verdict_of(&inject(&e(KvmFlavour::Pvm), &inj(200, 10, 30))),
        Verdict::Warn
    );
    let accepted = |injected| InjectObs {
        injected,
        ..inj(200, 40, 30)
    };
    assert_eq!(
        verdict_of(&inject(&e(KvmFlavour::Pvm), &accepted(42))),
        Verdict::Warn
    );
    let lost = inject(&e(KvmFlavour::Pvm), &accepted(43));
    assert_eq!(verdict_of(&lost), Verdict::Fail);
    assert!(lost.note.contains("3 interrupts"), "{}", lost.note);
    // A shortfall while the vCPU threads waited for a CPU is the busy host's, not the
    // flavour's: that time is counted apart.
    let busy = InjectObs {
        share: Share {
            taken: 120.0,
            offered: 200.0,
            while_preempted: 70.0,
        },
        ..inj(200, 120, 30)
    };
    assert_eq!(
        verdict_of(&inject(&e(KvmFlavour::Vmx), &busy)),
        Verdict::Pass
    );
    let too_busy = InjectObs {
        share: Share {
            taken: 5.0,
            offered: 200.0,
            while_preempted: 190.0,
        },
        ..inj(200, 5, 3)
    };
    assert_eq!(
        verdict_of(&inject(&e(KvmFlavour::Vmx), &too_busy)),
        Verdict::Warn
    );
}

#[test]
fn lapic_timer_shortfalls_fail_on_vmx_svm_and_warn_on_pvm() {
    let share = |taken: f64, while_preempted| Share {
        taken,
        offered: 200.0,
        while_preempted,
    };
    let obs = |ticks: &[u64]| LapicObs {
        period_us: 1000.0,
        per_vcpu: ticks.iter().map(|&t| share(t as f64, 0.0)).collect(),
    };
    for f in FLAVOURS {
        assert_eq!(
            verdict_of(&lapic_timer(&e(f), &obs(&[199, 203]))),
            Verdict::Pass
        );
        assert_eq!(
            verdict_of(&lapic_timer(&e(f), &obs(&[200, 0]))),
            Verdict::Fail
        );
        assert_eq!(verdict_of(&lapic_timer(&e(f), &obs(&[300]))), Verdict::Fail);
        assert_eq!(verdict_of(&lapic_timer(&e(f), &obs(&[]))), Verdict::Fail);
    }
    for f in [KvmFlavour::Vmx, KvmFlavour::Svm] {
        // Only on VMX/SVM must every tick arrive.
        assert_eq!(
            verdict_of(&lapic_timer(&e(f), &obs(&[120, 200]))),
            Verdict::Fail
        );
    }
    let j = lapic_timer(&e(KvmFlavour::Pvm), &obs(&[120, 80]));
    assert_eq!(verdict_of(&j), Verdict::Warn);
    assert!(j.note.contains("emulation batches"), "{j:?}");
    // One tick in ten is a lost load even on PVM.
    assert_eq!(
        verdict_of(&lapic_timer(&e(KvmFlavour::Pvm), &obs(&[120, 20]))),
        Verdict::Fail
    );
    // Ticks lost while a vCPU thread waited for a CPU do not count against the flavour …
    let preempted = LapicObs {
        per_vcpu: vec![share(130.0, 60.0)],
        ..obs(&[])
    };
    assert_eq!(
        verdict_of(&lapic_timer(&e(KvmFlavour::Vmx), &preempted)),
        Verdict::Pass
    );
    // … and with too little time left to count, every flavour WARNs.
    let thin = LapicObs {
        per_vcpu: vec![share(3.0, 190.0)],
        ..obs(&[])
    };
    assert_eq!(
        verdict_of(&lapic_timer(&e(KvmFlavour::Vmx), &thin)),
        Verdict::Warn
    );
}

#[test]
fn exit_sites_resolve_where_each_flavour_leaves_the_rip() {
    let expected = vec![("irqbench_hypercall".to_owned(), 0x1000, 0x1001)];
    let seen = |rip: u64, sym: &str| SiteObs {
        expected: expected.clone(),
        seen: vec![(rip, 7, sym.to_owned())],
        issued: 7,
    };
    for f in [KvmFlavour::Vmx, KvmFlavour::Svm] {
        // Only on VMX/SVM: RIP at the out.
        assert_eq!(
            verdict_of(&exit_site(&e(f), &seen(0x1000, "irqbench_hypercall"))),
            Verdict::Pass
        );
        assert_eq!(
            verdict_of(&exit_site(&e(f), &seen(0x1001, "irqbench_hypercall"))),
            Verdict::Warn
        );
    }
    let pvm = e(KvmFlavour::Pvm);
    assert_eq!(
        verdict_of(&exit_site(&pvm, &seen(0x1001, "irqbench_hypercall"))),
        Verdict::Pass
    );
    for f in FLAVOURS {
        assert_eq!(
            verdict_of(&exit_site(&e(f), &seen(0x2000, "guest_main"))),
            Verdict::Fail
        );
        // No event came (as `accounting.hypercalls` WARNs): nothing to place.
        let no_event = SiteObs {
            expected: expected.clone(),
            seen: vec![],
            issued: 0,
        };
        assert_eq!(verdict_of(&exit_site(&e(f), &no_event)), Verdict::Warn);
        let lost = SiteObs {
            issued: 3,
            ..no_event.clone()
        };
        assert_eq!(verdict_of(&exit_site(&e(f), &lost)), Verdict::Fail);
        let no_symbol = SiteObs {
            expected: vec![],
            ..lost
        };
        assert_eq!(verdict_of(&exit_site(&e(f), &no_symbol)), Verdict::Fail);
    }
}

#[test]
fn a_noisy_host_warns() {
    assert_eq!(verdict_of(&load(Readable::Value(0.3), 2)), Verdict::Pass);
    assert_eq!(verdict_of(&load(Readable::Value(3.0), 2)), Verdict::Warn);
    assert_eq!(
        verdict_of(&load(Readable::Unavailable("x".into()), 2)),
        Verdict::Warn
    );
    let st = |steal, total| {
        Ok(StealObs {
            steal_ticks: steal,
            total_ticks: total,
            seconds: 1.0,
        })
    };
    assert_eq!(verdict_of(&steal(st(0, 200))), Verdict::Pass);
    assert_eq!(verdict_of(&steal(st(20, 200))), Verdict::Warn);
    assert_eq!(
        verdict_of(&steal(Err("no /proc/stat".into()))),
        Verdict::Warn
    );
    let freq = |governor: &str, boost| {
        Readable::Value(CpuFreq {
            driver: "acpi-cpufreq".into(),
            governors: [(governor.to_owned(), vec![0, 1])].into(),
            boost: Readable::Value(boost),
        })
    };
    assert_eq!(
        verdict_of(&cpufreq(&freq("performance", false))),
        Verdict::Pass
    );
    assert_eq!(
        verdict_of(&cpufreq(&freq("performance", true))),
        Verdict::Warn
    );
    assert_eq!(
        verdict_of(&cpufreq(&freq("schedutil", false))),
        Verdict::Warn
    );
    assert_eq!(
        verdict_of(&cpufreq(&Readable::Unavailable("no driver".into()))),
        Verdict::Warn
    );
    let smt_on = Readable::Value(Smt {
        control: "on".into(),
        active: true,
    });
    let busy = SmtObs {
        smt: smt_on.clone(),
        busiest_sibling: Some((3, 0.6)),
    };
    assert_eq!(verdict_of(&smt(&busy)), Verdict::Warn);
    let idle = SmtObs {
        smt: smt_on,
        busiest_sibling: Some((3, 0.01)),
    };
    assert_eq!(verdict_of(&smt(&idle)), Verdict::Pass);
    let off = SmtObs {
        smt: Readable::Value(Smt {
            control: "notsupported".into(),
            active: false,
        }),
        busiest_sibling: None,
    };
    assert_eq!(verdict_of(&smt(&off)), Verdict::Pass);
}

#[test]
fn the_report_lists_problems_and_the_worst_verdict() {
    let check = |id: &str, verdict| Check {
        id: id.into(),
        verdict,
        expected: "e".into(),
        measured: "m".into(),
        note: if verdict == Verdict::Pass {
            String::new()
        } else {
            "why".into()
        },
    };
    let v = Validation {
        scope: Scope::Full,
        flavour: KvmFlavour::Pvm,
        verdict: Verdict::Warn,
        seconds: 1.5,
        checks: vec![check("a.b", Verdict::Pass), check("c.d", Verdict::Warn)],
        guest_boot_failed: None,
        placement: None,
    };
    assert_eq!(
        problem_lines(&v),
        ["validation WARN c.d: measured m; expected e\n  why: why"]
    );
    let text = render(&v);
    assert!(
        text.contains("PASS  a.b") && text.contains("why:      why"),
        "{text}"
    );
    assert!(
        text.trim_end().ends_with("WARN: 1 PASS, 1 WARN, 0 FAIL"),
        "{text}"
    );
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["checks"][1]["verdict"], "warn");
    assert_eq!(json["scope"], "full");
    assert!(json["checks"][0].get("note").is_none());
}

// ---------------------------------------------------------------------------------------------
// The measuring side, on the real KVM.

fn image() -> Arc<GuestImage> {
    Arc::new(GuestImage::embedded().expect("embedded guest"))
}

#[test]
fn doorbells_and_hlts_are_counted_exactly_on_this_host() {
    let Some(kvm) = crate::host::test_kvm() else {
        return;
    };
    let mut s =
        probes::boot(&kvm, &image(), 2, IrqchipMode::Userspace, &Stop::new()).expect("boot");
    let d = probes::doorbells(&mut s, 37).expect("doorbells");
    assert_eq!(d.vcpus.len(), 2);
    assert_eq!(
        verdict_of(&doorbells(&e(KvmFlavour::Pvm), &d)),
        Verdict::Pass,
        "{d:?}"
    );
    let r = probes::insn_rounds(&mut s, &[InsnId::CLI, InsnId::HLT_EXIT], 32, 2).expect("rounds");
    let hlt = r.hlt.expect("a hlt-exit block");
    // 32 iterations × 2 rounds × 2 vCPUs, each one KVM_EXIT_HLT.
    assert_eq!((hlt.executed, hlt.exits), (128, 128));
    let cli = &r.nets[0];
    assert_eq!((cli.insn, cli.units, cli.blocks), (InsnId::CLI, 1024, 4));
    s.shutdown();
}

/// The measuring VM's own vCPUs, read through KVM between phases: one TSC (the two threads
/// read microseconds apart, which the correction takes out), every pair a sample on a quiet
/// host, and the session still runs phases afterwards (the guest waited for work throughout).
#[test]
fn the_measuring_vms_vcpus_read_through_kvm_keep_one_tsc() {
    let Some(kvm) = crate::host::test_kvm() else {
        return;
    };
    let m = crate::host::manifest(&kvm).expect("manifest");
    let mut s =
        probes::boot(&kvm, &image(), 2, IrqchipMode::Userspace, &Stop::new()).expect("boot");
    let skew = probes::tsc_skew_kvm(&mut s, 32, m.tsc_khz).expect("readings");
    assert_eq!(skew.skews_cycles.len() + skew.preempted, 32);
    let j = tsc_vcpus(&e(m.kvm_flavour), &skew);
    if m.emulated_cpu.is_none() {
        assert_eq!(verdict_of(&j), Verdict::Pass, "{j:?}");
    } else {
        println!("emulated CPU: not judged: {j:?}");
    }
    let r = probes::insn_rounds(&mut s, &[InsnId::CLI], 16, 1).expect("a phase after the readings");
    assert_eq!(r.nets[0].insn, InsnId::CLI);
    s.shutdown();
}

#[test]
fn the_kvm_tsc_readings_agree_with_kvm_get_tsc_khz_and_across_vcpus() {
    let Some(kvm) = crate::host::test_kvm() else {
        return;
    };
    let m = crate::host::manifest(&kvm).expect("manifest");
    let probe = probes::TscProbe::start(&kvm).expect("probe vCPU");
    let rate = probe
        .finish(m.tsc_khz, true, Duration::from_millis(50), 1e-12)
        .expect("reading");
    let off = rate.estimates_khz[0] / m.tsc_khz as f64 - 1.0;
    assert!(off.abs() < 0.002 + rate.uncertainty, "{rate:?}");
    // Two vCPUs of one VM keep one TSC (kvm_synchronize_tsc).
    let skew = probes::tsc_offsets(&kvm, m.tsc_khz, 16).expect("two vCPUs");
    let j = tsc_vcpus(&e(m.kvm_flavour), &skew);
    assert_ne!(verdict_of(&j), Verdict::Fail, "{j:?}");
}

#[test]
fn the_quick_suite_records_the_flavour_and_fits_in_a_run() {
    let Some(kvm) = crate::host::test_kvm() else {
        return;
    };
    let mut m = crate::host::manifest(&kvm).expect("manifest");
    let v = run(&kvm, &image(), &mut m, Scope::Quick, &Stop::new());
    println!("{}", render(&v));
    let ids: Vec<&str> = v.checks.iter().map(|c| c.id.as_str()).collect();
    for id in [
        "flavour",
        "accounting.doorbells",
        "tsc.rate",
        "exits.cpuid",
        "exits.flag-insns",
    ] {
        assert!(ids.contains(&id), "{id} missing: {ids:?}");
    }
    assert!(
        m.flavour.behaviour.value().is_some(),
        "{:?}",
        m.flavour.behaviour
    );
    assert_eq!(m.flavour.behavioural, Some(m.kvm_flavour));
    // It fits in a run by what it contains, not by a wall time (which an emulated or loaded
    // host stretches): none of the checks that last a fixed time (the steal window, timer and
    // injection phases), one vCPU.
    for slow in [
        "noise.steal",
        "irq.lapic-timer-1v",
        "irq.lapic-timer-2v",
        "irq.inject",
    ] {
        assert!(!ids.contains(&slow), "{slow} in the quick suite: {ids:?}");
    }
    assert!(ids.len() < 18, "{ids:?}");
    assert_ne!(v.verdict, Verdict::Fail, "{}", render(&v));
}

/// `run`'s two steps give the same checks, in the same order, as the one-step quick suite.
#[test]
fn the_quick_suite_in_two_steps_records_the_same_checks() {
    let Some(kvm) = crate::host::test_kvm() else {
        return;
    };
    let mut one = crate::host::manifest(&kvm).expect("manifest");
    before_run(&kvm, &image(), &mut one, OnFail::Refuse, &Stop::new())
        .expect("the one-step quick suite passes");
    let mut two = crate::host::manifest(&kvm).expect("manifest");
    let probe = probes::TscProbe::start(&kvm);
    let pending = begin_run(
        &kvm,
        &image(),
        &mut two,
        OnFail::Refuse,
        probe,
        &Stop::new(),
    )
    .expect("not refused")
    .expect("the TSC reading is still open");
    assert!(two.validation.is_none(), "recorded before it was finished");
    finish_run(pending, &mut two, OnFail::Refuse).expect("the two-step quick suite passes");
    let ids = |m: &HostManifest| -> Vec<String> {
        let v = m.validation.as_ref().expect("recorded");
        v.checks.iter().map(|c| c.id.clone()).collect()
    };
    assert_eq!(ids(&one), ids(&two));
}

/// The quick suite's KVM reading of the TSC rate ends once its timing uncertainty is within
/// the target, or at its longest span, and never before either: an unreachable target waits
/// the whole span out.
#[test]
fn the_tsc_span_lasts_until_its_uncertainty_or_its_longest() {
    let Some(kvm) = crate::host::test_kvm() else {
        return;
    };
    let khz = crate::host::manifest(&kvm).expect("manifest").tsc_khz;
    let longest = Duration::from_millis(15);
    for target in [QUICK_TSC_UNCERTAINTY, 1e-12] {
        let probe = probes::TscProbe::start(&kvm).expect("a probe VM");
        let rate = probe.finish(khz, true, longest, target).expect("a rate");
        let over = rate.long_ms >= longest.as_secs_f64() * 1e3;
        assert!(rate.uncertainty <= target || over, "{target}: {rate:?}");
        assert!(rate.uncertainty > 0.0, "a reading has a bracket: {rate:?}");
        if target < 1e-9 {
            assert!(over, "ended before its longest span: {rate:?}");
        }
    }
}

/// A probe that could not start is a FAIL known at once: the run is refused by the first
/// step, the validation finished and recorded, and forcing it lets the run go on.
#[test]
fn a_tsc_probe_that_did_not_start_refuses_the_run_at_once() {
    let Some(kvm) = crate::host::test_kvm() else {
        return;
    };
    let mut m = crate::host::manifest(&kvm).expect("manifest");
    let refused = begin_run(
        &kvm,
        &image(),
        &mut m,
        OnFail::Refuse,
        Err("no probe VM".into()),
        &Stop::new(),
    );
    // On an emulated CPU (QEMU TCG, Bochs) the TSC checks are not judged, so nothing refuses.
    let emulated = m.emulated_cpu.is_some();
    if emulated {
        if let Some(pending) = refused.expect("not refused on an emulated CPU") {
            finish_run(pending, &mut m, OnFail::Refuse).expect("not refused on an emulated CPU");
        }
    } else {
        assert!(
            matches!(refused, Err(Refusal::HostFailed(_))),
            "not refused"
        );
    }
    let v = m.validation.as_ref().expect("recorded");
    let tsc = v
        .checks
        .iter()
        .find(|c| c.id == "tsc.rate")
        .expect("tsc.rate");
    let want = if emulated {
        Verdict::NotJudged
    } else {
        Verdict::Fail
    };
    assert_eq!(tsc.verdict, want, "{tsc:?}");
    if emulated {
        return; // the forced run below needs a FAIL to force past
    }
    let mut forced = crate::host::manifest(&kvm).expect("manifest");
    let pending = begin_run(
        &kvm,
        &image(),
        &mut forced,
        OnFail::Measure,
        Err("no probe VM".into()),
        &Stop::new(),
    )
    .expect("forced: not refused")
    .expect("still open");
    finish_run(pending, &mut forced, OnFail::Measure).expect("forced");
    assert_eq!(
        forced.validation.as_ref().map(|v| v.verdict),
        Some(Verdict::Fail)
    );
}

#[test]
fn the_full_suite_passes_on_this_host() {
    let Some(kvm) = crate::host::test_kvm() else {
        return;
    };
    let mut m = crate::host::manifest(&kvm).expect("manifest");
    let v = run(&kvm, &image(), &mut m, Scope::Full, &Stop::new());
    println!("{}", render(&v));
    assert_eq!(v.checks.len(), 18, "{}", render(&v));
    assert!(v.seconds.is_finite() && v.seconds > 0.0, "{}", v.seconds);
    assert_ne!(v.verdict, Verdict::Fail, "{}", render(&v));
}

/// On an emulated CPU (QEMU TCG, Bochs) the checks of hardware timing are not judged, with the
/// reason, never a PASS or a FAIL; the others are judged as on hardware.
#[test]
fn an_emulated_cpu_leaves_timing_checks_not_judged() {
    let mut checks = Vec::new();
    let mut suite = Suite {
        e: Expectations::new(KvmFlavour::Svm, None),
        emulated: Some("QEMU TCG (hypervisor signature TCGTCGTCGTCG)".into()),
        checks: &mut checks,
        boot_failed: None,
        stop: Stop::new(),
    };
    suite.push(
        "tsc.invariant",
        tsc_invariant(&Expectations::new(KvmFlavour::Svm, None), Some(false)),
    );
    suite.push(
        "exits.cpuid",
        Judged {
            verdict: Verdict::Fail,
            ..Judged::default()
        },
    );
    assert_eq!(checks[0].verdict, Verdict::NotJudged);
    assert!(
        checks[0].note.contains("emulated (QEMU TCG"),
        "{}",
        checks[0].note
    );
    assert_eq!(
        checks[1].verdict,
        Verdict::Fail,
        "exit counts are judged as on hardware"
    );
    assert!(Verdict::NotJudged < Verdict::Warn && Verdict::Pass < Verdict::NotJudged);
}

/// A busy host's interrupts add exits to the blocks: a moderate excess is noise (WARN), not a
/// host that miscounts; a full extra exit per cpuid, or a missing one, still fails.
#[test]
fn a_few_extra_exits_per_cpuid_are_a_busy_hosts_noise() {
    let pvm = e(KvmFlavour::Pvm);
    assert_eq!(
        verdict_of(&cpuid_exits(&pvm, &net(InsnId::CPUID, 0.17, 5))),
        Verdict::Warn
    );
    let svm = e(KvmFlavour::Svm);
    assert_eq!(
        verdict_of(&cpuid_exits(&svm, &net(InsnId::CPUID, 1.4, 5))),
        Verdict::Warn
    );
}
