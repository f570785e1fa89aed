//! What a chaos run does to the manager, decided up front from the seed: the Proxmox faults
//! pve-sim injects (split from one overall rate) and when the manager process is killed.

use pve_sim::{EndpointFault, FaultSpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Latency a delayed request gets, milliseconds (a stalled `pvedaemon` worker).
pub const STALL_MS: u64 = 1_500;

/// pve-sim faults for an overall per-request fault rate `rate` (0.10 = about 10 % of requests):
/// 5xx answers (30 % of the rate, half `500`, half `503`), stalls (30 %), connections dropped
/// before the request is processed (20 %) and after it was processed with the answer lost
/// (20 %); besides, that share of tasks fails, of concurrent clones onto one local storage
/// contend for its lock, and of `qmstart` tasks fail although the VM runs.
pub fn faults(rate: f64) -> FaultSpec {
    let rate = rate.clamp(0.0, 1.0);
    let all = |f: EndpointFault| EndpointFault {
        endpoint: "*".to_owned(),
        ..f
    };
    FaultSpec {
        endpoints: vec![
            all(EndpointFault {
                error_rate: rate * 0.15,
                status: 500,
                message: "injected fault: internal error".to_owned(),
                ..EndpointFault::default()
            }),
            all(EndpointFault {
                error_rate: rate * 0.15,
                status: 503,
                message: "injected fault: service unavailable".to_owned(),
                ..EndpointFault::default()
            }),
            all(EndpointFault {
                latency_ms: STALL_MS,
                latency_rate: Some(rate * 0.3),
                ..EndpointFault::default()
            }),
            all(EndpointFault {
                drop_rate: rate * 0.2,
                drop_after_rate: rate * 0.2,
                ..EndpointFault::default()
            }),
        ],
        task_failure_rate: rate,
        storage_lock_contention: rate,
        auth_delay: false,
        start_fails_but_runs: rate,
    }
}

/// One planned kill: during step `step` (see [`steps`]), once `done` of its machines reached
/// their goal (provisioned or deleted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kill {
    /// Step index.
    pub step: usize,
    /// Machines of the step that reached their goal before the kill.
    pub done: usize,
}

/// The steps of a run over `machines` in `waves` waves: step `i` deletes wave `i - 1` (if any)
/// while it creates wave `i` (if any); returns for each step how many machines it moves.
pub fn steps(machines: usize, waves: usize) -> Vec<usize> {
    let sizes = wave_sizes(machines, waves);
    (0..=sizes.len())
        .map(|i| sizes.get(i).copied().unwrap_or(0) + i.checked_sub(1).map_or(0, |p| sizes[p]))
        .collect()
}

/// Machines per wave: `machines` split as evenly as possible over `waves` (at least one each).
pub fn wave_sizes(machines: usize, waves: usize) -> Vec<usize> {
    let waves = waves.clamp(1, machines.max(1));
    (0..waves)
        .map(|w| machines / waves + usize::from(w < machines % waves))
        .collect()
}

/// `kills` kill points over the steps of `step_sizes`, seeded: spread over distinct steps while
/// there are enough, each at a random point between 5 % and 95 % of its step; sorted.
pub fn kills(step_sizes: &[usize], kills: usize, seed: u64) -> Vec<Kill> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6b69_6c6c);
    let usable: Vec<usize> = (0..step_sizes.len()).filter(|s| step_sizes[*s] > 0).collect();
    if usable.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::with_capacity(kills);
    let mut pool = usable.clone();
    for _ in 0..kills {
        if pool.is_empty() {
            pool = usable.clone();
        }
        let step = pool.swap_remove(rng.random_range(0..pool.len()));
        let size = step_sizes[step];
        // At least one machine done (when the step has more than one), so the kill lands while
        // the step is under way rather than before its first change.
        let low = if size >= 2 {
            ((size as f64 * 0.05).floor() as usize).max(1)
        } else {
            0
        };
        let high = ((size as f64 * 0.95).ceil() as usize).max(low + 1);
        out.push(Kill {
            step,
            done: rng.random_range(low..high).min(size),
        });
    }
    out.sort_by_key(|k| (k.step, k.done));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waves_split_evenly_and_steps_overlap_deletion_with_creation() {
        assert_eq!(wave_sizes(200, 4), vec![50, 50, 50, 50]);
        assert_eq!(wave_sizes(10, 3), vec![4, 3, 3]);
        assert_eq!(wave_sizes(2, 5), vec![1, 1]);
        assert_eq!(steps(10, 3), vec![4, 7, 6, 3]);
        assert_eq!(steps(20, 1), vec![20, 20]);
    }

    #[test]
    fn kills_are_seeded_spread_and_inside_their_step() {
        let sizes = steps(200, 4);
        let a = kills(&sizes, 3, 7);
        assert_eq!(a, kills(&sizes, 3, 7), "same seed, same plan");
        assert_eq!(a.len(), 3);
        let mut distinct: Vec<usize> = a.iter().map(|k| k.step).collect();
        distinct.dedup();
        assert_eq!(distinct.len(), 3, "{a:?}");
        for k in &a {
            assert!(k.done < sizes[k.step], "{k:?}");
        }
        assert_ne!(a, kills(&sizes, 3, 8), "another seed, another plan");
        // More kills than steps: steps repeat.
        assert_eq!(kills(&steps(4, 1), 5, 1).len(), 5);
    }

    #[test]
    fn fault_rates_add_up_to_the_overall_rate() {
        let f = faults(0.1);
        let per_request: f64 = f
            .endpoints
            .iter()
            .map(|e| e.error_rate + e.latency_rate.unwrap_or(0.0) + e.drop_rate + e.drop_after_rate)
            .sum();
        assert!((per_request - 0.1).abs() < 1e-9, "{per_request}");
        assert!(f.endpoints.iter().all(|e| e.endpoint == "*"));
        assert_eq!(
            faults(0.0).endpoints.iter().map(|e| e.error_rate).sum::<f64>(),
            0.0
        );
    }
}
