//! The whole boot cut into its links, in time order, on the kernel's
//! clock: the kernel's set-up, its built-in initcalls (`initcall_debug`,
//! on in a traced boot), the way to /init, then the initramfs's stretches
//! between the lines its scripts log (udev's coldplug, the root's mount,
//! switch_root) and systemd's way to multi-user.target. Each link says how
//! much of it had a module load under way and names its largest parts, so
//! the boot's longest links, module loading among them or not, read off
//! one table (docs/system.md, "The whole boot's links").

use serde::{Deserialize, Serialize};

use crate::run::dmesg;

/// The kernel's line when it starts the initramfs's /init.
pub(crate) const RUN_INIT: &str = "Run /init as init process";
/// What bootlink's initramfs-tools scripts write to /dev/kmsg (guest/):
/// the scripts begin; udev's coldplug has settled; the root is mounted;
/// the last script before switch_root.
pub(crate) const INIT_TOP: &str = "bootlink: initramfs init-top";
pub(crate) const INIT_PREMOUNT: &str = "bootlink: initramfs init-premount";
pub(crate) const LOCAL_BOTTOM: &str = "bootlink: initramfs local-bottom";
pub(crate) const INIT_BOTTOM: &str = "bootlink: initramfs init-bottom";
/// systemd's first line in the kernel's log once it runs as PID 1.
pub(crate) const SYSTEMD_STARTS: &str = "systemd[1]: systemd ";
/// The kernel unpacks the initramfs in the background of its initcalls.
const UNPACK_STARTS: &str = "Trying to unpack rootfs image as initramfs";
const UNPACK_ENDS: &str = "Freeing initrd memory";
/// How many of a link's parts are named.
const PARTS: usize = 5;

/// A named part of a link and its time.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Part {
    pub name: String,
    pub ms: f64,
}

/// One stretch of the boot.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Link {
    /// What the stretch is, for the user ("udev coldplug", ...).
    pub name: String,
    /// Its start and end on the kernel's clock (ms from the kernel's start).
    pub start_ms: f64,
    pub end_ms: f64,
    /// Its time during which at least one module load was under way
    /// (None: the boot's loads were not traced).
    pub loading_ms: Option<f64>,
    /// Its largest parts, longest first (initcalls, systemd units).
    pub parts: Vec<Part>,
}

impl Link {
    pub fn ms(&self) -> f64 {
        self.end_ms - self.start_ms
    }
}

/// The built-in initcalls together.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Initcalls {
    pub count: usize,
    /// Their own times added up.
    pub sum_ms: f64,
    /// The initramfs's unpacking, beside them (start, end; ms).
    pub unpack_ms: Option<(f64, f64)>,
}

/// What [`cut`] needs of the boot beyond its kernel log.
pub struct Frame<'a> {
    /// multi-user.target on the kernel's clock (ms).
    pub target_ms: f64,
    /// The critical chain's units with the time each took to start.
    pub units: Vec<Part>,
    /// Every load (start, duration; µs), when traced.
    pub loads: Option<&'a [(f64, f64)]>,
}

/// The printk time (ms) of the first line of `log` holding `what`.
pub(crate) fn logged_at(log: &str, what: &str) -> Option<f64> {
    log.lines().filter(|l| l.contains(what)).find_map(|l| dmesg::timestamp(l.as_bytes())).map(|t| t.0 / 1000.0)
}

/// When PID 1 (kernel_init) called its first initcall (ms): the initcall
/// levels begin there. The console's initcalls run earlier, from
/// start_kernel on the boot CPU (`@ 0`), and are part of the set-up; in a
/// realtime boot their printk time may read 0, the clock not yet running.
fn first_of_pid1(log: &str) -> Option<f64> {
    log.lines()
        .filter(|l| l.contains("calling  ") && l.trim_end().ends_with(" @ 1"))
        .find_map(|l| dmesg::timestamp(l.as_bytes()))
        .map(|t| t.0 / 1000.0)
}

