//! The invariants checked all the time, while the schedule runs and while it converges: a
//! watch of the Nodes (every deletion the runner did not make is checked against the cloud)
//! and a poll of the cloud every 250 ms (never two load balancers with one Service UID). The
//! poll also writes the cloud's load balancer and route changes into the event log.

use parking_lot::Mutex;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt as _;
use hcloud_sim::AdminClient;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use kube::runtime::watcher;
use serde_json::Value;
use tokio::task::JoinHandle;

use crate::eventlog::EventLog;
use crate::invariants::{
    NODE_DELETED_WITH_SERVER, SERVICE_UID_LABEL, TWO_LOAD_BALANCERS, duplicate_load_balancers,
    node_deletion_violation,
};

/// A broken invariant: which one, and what was seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The invariant.
    pub invariant: &'static str,
    /// What broke it.
    pub detail: String,
}

/// The continuous checks of one schedule; dropping it stops them.
#[derive(Debug)]
pub struct Watchers {
    violations: Arc<Mutex<Vec<Violation>>>,
    checks: Arc<AtomicU64>,
    tasks: Vec<JoinHandle<()>>,
}

impl Watchers {
    /// Starts the Node watch and the cloud poll.
    pub fn start(
        kube: kube::Client,
        admin: AdminClient,
        runner_deleted: Arc<Mutex<BTreeSet<String>>>,
        log: EventLog,
    ) -> Self {
        let violations = Arc::new(Mutex::new(Vec::new()));
        let checks = Arc::new(AtomicU64::new(0));
        let found = Found {
            violations: violations.clone(),
            checks: checks.clone(),
            log: log.clone(),
        };
        let tasks = vec![
            tokio::spawn(watch_nodes(
                kube,
                admin.clone(),
                runner_deleted,
                found.clone(),
            )),
            tokio::spawn(poll_cloud(admin, found)),
        ];
        Watchers {
            violations,
            checks,
            tasks,
        }
    }

    /// The violations found so far.
    pub fn violations(&self) -> Vec<Violation> {
        self.violations.lock().clone()
    }

    /// Checks made so far.
    pub fn checks(&self) -> u64 {
        self.checks.load(Ordering::Relaxed)
    }

    /// Stops both checks.
    pub fn stop(&mut self) {
        for task in self.tasks.drain(..) {
            task.abort();
        }
    }
}

impl Drop for Watchers {
    fn drop(&mut self) {
        self.stop();
    }
}

#[derive(Debug, Clone)]
struct Found {
    violations: Arc<Mutex<Vec<Violation>>>,
    checks: Arc<AtomicU64>,
    log: EventLog,
}

impl Found {
    fn checked(&self) {
        self.checks.fetch_add(1, Ordering::Relaxed);
    }

    fn violation(&self, invariant: &'static str, detail: String) {
        self.log
            .log(format_args!("VIOLATION of \"{invariant}\": {detail}"));
        self.violations.lock().push(Violation { invariant, detail });
    }
}

async fn watch_nodes(
    kube: kube::Client,
    admin: AdminClient,
    runner_deleted: Arc<Mutex<BTreeSet<String>>>,
    found: Found,
) {
    let nodes: Api<Node> = Api::all(kube);
    let mut events = watcher(nodes, watcher::Config::default()).boxed();
    while let Some(event) = events.next().await {
        let node = match event {
            Ok(watcher::Event::Delete(node)) => node,
            Ok(_) => continue,
            Err(e) => {
                found.log.log(format_args!("Node watch: {e}; it resumes"));
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let name = node.metadata.name.clone().unwrap_or_default();
        let by_runner = runner_deleted.lock().remove(&name);
        if by_runner {
            found
                .log
                .log(format_args!("Node {name} deleted (by the runner)"));
            continue;
        }
        found
            .log
            .log(format_args!("Node {name} deleted (not by the runner)"));
        match admin.state().await {
            Ok(cloud) => {
                found.checked();
                if let Some(detail) = node_deletion_violation(&node, &cloud) {
                    found.violation(NODE_DELETED_WITH_SERVER, detail);
                }
            }
            Err(e) => found.log.log(format_args!(
                "cannot check the deletion of Node {name}: {e}"
            )),
        }
    }
}

/// Load balancers (id → name and Service UID) and routes (destination → gateway).
fn cloud_objects(cloud: &Value) -> (BTreeMap<i64, String>, BTreeMap<String, String>) {
    let lbs = cloud["load_balancers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|lb| {
            Some((
                lb["id"].as_i64()?,
                format!(
                    "{} (Service UID {})",
                    lb["name"].as_str().unwrap_or_default(),
                    lb["labels"][SERVICE_UID_LABEL].as_str().unwrap_or("none")
                ),
            ))
        })
        .collect();
    let routes = cloud["networks"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|n| n["routes"].as_array().cloned().unwrap_or_default())
        .filter_map(|r| {
            Some((
                r["destination"].as_str()?.to_owned(),
                r["gateway"].as_str()?.to_owned(),
            ))
        })
        .collect();
    (lbs, routes)
}

async fn poll_cloud(admin: AdminClient, found: Found) {
    let mut reported: BTreeSet<String> = BTreeSet::new();
    let mut known = (BTreeMap::new(), BTreeMap::new());
    loop {
        if let Ok(cloud) = admin.state().await {
            found.checked();
            for (uid, lbs) in duplicate_load_balancers(&cloud) {
                if reported.insert(uid.clone()) {
                    found.violation(
                        TWO_LOAD_BALANCERS,
                        format!("Service UID {uid} is carried by {}", lbs.join(", ")),
                    );
                }
            }
            let now = cloud_objects(&cloud);
            for (id, what) in &now.0 {
                if !known.0.contains_key(id) {
                    found
                        .log
                        .log(format_args!("cloud: load balancer {id} {what} appeared"));
                }
            }
            for (id, what) in &known.0 {
                if !now.0.contains_key(id) {
                    found
                        .log
                        .log(format_args!("cloud: load balancer {id} {what} is gone"));
                }
            }
            for (destination, gateway) in &now.1 {
                if known.1.get(destination) != Some(gateway) {
                    found
                        .log
                        .log(format_args!("cloud: route {destination} via {gateway}"));
                }
            }
            for destination in known.1.keys() {
                if !now.1.contains_key(destination) {
                    found
                        .log
                        .log(format_args!("cloud: route {destination} is gone"));
                }
            }
            known = now;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
