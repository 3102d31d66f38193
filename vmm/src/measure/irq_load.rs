//! The interrupt load of a phase: a host thread that raises interrupts (`inject`) or virtual-IF
//! events (`pv-event`) at a rate while the phase runs. `lapic-timer` needs no thread: the guest
//! programs its own in-kernel LAPIC.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::plan::{HostRaise, IrqSource};
use crate::machine::Mailbox;
use crate::vcpu::VcpuControl;

/// A host thread that raises interrupts (`inject`) or virtual-IF events (`pv-event`) at a rate.
#[derive(Debug)]
pub struct IrqLoad {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl IrqLoad {
    pub fn start(irq: IrqSource, controls: &[Arc<VcpuControl>], mailbox: &Mailbox) -> IrqLoad {
        let stop = Arc::new(AtomicBool::new(false));
        let Some((raise, rate)) = irq.host_raised() else {
            return IrqLoad { stop, thread: None };
        };
        let period = Duration::from_secs_f64(1.0 / rate);
        let controls = controls.to_vec();
        let mailbox = mailbox.clone();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("irq-source".into())
            .spawn(move || {
                let mut next = Instant::now() + period;
                while !flag.load(Ordering::SeqCst) {
                    let now = Instant::now();
                    if next > now {
                        std::thread::sleep(next - now);
                    }
                    next += period;
                    if Instant::now() > next + period * 4 {
                        // Fell behind (host busy): skip ticks rather than burst.
                        next = Instant::now() + period;
                    }
                    for (i, c) in controls.iter().enumerate() {
                        match raise {
                            HostRaise::Interrupt => {
                                c.irq_pending.store(true, Ordering::SeqCst);
                                c.irqs_raised.fetch_add(1, Ordering::Relaxed);
                                c.kick();
                            }
                            HostRaise::VifEvent => {
                                let _ = mailbox.set_vif_pending(i as u32, 1);
                                c.irqs_raised.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                }
            })
            .ok();
        IrqLoad { stop, thread }
    }

    pub fn stop(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