/// The boot's links from its kernel log (`dmesg`) and the frame; a
/// landmark missing or out of order is a problem, and no link is made
/// across it.
pub fn cut(log: &str, f: &Frame) -> (Vec<Link>, Initcalls, Vec<String>) {
    let mut problems = Vec::new();
    let parsed = dmesg::parse(log.as_bytes());
    let init = logged_at(log, RUN_INIT);
    let builtin: Vec<_> = parsed
        .initcalls
        .iter()
        .filter(|c| c.module.is_empty() && init.is_none_or(|t| c.start_us / 1000.0 < t))
        .collect();
    let mut calls = Initcalls {
        count: builtin.len(),
        sum_ms: builtin.iter().map(|c| c.duration_us).sum::<f64>() / 1000.0,
        unpack_ms: None,
    };
    if let (Some(a), Some(b)) = (logged_at(log, UNPACK_STARTS), logged_at(log, UNPACK_ENDS)) {
        calls.unpack_ms = Some((a, b));
    }
    // (name, the landmark that ends it, the parts named in it)
    let mut marks: Vec<(&str, Option<f64>, Vec<Part>)> = Vec::new();
    if let (Some(first), Some(last)) =
        (first_of_pid1(log), builtin.iter().map(|c| c.start_us + c.duration_us).reduce(f64::max))
    {
        let mut longest: Vec<Part> =
            builtin.iter().map(|c| Part { name: c.name.clone(), ms: c.duration_us / 1000.0 }).collect();
        longest.sort_by(|x, y| y.ms.total_cmp(&x.ms));
        longest.truncate(PARTS);
        marks.push(("kernel: set-up before the initcalls", Some(first), vec![]));
        marks.push(("kernel: built-in initcalls", Some(last / 1000.0), longest));
        marks.push(("kernel: to /init (init memory freed, the initramfs unpacked)", init, vec![]));
    } else {
        marks.push(("kernel: start to /init (no initcall_debug)", init, vec![]));
    }
    marks.push(("initrd: /init to its scripts", logged_at(log, INIT_TOP), vec![]));
    marks.push(("initrd: udev's coldplug, until settled", logged_at(log, INIT_PREMOUNT), vec![]));
    marks.push(("initrd: the root found and mounted", logged_at(log, LOCAL_BOTTOM), vec![]));
    marks.push(("initrd: its last scripts (udev stopped)", logged_at(log, INIT_BOTTOM), vec![]));
    marks.push(("switch_root to systemd", logged_at(log, SYSTEMD_STARTS), vec![]));
    let mut units = f.units.clone();
    units.sort_by(|x, y| y.ms.total_cmp(&x.ms));
    units.truncate(PARTS);
    marks.push(("systemd: to multi-user.target (the critical chain's units)", Some(f.target_ms), units));

    let mut links = Vec::new();
    let mut at = 0.0;
    for (name, end, parts) in marks {
        let Some(end) = end else {
            problems.push(format!("the boot's links: no landmark ends '{name}' in the kernel's log"));
            break;
        };
        if end < at {
            problems.push(format!("the boot's links: '{name}' ends at {end:.1} ms, before it starts ({at:.1} ms)"));
            break;
        }
        let loading_ms = f.loads.map(|l| super::spans::under_way(l, at * 1000.0, end * 1000.0) / 1000.0);
        links.push(Link { name: name.to_string(), start_ms: at, end_ms: end, loading_ms, parts });
        at = end;
    }
    (links, calls, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "[    0.000000] Linux version 6.1.0-56-amd64
[    0.100000] calling  con_init+0x0/0x22c @ 0
[    0.100010] initcall con_init+0x0/0x22c returned 0 after 10 usecs
[    0.500000] calling  init_a+0x0/0x10 @ 1
[    0.600000] initcall init_a+0x0/0x10 returned 0 after 100000 usecs
[    0.700000] Trying to unpack rootfs image as initramfs...
[    0.700100] calling  init_b+0x0/0x10 @ 1
[    1.000100] initcall init_b+0x0/0x10 returned 0 after 300000 usecs
[    1.500000] Freeing initrd memory: 29940K
[    2.000000] Run /init as init process
[    2.100000] bootlink: initramfs init-top
[    2.200000] calling  e1000e_init_module+0x0/0x1000 [e1000e] @ 130
[    2.200100] initcall e1000e_init_module+0x0/0x1000 [e1000e] returned 0 after 100 usecs
[    3.000000] bootlink: initramfs init-premount
[    3.500000] bootlink: initramfs local-bottom
[    3.600000] bootlink: initramfs init-bottom
[    3.800000] systemd[1]: systemd 252.39-1~deb12u2 running in system mode
";

    /// The critical chain's units with their start times.
    fn units() -> Vec<Part> {
        vec![Part { name: "slow.service".into(), ms: 900.0 }, Part { name: "quick.service".into(), ms: 10.0 }]
    }

    #[test]
    fn the_boot_in_time_order_with_its_loads_and_largest_parts() {
        // Two loads: one in the coldplug (2.2 s to 2.7 s), one after systemd's start.
        let loads = [(2_200_000.0, 500_000.0), (4_000_000.0, 100_000.0)];
        let f = Frame { target_ms: 5000.0, units: units(), loads: Some(&loads) };
        let (links, calls, problems) = cut(LOG, &f);
        assert!(problems.is_empty(), "{problems:?}");
        let names: Vec<&str> = links.iter().map(|l| l.name.split(':').next().unwrap()).collect();
        assert_eq!(
            names,
            ["kernel", "kernel", "kernel", "initrd", "initrd", "initrd", "initrd", "switch_root to systemd", "systemd"]
        );
        // Contiguous, from the kernel's start to the target.
        assert_eq!(links[0].start_ms, 0.0);
        assert!(links.windows(2).all(|w| w[0].end_ms == w[1].start_ms));
        assert_eq!(links.last().unwrap().end_ms, 5000.0);
        // The built-in initcalls: the console's (before PID 1's first,
        // in the set-up's link) and PID 1's; the module's init is not one.
        assert_eq!((calls.count, calls.sum_ms), (3, 400.01));
        assert_eq!(links[0].end_ms, 500.0);
        assert_eq!(calls.unpack_ms, Some((700.0, 1500.0)));
        assert_eq!((links[1].start_ms, links[1].end_ms), (500.0, 1000.1));
        assert_eq!(links[1].parts[0], Part { name: "init_b".into(), ms: 300.0 });
        // The loads fall in the coldplug and in systemd's stretch.
        assert_eq!(links[4].loading_ms, Some(500.0));
        assert_eq!(links[8].loading_ms, Some(100.0));
        assert_eq!(links.iter().map(|l| l.loading_ms.unwrap()).sum::<f64>(), 600.0);
        assert_eq!(
            links[8].parts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["slow.service", "quick.service"]
        );
    }

    #[test]
    fn a_missing_or_disordered_landmark_is_a_problem() {
        let f = Frame { target_ms: 5000.0, units: units(), loads: None };
        let log = LOG.replace("bootlink: initramfs local-bottom", "something else");
        let (links, _, problems) = cut(&log, &f);
        assert_eq!(links.len(), 5, "{links:?}");
        assert!(problems[0].contains("'initrd: the root found and mounted'"), "{problems:?}");
        assert!(links.iter().all(|l| l.loading_ms.is_none()));
        let early = Frame { target_ms: 3000.0, units: units(), loads: None };
        let (_, _, problems) = cut(LOG, &early);
        assert!(problems[0].contains("before it starts"), "{problems:?}");
        // Without initcall_debug the kernel is one link.
        let plain: String = LOG
            .lines()
            .filter(|l| !l.contains("calling") && !l.contains("initcall "))
            .map(|l| format!("{l}\n"))
            .collect();
        let (links, calls, problems) = cut(&plain, &Frame { target_ms: 5000.0, units: units(), loads: None });
        assert!(problems.is_empty() && calls.count == 0, "{problems:?}");
        assert_eq!((links[0].name.as_str(), links[0].end_ms), ("kernel: start to /init (no initcall_debug)", 2000.0));
    }
}
