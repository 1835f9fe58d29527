//! The deletion brake: a cloud that suddenly answers "gone" for many Nodes at once (a token of
//! another project, an API fault) must not empty the cluster.
//!
//! The lifecycle controller checks every NotReady Node once per monitor period, so one period
//! is one pass over them. A Node whose instance the cloud reports gone is deleted only when it
//! is reported gone again at least a period later (by then every other NotReady Node has been
//! checked too), and only while the Nodes reported gone are few: at most
//! [`DeletionBrake::max_share`] of the cluster's cloud Nodes, or a single Node. Above that,
//! none is deleted; they are held (Warning event, metric, log) and deleted once the share
//! falls below the limit again: some of them come back, or are deleted by someone else.
//!
//! Everything here is pure: the controller passes the time and the number of cloud Nodes.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use tokio::time::Instant;

/// The default share of cloud Nodes one pass may delete.
pub const DEFAULT_MAX_SHARE: f64 = 0.5;

/// Fewer Nodes reported gone than this are never held: one Node whose server was deleted is
/// deleted whatever the size of the cluster.
pub const MIN_HELD: usize = 2;

/// When a Node was reported gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Gone {
    first: Instant,
    last: Instant,
}

/// What to do with a Node the cloud reported gone.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    /// Delete it.
    Delete,
    /// Reported gone for the first time in this pass: ask again next period, once every
    /// other NotReady Node has been checked too.
    ConfirmNextPass,
    /// Too many Nodes are reported gone at once: keep them all.
    Held {
        /// Nodes reported gone in the last passes.
        gone: usize,
        /// The cluster's cloud Nodes.
        nodes: usize,
    },
}

/// Whether `gone` Nodes reported gone at once, of `nodes` cloud Nodes, are too many to delete
/// with `max_share`.
pub fn holds(max_share: f64, gone: usize, nodes: usize) -> bool {
    gone >= MIN_HELD && gone as f64 > max_share * nodes as f64
}

/// The cluster's cloud Nodes, which the brake's share counts: those with a providerID (that
/// starts with `prefix`, when given).
pub fn cloud_nodes<'a>(nodes: impl IntoIterator<Item = &'a Node>, prefix: Option<&str>) -> usize {
    nodes
        .into_iter()
        .filter_map(|node| node.spec.as_ref()?.provider_id.as_deref())
        .filter(|id| match prefix {
            Some(prefix) => id.starts_with(prefix),
            None => !id.is_empty(),
        })
        .count()
}

/// The Warning on a Node whose deletion is held.
pub fn held_message(node: &str, gone: usize, nodes: usize, max_share: f64) -> String {
    format!(
        "Node {node} is not deleted although the cloud reports its instance gone: {gone} of the {nodes} cloud Nodes are reported gone at once, more than the {:.0}% one pass may delete. Deletions resume once fewer are reported gone",
        max_share.clamp(0.0, 1.0) * 100.0
    )
}

/// The brake's memory of which Nodes the cloud reported gone, and when.
#[derive(Clone, Debug)]
pub struct DeletionBrake {
    max_share: f64,
    period: Duration,
    gone: HashMap<String, Gone>,
}

impl DeletionBrake {
    /// A brake for checks every `period`, holding deletions above `max_share` (clamped to
    /// 0..=1; 1 holds only when more Nodes are gone than the cluster has, i.e. never).
    pub fn new(max_share: f64, period: Duration) -> Self {
        let max_share = if max_share.is_nan() {
            DEFAULT_MAX_SHARE
        } else {
            max_share.clamp(0.0, 1.0)
        };
        Self {
            max_share,
            period,
            gone: HashMap::new(),
        }
    }

    /// The share above which deletions are held.
    pub fn max_share(&self) -> f64 {
        self.max_share
    }

    /// A report counts for this long after it was made: two passes and a half, so that a Node
    /// checked a little late still counts, and one that turned Ready (no longer checked)
    /// stops counting.
    fn memory(&self) -> Duration {
        self.period.mul_f64(2.5)
    }

    /// The cloud reported `node`'s instance gone at `now`; `nodes` is the number of the
    /// cluster's cloud Nodes. What to do with it.
    pub fn gone(&mut self, node: &str, now: Instant, nodes: usize) -> Verdict {
        let memory = self.memory();
        self.gone
            .retain(|_, g| now.saturating_duration_since(g.last) <= memory);
        let entry = self.gone.entry(node.to_owned()).or_insert(Gone {
            first: now,
            last: now,
        });
        entry.last = now;
        let confirmed = now.saturating_duration_since(entry.first) >= self.period;
        let held = self.held(now, nodes);
        if held > 0 {
            return Verdict::Held { gone: held, nodes };
        }
        if confirmed {
            Verdict::Delete
        } else {
            Verdict::ConfirmNextPass
        }
    }

