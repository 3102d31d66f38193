//! Pinning vCPU threads (`run.pin`): vCPU i to the i-th CPU this process may run on
//! (`sched_getaffinity`, so `taskset` and cpusets are respected), each pin read back, and every
//! failure reported — a report says "pinned" only where the kernel agreed.

use std::os::unix::thread::JoinHandleExt;
use std::thread::JoinHandle;

/// Where each vCPU thread of a session runs, or why it could not be pinned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pinning {
    /// Indexed by vCPU: the CPU its thread is pinned to, `None` where pinning failed.
    pub cpus: Vec<Option<usize>>,
    /// One line per vCPU that could not be pinned, with the reason.
    pub errors: Vec<String>,
}

impl Pinning {
    /// Every vCPU is pinned.
    pub fn complete(&self) -> bool {
        self.errors.is_empty() && self.cpus.iter().all(Option::is_some)
    }
}

/// The CPUs the calling thread may run on (its affinity mask), in ascending order.
pub fn allowed_cpus() -> Result<Vec<usize>, String> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most
    // size_of::<cpu_set_t>() bytes into the set we own, for the calling thread (pid 0).
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(format!(
                "sched_getaffinity: {}",
                std::io::Error::last_os_error()
            ));
        }
        set
    };
    Ok(cpus_in(&set))
}

fn cpus_in(set: &libc::cpu_set_t) -> Vec<usize> {
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: CPU_ISSET only reads the set, at an index below CPU_SETSIZE.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, set) })
        .collect()
}

/// vCPU i → the i-th allowed CPU, round robin when vCPUs outnumber them.
pub fn plan(allowed: &[usize], vcpus: u32) -> Vec<usize> {
    if allowed.is_empty() {
        return Vec::new();
    }
    (0..vcpus as usize)
        .map(|i| allowed[i % allowed.len()])
        .collect()
}

/// Pins `thread` to `cpu` alone and reads the mask back.
pub fn pin_thread<T>(thread: &JoinHandle<T>, cpu: usize) -> Result<(), String> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(format!("CPU {cpu} is beyond CPU_SETSIZE"));
    }
    let pthread = thread.as_pthread_t();
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it (cpu is below
    // CPU_SETSIZE); pthread_setaffinity_np reads the set for a thread that is alive (we hold
    // its JoinHandle, so it has not been joined or detached).
    let err = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::pthread_setaffinity_np(pthread, size_of::<libc::cpu_set_t>(), &set)
    };
    if err != 0 {
        return Err(format!(
            "pinning to CPU {cpu}: {}",
            std::io::Error::from_raw_os_error(err)
        ));
    }
    // SAFETY: as above; pthread_getaffinity_np writes the thread's mask into the set we own.
    let (err, set) = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        let err = libc::pthread_getaffinity_np(pthread, size_of::<libc::cpu_set_t>(), &mut set);
        (err, set)
    };
    let now = cpus_in(&set);
    if err != 0 || now != [cpu] {
        return Err(format!(
            "pinned to CPU {cpu}, but its mask reads {now:?} ({})",
            std::io::Error::from_raw_os_error(err)
        ));
    }
    Ok(())
}

/// Pins each of `threads` (vCPU i = `threads[i]`) per [`plan`] over the allowed CPUs.
pub fn pin_all<T>(threads: &[JoinHandle<T>]) -> Pinning {
    let allowed = match allowed_cpus() {
        Ok(a) if !a.is_empty() => a,
        Ok(_) => return failed(threads.len(), "the affinity mask is empty".into()),
        Err(e) => return failed(threads.len(), e),
    };
    let mut pinning = Pinning::default();
    for (i, (thread, cpu)) in threads
        .iter()
        .zip(plan(&allowed, threads.len() as u32))
        .enumerate()
    {
        match pin_thread(thread, cpu) {
            Ok(()) => pinning.cpus.push(Some(cpu)),
            Err(e) => {
                pinning.cpus.push(None);
                pinning.errors.push(format!("vCPU {i}: {e}"));
            }
        }
    }
    pinning
}

fn failed(vcpus: usize, why: String) -> Pinning {
    Pinning {
        cpus: vec![None; vcpus],
        errors: vec![format!("vCPU threads not pinned: {why}")],
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    #[test]
    fn vcpus_take_the_allowed_cpus_in_turn() {
        assert_eq!(plan(&[2, 5], 3), [2, 5, 2]);
        assert_eq!(plan(&[7], 2), [7, 7]);
        assert!(plan(&[], 2).is_empty());
    }

    /// A thread parked until told to go, to pin from outside.
    fn parked() -> (JoinHandle<()>, mpsc::Sender<()>) {
        let (tx, rx) = mpsc::channel::<()>();
        (
            std::thread::spawn(move || {
                let _ = rx.recv();
            }),
            tx,
        )
    }

    #[test]
    fn a_pin_the_kernel_refuses_is_an_error_naming_the_cpu() {
        let (thread, go) = parked();
        let err = pin_thread(&thread, 1000).expect_err("no CPU 1000 here");
        assert!(err.contains("CPU 1000"), "{err}");
        let err = pin_thread(&thread, 4096).expect_err("beyond the set");
        assert!(err.contains("CPU_SETSIZE"), "{err}");
        let cpu = allowed_cpus().expect("mask")[0];
        pin_thread(&thread, cpu).expect("an allowed CPU");
        drop(go);
        thread.join().expect("join");
    }

    /// Under `taskset -c N` (here: a test thread restricted to its last allowed CPU), vCPU
    /// threads spawned from it go to N, not to CPU 0 and 1.
    #[test]
    fn pinning_follows_a_restricted_affinity_mask() {
        let last = *allowed_cpus().expect("mask").last().expect("a CPU");
        let pinning = std::thread::spawn(move || {
            // SAFETY: as in `pin_thread`, for the calling thread (pid 0).
            let rc = unsafe {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(last, &mut set);
                libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set)
            };
            assert_eq!(rc, 0, "restricting the test thread");
            let (handles, gos): (Vec<_>, Vec<_>) = (0..2).map(|_| parked()).unzip();
            let pinning = pin_all(&handles);
            drop(gos);
            for h in handles {
                h.join().expect("join");
            }
            pinning
        })
        .join()
        .expect("test thread");
        assert!(pinning.complete(), "{pinning:?}");
        assert_eq!(pinning.cpus, [Some(last), Some(last)]);
    }
}
