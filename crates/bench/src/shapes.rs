//! The shapes clusters on Hetzner really have.
//!
//! - **In a network, at its caps**: a network takes at most 100 servers and 100 routes, so a
//!   cluster with routes has at most 100 Nodes. The bench fills one (its limits lowered to
//!   the scaled size below full scale) and measures the Node one beyond: its server cannot
//!   join the network, its route cannot be made, and the CCM must say so once and not spend
//!   the API budget on it.
//! - **Without a network**: larger clusters run without routes in a network (pod traffic
//!   over the public interfaces or an overlay). Their Nodes join in bursts, as kubelets
//!   register with the uninitialised taint; the CCM initialises each with at most two writes
//!   (one patch of providerID, labels and taints; one status patch of the addresses) and
//!   answers every lookup of the burst from one server listing.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt as _;
use hcloud_sim::{LimitsSeed, SeedFile, ServerSeed};
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use serde_json::json;

use kube_harness::UNINITIALIZED_TAINT as UNINITIALIZED;

use crate::{Bench, Counted, LB_NODES, TOKEN, lb_labels, ms, percentile, poll, ready_condition};
/// Node creations in flight at once in a burst (kubelets registering together).
const CREATE_CONCURRENCY: usize = 20;
/// The bar of a burst: every Node initialised within this long of its creation (p99).
pub const BURST_P99_BAR: Duration = Duration::from_secs(2);
/// Servers a Hetzner network takes.
const HETZNER_NETWORK_SERVERS: usize = 100;
/// Requests of the lifecycle controller's status check (two every 15 s while Nodes are
/// NotReady, as the Nodes of a burst are) that may fall into a burst besides its listing.
const STATUS_CHECK_REQUESTS: u64 = 2;
/// Requests an hour the Node beyond the network's caps may cost.
pub const STUCK_NODE_BAR_PER_HOUR: f64 = 60.0;
/// The route controller's period (`--route-reconciliation-period`, default 10 s): a failed
/// creation is tried again after one period, then after twice as long each time.
const ROUTE_PERIOD: f64 = 10.0;
/// The longest delay between two attempts of a failed route creation.
const ROUTE_BACKOFF_MAX: f64 = 300.0;

/// Attempts of a failing route creation within `window` of the first (at 0, 10, 30, 70, 150,
/// 310 s, then every 300 s): 16 in an hour.
fn attempts_within(window: Duration) -> u32 {
    let (mut at, mut delay, mut attempts) = (0.0, ROUTE_PERIOD, 0);
    while at < window.as_secs_f64() {
        attempts += 1;
        at += delay;
        delay = (delay * 2.0).min(ROUTE_BACKOFF_MAX);
    }
    attempts
}

/// A Node as a kubelet with `--cloud-provider=external` registers it: the uninitialised
/// taint, its Hostname address, not Ready yet; labelled `lb=yes` when `lb`.
fn kubelet_node(name: &str, lb: bool) -> Result<Node> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": name, "labels": lb_labels(lb) },
        "spec": { "taints": [{ "key": UNINITIALIZED, "value": "true", "effect": "NoSchedule" }] },
        "status": {
            "addresses": [{ "type": "Hostname", "address": name }],
            "conditions": [ready_condition(false)],
        },
    }))?)
}

/// Initialised by the CCM: the taint gone and a providerID set.
fn is_initialized(node: &Node) -> bool {
    !kube_harness::has_taint(node, UNINITIALIZED)
        && node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .is_some_and(|id| !id.is_empty())
}

/// CPU seconds used so far by the control plane's processes whose command line names
/// `dir`, by program (`kube-apiserver`, `etcd`).
fn control_plane_cpu(dir: &str) -> BTreeMap<String, f64> {
    let ticks = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .unwrap_or(100.0);
    let mut cpu = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return cpu;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(cmdline) = std::fs::read(path.join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|b| *b == 0)
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let Some(program) = args.first().and_then(|a| a.rsplit('/').next()) else {
            continue;
        };
        if !["kube-apiserver", "etcd"].contains(&program) || !args.iter().any(|a| a.contains(dir)) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        // Fields after the parenthesised name: state is the 3rd, utime the 14th, stime the
        // 15th of the whole line.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let used: f64 = [11, 12]
            .iter()
            .filter_map(|i| fields.get(*i)?.parse::<f64>().ok())
            .sum();
        *cpu.entry(program.to_owned()).or_default() += used / ticks;
    }
    cpu
}