    /// `node` exists (or is no longer checked: Ready, or gone from the cluster). Whether it
    /// had been reported gone.
    pub fn forget(&mut self, node: &str) -> bool {
        self.gone.remove(node).is_some()
    }

    /// How many Nodes the brake holds at `now` (the Nodes reported gone while they are too
    /// many; 0 while it lets deletions through).
    pub fn held(&self, now: Instant, nodes: usize) -> usize {
        let gone = self.reported(now);
        if holds(self.max_share, gone, nodes) {
            gone
        } else {
            0
        }
    }

    /// Nodes reported gone within the brake's memory, as of `now`.
    pub fn reported(&self, now: Instant) -> usize {
        let memory = self.memory();
        self.gone
            .values()
            .filter(|g| now.saturating_duration_since(g.last) <= memory)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: Duration = Duration::from_secs(5);

    fn at(start: Instant, secs: f64) -> Instant {
        start + Duration::from_secs_f64(secs)
    }

    #[test]
    fn one_gone_node_is_confirmed_a_pass_later_then_deleted() {
        let t0 = Instant::now();
        let mut brake = DeletionBrake::new(0.5, PERIOD);
        assert_eq!(brake.gone("a", t0, 10), Verdict::ConfirmNextPass);
        assert_eq!(brake.gone("a", at(t0, 4.0), 10), Verdict::ConfirmNextPass);
        assert_eq!(brake.gone("a", at(t0, 5.0), 10), Verdict::Delete);
    }

    #[test]
    fn a_single_node_is_never_held_even_in_a_one_node_cluster() {
        let t0 = Instant::now();
        let mut brake = DeletionBrake::new(0.5, PERIOD);
        brake.gone("only", t0, 1);
        assert_eq!(brake.gone("only", at(t0, 5.0), 1), Verdict::Delete);
    }

    #[test]
    fn more_than_the_share_of_the_cloud_nodes_is_held_until_it_falls_below() {
        // (nodes in the cluster, Nodes reported gone, held?)
        let cases = [
            (10, 5, false),
            (10, 6, true),
            (2, 2, true),
            (3, 2, true),
            (4, 2, false),
            (100, 50, false),
            (100, 51, true),
        ];
        for (nodes, gone, held) in cases {
            let t0 = Instant::now();
            let mut brake = DeletionBrake::new(0.5, PERIOD);
            for i in 0..gone {
                brake.gone(&format!("n{i}"), t0, nodes);
            }
            let verdict = brake.gone("n0", at(t0, 5.0), nodes);
            let expected = if held {
                Verdict::Held { gone, nodes }
            } else {
                Verdict::Delete
            };
            assert_eq!(verdict, expected, "{gone} of {nodes} gone");
        }
    }

    #[test]
    fn held_nodes_are_deleted_once_the_others_come_back() {
        let t0 = Instant::now();
        let mut brake = DeletionBrake::new(0.5, PERIOD);
        for node in ["a", "b", "c"] {
            brake.gone(node, t0, 4);
        }
        assert_eq!(
            brake.gone("a", at(t0, 5.0), 4),
            Verdict::Held { gone: 3, nodes: 4 }
        );
        // b's instance exists after all; c is deleted by someone else.
        brake.forget("b");
        brake.forget("c");
        assert_eq!(brake.held(at(t0, 10.0), 4), 0);
        assert_eq!(brake.gone("a", at(t0, 10.0), 4), Verdict::Delete);
    }

    #[test]
    fn reports_older_than_the_memory_stop_counting() {
        let t0 = Instant::now();
        let mut brake = DeletionBrake::new(0.5, PERIOD);
        brake.gone("a", t0, 4);
        brake.gone("b", t0, 4);
        // b turned Ready and is no longer checked; a is still reported gone.
        assert_eq!(brake.reported(at(t0, 12.0)), 2);
        brake.gone("a", at(t0, 10.0), 4);
        assert_eq!(brake.reported(at(t0, 13.0)), 1);
        assert_eq!(brake.gone("a", at(t0, 15.0), 4), Verdict::Delete);
    }

    #[test]
    fn a_share_of_one_never_holds_and_nonsense_falls_back_to_the_default() {
        let t0 = Instant::now();
        let mut brake = DeletionBrake::new(1.0, PERIOD);
        brake.gone("a", t0, 2);
        brake.gone("b", t0, 2);
        assert_eq!(brake.gone("a", at(t0, 5.0), 2), Verdict::Delete);
        assert_eq!(DeletionBrake::new(f64::NAN, PERIOD).max_share(), 0.5);
        assert_eq!(DeletionBrake::new(7.0, PERIOD).max_share(), 1.0);
    }
}
