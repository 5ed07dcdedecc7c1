//! Time on the kernel's clock during which module loads were under way:
//! loads run at once (udev's workers) and overlap, so their durations
//! added up count the same time more than once; these count it once.

use serde::{Deserialize, Serialize};

/// Module loading's time in one stage of the boot.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Loading {
    /// Loads (successful and refused) that began in the stage.
    pub loads: usize,
    /// Their durations added up (loads on several CPUs, or a load
    /// preempted by another, count each).
    pub sum_us: f64,
    /// The stage's time during which at least one load was under way.
    pub busy_us: f64,
}

/// The time within [from, to) (µs) during which at least one of the loads
/// (start, duration) was under way, wherever it began.
pub fn under_way(loads: &[(f64, f64)], from: f64, to: f64) -> f64 {
    let clipped: Vec<(f64, f64)> = loads
        .iter()
        .map(|(s, d)| (s.max(from), (s + d).min(to)))
        .filter(|(a, b)| b > a)
        .map(|(a, b)| (a, b - a))
        .collect();
    loading(&clipped, from, to).busy_us
}

/// The loads (start, duration) that began within [from, to), each cut at
/// `to`, as the intervals (start, end; µs) during which at least one was
/// under way: sorted, overlaps merged.
pub fn merged(loads: &[(f64, f64)], from: f64, to: f64) -> Vec<(f64, f64)> {
    let mut spans: Vec<(f64, f64)> =
        loads.iter().filter(|(s, _)| *s >= from && *s < to).map(|(s, d)| (*s, (s + d).min(to))).collect();
    spans.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (a, b) in spans {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Module loading within [from, to) (µs, the kernel's clock): the loads
/// that began there, each counted up to `to`.
pub fn loading(loads: &[(f64, f64)], from: f64, to: f64) -> Loading {
    let inside: Vec<(f64, f64)> = loads.iter().filter(|(s, _)| *s >= from && *s < to).copied().collect();
    Loading {
        loads: inside.len(),
        sum_us: inside.iter().map(|(s, d)| (s + d).min(to) - s).sum(),
        // fold from +0.0: f64's sum of nothing is -0.0, which prints as such
        busy_us: merged(&inside, from, to).iter().fold(0.0, |t, (a, b)| t + (b - a)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loads_under_way_in_an_interval_wherever_they_began() {
        // One load from before the interval into it, one inside, one after.
        let loads = [(0.0, 15.0), (12.0, 4.0), (30.0, 5.0)];
        assert_eq!(under_way(&loads, 10.0, 20.0), 6.0);
        assert_eq!(under_way(&loads, 20.0, 30.0), 0.0);
        assert_eq!(under_way(&loads, 0.0, 100.0), 21.0);
    }

    #[test]
    fn busy_time_counts_overlaps_once() {
        let l = loading(&[(0.0, 10.0), (5.0, 10.0), (30.0, 5.0)], 0.0, f64::MAX);
        assert_eq!((l.loads, l.sum_us, l.busy_us), (3, 25.0, 20.0));
        assert_eq!(loading(&[(0.0, 10.0), (30.0, 5.0)], 20.0, 40.0).loads, 1);
        // A load under way at the window's end counts up to it.
        let cut = loading(&[(0.0, 10.0), (30.0, 5.0)], 0.0, 32.0);
        assert_eq!((cut.loads, cut.sum_us, cut.busy_us), (2, 12.0, 12.0));
    }
}