impl Bench {
    /// The network's limits lowered to `cap` servers and `cap` routes (Hetzner's 100 at full
    /// scale), so that the scaled cluster fills it.
    pub async fn cap_network(&self, cap: usize) -> Result<()> {
        self.admin
            .set_limits(
                &LimitsSeed::default()
                    .servers_per_network(cap)
                    .routes_per_network(cap),
            )
            .await?;
        Ok(())
    }

    /// The Node beyond the network's caps: a server the full network refuses, and its Node.
    /// Measured: the time until the CCM reports it, that it reports it once, that the Node's
    /// network stays unavailable and every other route stays, and the requests over `window`
    /// (the route is tried again with a growing delay, up to every 5 min).
    pub async fn beyond_cap_scenario(&mut self, cap: usize, window: Duration) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.kube.clone());
        // A healthy cluster: the kubelets report Ready (the lifecycle checks of NotReady Nodes
        // are not this Node's cost).
        self.set_ready(0..self.servers.len(), true).await?;
        self.until_idle(Duration::from_secs(3), Duration::from_secs(60))
            .await?;
        let index = self.servers.len();
        let name = format!("node-{index}");
        let server = self.admin.create_server(ServerSeed::new(&name)).await?;
        let id = server["id"].as_i64().context("server id")?;
        let public_ip = server["public_net"]["ipv4"]["ip"]
            .as_str()
            .context("public IP")?
            .to_owned();
        self.servers.push((name.clone(), id));
        self.private_ips.push(public_ip.clone());
        // Its owner tries to attach it; the full network refuses.
        let attach = reqwest_post(
            &format!(
                "{}/servers/{id}/actions/attach_to_network",
                self.sim.base_url()
            ),
            &json!({ "network": self.network }),
        )
        .await?;
        let routes_before = self.network_routes().await?;
        self.fresh_start(Counted::All { not_ready: 0 }).await?;
        let started = Instant::now();
        let node: Node = serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": {
                "providerID": format!("hcloud://{id}"),
                "podCIDR": crate::pod_cidr(index),
                "podCIDRs": [crate::pod_cidr(index)],
            },
            "status": {
                "addresses": [
                    { "type": "ExternalIP", "address": public_ip },
                    { "type": "Hostname", "address": name },
                ],
                "conditions": [ready_condition(true)],
            },
        }))?;
        nodes.create(&PostParams::default(), &node).await?;
        let reported = poll(started, Duration::from_secs(120), async || {
            Ok(!self.route_failures(&name).await?.is_empty())
        })
        .await?;
        let rest = window.saturating_sub(started.elapsed());
        tokio::time::sleep(rest).await;
        let observed = started.elapsed();
        let counts = self.counts().await?;
        let failures = self.route_failures(&name).await?;
        let network_unavailable = nodes
            .get(&name)
            .await?
            .status
            .and_then(|s| s.conditions)
            .and_then(|c| c.into_iter().find(|c| c.type_ == "NetworkUnavailable"))
            .map(|c| c.status);
        let routes_after = self.network_routes().await?;

        // The periodic address refresh (a listing of all servers every 5 min) is not this
        // Node's cost; the rest is, attempt by attempt: an hour of attempts costs as much as
        // this window's, times the attempts of an hour over those of the window. With more
        // than one page of servers a lone lookup of its server is a direct read, so every
        // `GET /servers` is the refresh; with one page a lookup lists it, and the refresh's
        // page (at most one in the window) is counted as the Node's too.
        let total: u64 = counts.values().sum();
        let listed = match self.servers.len().div_ceil(50) {
            0 | 1 => 0,
            _ => counts.get("GET /servers").copied().unwrap_or(0),
        };
        let stuck = total - listed;
        let per_hour = f64::from(attempts_within(Duration::from_secs(3600))) * stuck as f64
            / f64::from(attempts_within(observed).max(1));
        let events: i32 = failures.iter().map(|e| e.count.unwrap_or(1)).sum();
        let message = failures
            .first()
            .and_then(|e| e.message.clone())
            .unwrap_or_default();
        let mut problems = Vec::new();
        if attach != 403 {
            problems.push(format!("attaching its server answered {attach}, not 403"));
        }
        // Below full scale the network's caps are the simulator's lowered ones, which the
        // CCM cannot know: it says the server is not attached. At Hetzner's 100 it says why.
        let why = if cap >= HETZNER_NETWORK_SERVERS {
            "network is full"
        } else {
            "is not attached"
        };
        if events != 1 || !message.contains(why) {
            problems.push(format!(
                "{events} FailedToCreateRoute events (want one saying {why:?}): {message:?}"
            ));
        }
        if network_unavailable.as_deref() != Some("True") {
            problems.push(format!("NetworkUnavailable is {network_unavailable:?}"));
        }
        if routes_after != routes_before || routes_after.len() != cap {
            problems.push(format!(
                "routes changed: {} before, {} after",
                routes_before.len(),
                routes_after.len()
            ));
        }
        if per_hour > STUCK_NODE_BAR_PER_HOUR {
            problems.push(format!(
                "{per_hour:.0} requests/h (bar {STUCK_NODE_BAR_PER_HOUR:.0}/h)"
            ));
        }
        let verdict = if problems.is_empty() {
            "ok".to_owned()
        } else {
            format!("**{}**", problems.join("; "))
        };
        self.push(
            format!("the Node beyond the full network ({cap} servers, {cap} routes)"),
            counts,
            format!(
                "reported after {}; {} Warning, NetworkUnavailable={}, {} routes kept; {stuck} requests for it in {} ({} attempts), {per_hour:.0}/h for an hour's {} (bar {STUCK_NODE_BAR_PER_HOUR:.0}/h): {verdict}",
                reported.map_or_else(|| "never (120 s)".to_owned(), ms),
                events,
                network_unavailable.as_deref().unwrap_or("unset"),
                routes_after.len(),
                ms(observed),
                attempts_within(observed),
                attempts_within(Duration::from_secs(3600)),
            ),
            None,
        );
        self.failed_checks
            .extend(problems.into_iter().map(|p| format!("beyond the cap: {p}")));
        Ok(())
    }

    /// The `FailedToCreateRoute` events on Node `name`.
    async fn route_failures(&self, name: &str) -> Result<Vec<Event>> {
        let events: Api<Event> = Api::namespaced(self.kube.clone(), "default");
        Ok(events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some("FailedToCreateRoute")
                    && e.involved_object.name.as_deref() == Some(name)
            })
            .collect())
    }

    /// Stop the CCM and take every Node and server away: the next phase is a cluster
    /// without a network, with a CCM started without `HCLOUD_NETWORK`.
    pub async fn leave_network(&mut self) -> Result<()> {
        self.stop_ccm().await?;
        self.forget_nodes().await?;
        self.in_network = false;
        Ok(())
    }

    /// A cluster without a network with `nodes` Nodes (a burst, initialised by the CCM, then
    /// Ready) and `services` LoadBalancer Services in place, the CCM running idle: what the
    /// full run has when its leader starts, for measuring that start alone.
    pub async fn cluster_without_network(&mut self, nodes: usize, services: usize) -> Result<()> {
        self.leave_network().await?;
        self.burst_scenario("node", nodes, false).await?;
        self.services_scenario("bulk", services, 0, None).await?;
        self.set_ready(0..self.servers.len(), true).await?;
        self.until_idle(Duration::from_secs(3), Duration::from_secs(60))
            .await?;
        Ok(())
    }

    /// Delete every Node and the servers of this phase.
    pub async fn forget_nodes(&mut self) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.kube.clone());
        nodes
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await?;
        for (_, id) in std::mem::take(&mut self.servers) {
            self.admin.delete_server(id).await?;
        }
        self.private_ips.clear();
        while !nodes.list(&ListParams::default()).await?.items.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Servers `<prefix>-<from..from + count>` (one seed, so that they exist at once),
    /// without a network.
    async fn seed_servers(&mut self, prefix: &str, from: usize, count: usize) -> Result<()> {
        let names: Vec<String> = (from..from + count)
            .map(|i| format!("{prefix}-{i}"))
            .collect();
        let seed = SeedFile {
            servers: names.iter().map(ServerSeed::new).collect(),
            ..SeedFile::default()
        };
        self.admin.seed(&seed).await?;
        let state = self.admin.state().await?;
        let ids: HashMap<&str, i64> = state["servers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| Some((s["name"].as_str()?, s["id"].as_i64()?)))
            .collect();
        for name in names {
            let id = *ids.get(name.as_str()).context("seeded server")?;
            if self.servers.is_empty() {
                self.admin.set_metadata_server(Some(id)).await?;
            }
            self.servers.push((name, id));
            self.private_ips.push(String::new());
        }
        Ok(())
    }

    /// A burst of `count` Nodes registered at once (20 creates in flight) for servers that
    /// exist, each tainted as a kubelet with `--cloud-provider=external` registers it; the
    /// first [`LB_NODES`] labelled `lb=yes`. Measured per Node: from just before its create
    /// to the first watch event that shows it initialised. With `checked`, `--check` holds
    /// it to p99 <= 2 s, one server listing (and one status check of the lifecycle
    /// controller) and at most two node-controller writes per Node. Servers and Nodes are
    /// named `<prefix>-<i>`: a name is never reused within the server cache's max age.
    pub async fn burst_scenario(
        &mut self,
        prefix: &str,
        count: usize,
        checked: bool,
    ) -> Result<()> {
        let from = self.servers.len();
        self.seed_servers(prefix, from, count).await?;
        if self.ccm.is_none() {
            self.start_ccm().await?;
        }
        let nodes: Api<Node> = Api::all(self.kube.clone());
        // Observer: the first moment each Node is seen initialised.
        let seen: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
        let observer = {
            let seen = seen.clone();
            let nodes = nodes.clone();
            tokio::spawn(async move {
                // A watch that fails (the apiserver under load) is started again after a
                // backoff, never given up: a Node initialised meanwhile comes with the re-list.
                let mut stream = watcher(nodes, watcher::Config::default())
                    .default_backoff()
                    .boxed();
                let mut ready = Some(ready_tx);
                while let Some(event) = stream.next().await {
                    let Ok(event) = event else { continue };
                    let node = match event {
                        watcher::Event::Apply(node) | watcher::Event::InitApply(node) => node,
                        watcher::Event::InitDone => {
                            if let Some(tx) = ready.take() {
                                let _ = tx.send(());
                            }
                            continue;
                        }
                        watcher::Event::Init | watcher::Event::Delete(_) => continue,
                    };
                    if is_initialized(&node) {
                        let name = node.metadata.name.clone().unwrap_or_default();
                        seen.lock().entry(name).or_insert_with(Instant::now);
                    }
                }
            })
        };
        ready_rx.await.context("the Node watch")?;
        self.until_idle(Duration::from_secs(3), Duration::from_secs(60))
            .await?;
        // The burst's own Nodes are NotReady (kubelets that just registered): the status
        // checks of them are the burst's (see `fresh_start`); the Nodes before it are gone.
        self.fresh_start(Counted::All { not_ready: 0 }).await?;
        let cpu_before = control_plane_cpu(&self.plane.data_dir().display().to_string());
        let created_at: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
        let started = Instant::now();
        let names: Vec<String> = self.servers[from..]
            .iter()
            .map(|(n, _)| n.clone())
            .collect();
        let results: Vec<Result<()>> = futures::stream::iter(names.iter().enumerate())
            .map(|(i, name)| {
                let nodes = nodes.clone();
                let created_at = created_at.clone();
                async move {
                    let node = kubelet_node(name, from + i < LB_NODES)?;
                    created_at.lock().insert(name.clone(), Instant::now());
                    nodes.create(&PostParams::default(), &node).await?;
                    anyhow::Ok(())
                }
            })
            .buffer_unordered(CREATE_CONCURRENCY)
            .collect()
            .await;
        for result in results {
            result?;
        }
        let all_created = started.elapsed();
        let limit = Duration::from_secs(600);
        while seen.lock().len() < count {
            if started.elapsed() > limit {
                observer.abort();
                let seen = seen.lock().len();
                let listed = nodes.list(&ListParams::default()).await?.items;
                let done = listed.iter().filter(|n| is_initialized(n)).count();
                bail!(
                    "not every Node of the burst initialised within {limit:?}: {seen} seen by the watch, {done} of {} initialised now",
                    listed.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let wall = started.elapsed();
        let cpu_after = control_plane_cpu(&self.plane.data_dir().display().to_string());
        observer.abort();
        let counts = self
            .until_idle(Duration::from_secs(3), Duration::from_secs(60))
            .await?;

        let seen = seen.lock().clone();
        let created_at = created_at.lock().clone();
        let mut latencies: Vec<Duration> = seen
            .iter()
            .filter_map(|(name, at)| Some(at.duration_since(*created_at.get(name)?)))
            .collect();
        latencies.sort();
        let p50 = percentile(&latencies, 50.0);
        let p99 = percentile(&latencies, 99.0);
        let pages = self.servers.len().div_ceil(50) as u64;
        let listings = counts.get("GET /servers").copied().unwrap_or(0);
        // The CCM's writes in the burst, from the audit log.
        let writes = self.ccm_kube_writes();
        let node_writes: u64 = writes
            .iter()
            .filter(|(k, _)| k.starts_with("node-controller patch nodes"))
            .map(|(_, n)| *n)
            .sum();
        let audit = self.plane.audit_events();
        let all_writes = audit.len().saturating_sub(self.audit_mark.get());
        let cpu: Vec<String> = cpu_after
            .iter()
            .map(|(program, after)| {
                let used = after - cpu_before.get(program).copied().unwrap_or(0.0);
                format!(
                    "{program} {used:.1} CPU-s ({:.0} % of a core)",
                    100.0 * used / wall.as_secs_f64()
                )
            })
            .collect();

        let mut problems = Vec::new();
        if checked {
            self.refresh_excluded(&format!("burst of {count}"));
            if p99 > BURST_P99_BAR {
                problems.push(format!("p99 {} (bar {})", ms(p99), ms(BURST_P99_BAR)));
            }
            if listings > pages + STATUS_CHECK_REQUESTS {
                problems.push(format!(
                    "{listings} GET /servers (one listing is {pages}, a status check {STATUS_CHECK_REQUESTS})"
                ));
            }
            if node_writes > 2 * count as u64 {
                problems.push(format!(
                    "{node_writes} node-controller writes for {count} Nodes (bar 2 each)"
                ));
            }
        }
        let verdict = match (checked, problems.is_empty()) {
            (false, _) => String::new(),
            (true, true) => " (p99 <= 2 s, one listing, <= 2 writes per Node: ok)".to_owned(),
            (true, false) => format!(" (**{}**)", problems.join("; ")),
        };
        self.push(
            format!("a burst of {count} tainted Nodes at once"),
            counts,
            format!(
                "initialised: p50 {}, p99 {}, all after {} (created within {}); {node_writes} node-controller writes; apiserver: {all_writes} writes in all ({:.0}/s), {}{verdict}",
                ms(p50),
                ms(p99),
                ms(wall),
                ms(all_created),
                all_writes as f64 / wall.as_secs_f64(),
                cpu.join(", "),
            ),
            None,
        );
        self.failed_checks.extend(
            problems
                .into_iter()
                .map(|p| format!("burst of {count}: {p}")),
        );
        Ok(())
    }

    /// The time until every load balancer targets the server of `index`.
    pub async fn wait_targets(&self, index: usize, limit: Duration) -> Result<Duration> {
        let id = self.servers.get(index).context("server")?.1;
        let took = poll(Instant::now(), limit, async || {
            let state = self.admin.state().await?;
            let lbs = state["load_balancers"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let all = lbs.iter().all(|lb| {
                lb["targets"]
                    .as_array()
                    .is_some_and(|t| t.iter().any(|t| t["server"]["id"] == id))
            });
            Ok(!lbs.is_empty() && all)
        })
        .await?;
        took.with_context(|| {
            format!("server {id} not a target of every load balancer within {limit:?}")
        })
    }

    /// The Nodes of the last `count` servers (a burst) and those servers go, while the CCM
    /// runs: nothing of the CCM's refers to them.
    pub async fn forget_burst(&mut self, count: usize) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.kube.clone());
        let keep = self.servers.len().saturating_sub(count);
        for (name, id) in self.servers.split_off(keep) {
            nodes.delete(&name, &DeleteParams::default()).await?;
            self.admin.delete_server(id).await?;
        }
        self.private_ips.truncate(keep);
        if self.servers.is_empty() {
            self.admin.set_metadata_server(None).await?;
        }
        self.until_idle(Duration::from_secs(3), Duration::from_secs(60))
            .await?;
        Ok(())
    }
}

/// POST `body` to the simulator's public API as the project's owner; the answer's status.
async fn reqwest_post(url: &str, body: &serde_json::Value) -> Result<u16> {
    let answer = reqwest::Client::new()
        .post(url)
        .bearer_auth(TOKEN)
        .json(body)
        .send()
        .await?;
    Ok(answer.status().as_u16())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_route_is_tried_sixteen_times_an_hour() {
        assert_eq!(attempts_within(Duration::from_secs(60)), 3);
        assert_eq!(attempts_within(Duration::from_secs(600)), 6);
        assert_eq!(attempts_within(Duration::from_secs(3600)), 16);
    }
}
