//! Route creations that failed: each (Node, pod CIDR) is tried again after a growing delay
//! rather than on every pass, and each distinct reason is reported once.
//!
//! A route that cannot be created usually stays so for a while (the Node's server is not in
//! the network, the Node is not a cloud server): trying it every 10-s pass would spend the
//! cloud's request budget for nothing, and a Warning event per attempt would bury the one
//! that says why. A creation that asks for another route than the one that failed (the Node's
//! addresses or providerID changed, e.g. once its server was attached to the network) is
//! tried at once.

use parking_lot::Mutex;
use std::collections::HashMap;

use ipnet::IpNet;
use tokio::time::Instant;

use super::decisions::{RouteCreation, addresses_equal};

/// Delays between the attempts of one failing creation: after the first failure `base`,
/// doubling with each further one, at most `max`.
pub type CreateBackoff = crate::runtime::workqueue::Backoff;

/// One failing creation.
#[derive(Debug)]
struct Failure {
    /// The creation as asked for when it last failed.
    asked: RouteCreation,
    /// Failures in a row.
    failures: u32,
    /// Not tried again before this.
    retry_at: Instant,
    /// The message of the last Warning event written about it.
    reported: String,
}

/// Failing creations by (Node name, pod CIDR). Entries go when the creation succeeds or is no
/// longer wanted ([`FailedCreations::retain`]), so the map is never larger than the set of
/// routes a pass wants to create.
#[derive(Debug, Default)]
pub struct FailedCreations {
    entries: Mutex<HashMap<(String, IpNet), Failure>>,
}

fn key(creation: &RouteCreation) -> (String, IpNet) {
    (
        creation.node.clone(),
        creation.route.destination_cidr.trunc(),
    )
}

/// Whether `a` and `b` ask for the same route: the same target instance and the same Node
/// addresses (in any order).
fn same_request(a: &RouteCreation, b: &RouteCreation) -> bool {
    a.route.target_provider_id == b.route.target_provider_id
        && addresses_equal(
            &a.route.target_node_addresses,
            &b.route.target_node_addresses,
        )
}

impl FailedCreations {
    fn entries(&self) -> parking_lot::MutexGuard<'_, HashMap<(String, IpNet), Failure>> {
        self.entries.lock()
    }

    /// Whether `creation` may be tried at `now`: it never failed, its delay is over, or it asks
    /// for another route than the one that failed.
    pub fn due(&self, creation: &RouteCreation, now: Instant) -> bool {
        self.entries().get(&key(creation)).is_none_or(|failure| {
            now >= failure.retry_at || !same_request(&failure.asked, creation)
        })
    }

    /// Record that `creation` failed at `now` with `message`; the next attempt waits for
    /// `backoff`, growing with each failure in a row, unless the failure was `transient` (the
    /// network, a 5xx, a rate limit: nothing about this route): then the next attempt comes
    /// after the first delay, and the row of failures does not grow, so that a route that
    /// met an outage is in place soon after it. Returns whether `message` is to be reported:
    /// it differs from the last one reported for this (Node, CIDR).
    pub fn failed(
        &self,
        creation: &RouteCreation,
        message: &str,
        transient: bool,
        backoff: &CreateBackoff,
        now: Instant,
    ) -> bool {
        let mut entries = self.entries();
        let failure = entries.entry(key(creation)).or_insert_with(|| Failure {
            asked: creation.clone(),
            failures: 0,
            retry_at: now,
            reported: String::new(),
        });
        failure.asked = creation.clone();
        failure.retry_at = if transient {
            now + backoff.delay(0)
        } else {
            failure.failures = failure.failures.saturating_add(1);
            now + backoff.delay(failure.failures.saturating_sub(1))
        };
        let new_reason = failure.reported != message;
        if new_reason {
            message.clone_into(&mut failure.reported);
        }
        new_reason
    }

    /// Forget `creation`'s failures: it succeeded.
    pub fn succeeded(&self, creation: &RouteCreation) {
        self.entries().remove(&key(creation));
    }

    /// Keep only the failures of `wanted` (the creations of the current pass): a Node that
    /// went away, or whose route exists now, starts afresh should it fail again.
    pub fn retain(&self, wanted: &[RouteCreation]) {
        self.entries().retain(|(node, cidr), _| {
            wanted
                .iter()
                .any(|c| c.node == *node && c.route.destination_cidr.trunc() == *cidr)
        });
    }

    /// When the first failing creation may be tried again.
    pub fn next_retry(&self) -> Option<Instant> {
        self.entries().values().map(|f| f.retry_at).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::test_support::addr;
    use crate::provider::Route;
    use std::time::Duration;

    fn creation(node: &str, cidr: &str, internal_ip: &str) -> RouteCreation {
        RouteCreation {
            node: node.into(),
            name_hint: format!("uid-{node}"),
            route: Route {
                name: String::new(),
                target_node: node.into(),
                target_provider_id: "hcloud://1".into(),
                destination_cidr: cidr.parse().unwrap(),
                blackhole: false,
                enable_node_addresses: false,
                target_node_addresses: vec![addr("InternalIP", internal_ip)],
            },
        }
    }

    const BACKOFF: CreateBackoff = CreateBackoff {
        base: Duration::from_secs(10),
        max: Duration::from_secs(300),
    };

    #[test]
    fn delays_double_from_one_period_up_to_the_cap() {
        let delays: Vec<u64> = (0..8).map(|n| BACKOFF.delay(n).as_secs()).collect();
        assert_eq!(delays, vec![10, 20, 40, 80, 160, 300, 300, 300]);
        assert_eq!(BACKOFF.delay(u32::MAX), Duration::from_secs(300));
    }

    #[test]
    fn an_hour_of_passes_tries_a_stuck_creation_sixteen_times() {
        let failed = FailedCreations::default();
        let stuck = creation("outsider", "10.244.9.0/24", "10.0.0.9");
        let start = Instant::now();
        let mut attempts = 0;
        // A pass every 10 s for an hour, each trying the creation when it is due.
        for pass in 0..360 {
            let now = start + Duration::from_secs(10 * pass);
            if failed.due(&stuck, now) {
                attempts += 1;
                failed.failed(&stuck, "not attached", false, &BACKOFF, now);
            }
        }
        // At 0, 10, 30, 70 and 150 s, then every 300 s from 310 s on (11 times).
        assert_eq!(attempts, 16);
    }

    #[test]
    fn a_transient_failure_is_tried_again_after_the_first_delay_and_does_not_grow_the_row() {
        let failed = FailedCreations::default();
        let c = creation("node-1", "10.244.1.0/24", "10.0.0.2");
        let t = Instant::now();
        // Three outages in a row: each time the next attempt comes after the first delay.
        for n in 0..3 {
            let now = t + Duration::from_secs(10 * n);
            failed.failed(&c, "503", true, &BACKOFF, now);
            assert!(!failed.due(&c, now + Duration::from_secs(9)));
            assert!(failed.due(&c, now + Duration::from_secs(10)));
        }
        // A lasting reason afterwards starts its row at the first delay too.
        let now = t + Duration::from_secs(30);
        failed.failed(&c, "not attached", false, &BACKOFF, now);
        assert!(failed.due(&c, now + Duration::from_secs(10)));
        failed.failed(&c, "not attached", false, &BACKOFF, now);
        assert!(!failed.due(&c, now + Duration::from_secs(19)));
        assert!(failed.due(&c, now + Duration::from_secs(20)));
    }

    #[test]
    fn each_reason_is_reported_once() {
        let failed = FailedCreations::default();
        let c = creation("a", "10.244.1.0/24", "10.0.0.1");
        let t = Instant::now();
        assert!(failed.failed(&c, "not attached", false, &BACKOFF, t));
        assert!(!failed.failed(&c, "not attached", false, &BACKOFF, t));
        assert!(failed.failed(&c, "locked", false, &BACKOFF, t));
        assert!(failed.failed(&c, "not attached", false, &BACKOFF, t));
        // After a success the same reason is news again.
        failed.succeeded(&c);
        assert!(failed.failed(&c, "not attached", false, &BACKOFF, t));
    }

    #[test]
    fn a_changed_request_is_tried_at_once_and_keeps_its_backoff() {
        let failed = FailedCreations::default();
        let c = creation("a", "10.244.1.0/24", "10.0.0.1");
        let t = Instant::now();
        failed.failed(&c, "x", false, &BACKOFF, t);
        failed.failed(&c, "x", false, &BACKOFF, t);
        assert!(!failed.due(&c, t + Duration::from_secs(19)));
        assert!(failed.due(&c, t + Duration::from_secs(20)));
        assert_eq!(failed.next_retry(), Some(t + Duration::from_secs(20)));

        let moved = creation("a", "10.244.1.0/24", "10.0.0.2");
        assert!(failed.due(&moved, t), "new addresses are tried at once");
        let mut added = c.clone();
        added
            .route
            .target_node_addresses
            .push(addr("Hostname", "a"));
        assert!(failed.due(&added, t), "an added address is a change");
        failed.failed(&added, "x", false, &BACKOFF, t);
        let mut reordered = added.clone();
        reordered.route.target_node_addresses.reverse();
        assert!(!failed.due(&reordered, t), "the order of addresses is not");
        let mut other_instance = c.clone();
        other_instance.route.target_provider_id = "hcloud://2".into();
        assert!(failed.due(&other_instance, t));

        // Its failure continues the count: the fourth delay.
        failed.failed(&moved, "x", false, &BACKOFF, t);
        assert!(!failed.due(&moved, t + Duration::from_secs(79)));
        assert!(failed.due(&moved, t + Duration::from_secs(80)));
    }

    #[test]
    fn only_wanted_creations_are_remembered() {
        let failed = FailedCreations::default();
        let a = creation("a", "10.244.1.0/24", "10.0.0.1");
        let b = creation("b", "10.244.2.0/24", "10.0.0.2");
        let t = Instant::now();
        failed.failed(&a, "x", false, &BACKOFF, t);
        failed.failed(&b, "x", false, &BACKOFF, t + Duration::from_secs(5));
        failed.retain(std::slice::from_ref(&b));
        assert!(failed.due(&a, t));
        assert!(!failed.due(&b, t + Duration::from_secs(10)));
        assert_eq!(failed.next_retry(), Some(t + Duration::from_secs(15)));
        failed.retain(&[]);
        assert_eq!(failed.next_retry(), None);
    }
}
