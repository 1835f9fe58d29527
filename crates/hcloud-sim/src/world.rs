//! The in-memory state of a simulated project, and its actions.
//!
//! Actions finish lazily: every request first calls [`World::advance`], which completes all
//! actions whose finish time has passed and applies their effects, in order.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::catalog::Catalog;
use crate::error::{ApiError, ApiResult};
use crate::input::IdOrName;
use crate::limits::NetworkLimits;
use crate::model::{
    Action, Assignee, Certificate, LoadBalancer, Network, PrimaryIp, Res, Server, TargetKind,
};

/// A deferred change, applied when an action finishes.
pub type Effect = Box<dyn FnOnce(&mut World) + Send>;

struct Pending {
    action: i64,
    finish_at: DateTime<Utc>,
    fail: Option<(String, String)>,
    on_success: Option<Effect>,
    on_error: Option<Effect>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending")
            .field("action", &self.action)
            .field("finish_at", &self.finish_at)
            .field("fail", &self.fail)
            .finish_non_exhaustive()
    }
}

/// Health override key: (load balancer, target, listen port).
pub type HealthKey = (i64, TargetKind, u16);

/// How managed certificates get issued (set through the admin API).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CertIssuance {
    /// How long issuance takes; `None`: the action delay.
    pub delay: Option<Duration>,
    /// Every issuance fails.
    pub fail_all: bool,
    /// Issuance fails for certificates naming one of these domains.
    pub fail_domains: BTreeSet<String>,
}

impl CertIssuance {
    /// Whether issuing a certificate for `domains` fails.
    pub fn fails(&self, domains: &[String]) -> bool {
        self.fail_all || domains.iter().any(|d| self.fail_domains.contains(d))
    }
}

/// How a new action ends.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Running time; `None`: the action delay.
    pub delay: Option<Duration>,
    /// Ends in `error` with this (code, message).
    pub fail: Option<(String, String)>,
}

impl Outcome {
    /// The outcome a fault injection asks for (`None`: success after the action delay).
    pub fn injected(fail: Option<&str>) -> Outcome {
        Outcome {
            delay: None,
            fail: fail.map(|code| {
                (
                    code.to_string(),
                    "action failed (injected fault)".to_string(),
                )
            }),
        }
    }
}

/// Hands out the IDs of one kind of resource, one after the other.
#[derive(Debug)]
pub(crate) struct IdSeq(i64);

impl IdSeq {
    /// The next ID.
    pub(crate) fn take(&mut self) -> i64 {
        self.0 += 1;
        self.0 - 1
    }
}

/// Everything the simulator knows.
#[derive(Debug)]
pub struct World {
    /// Locations, types, images.
    pub catalog: Catalog,
    /// Servers by ID.
    pub servers: BTreeMap<i64, Server>,
    /// Networks by ID.
    pub networks: BTreeMap<i64, Network>,
    /// Load balancers by ID.
    pub load_balancers: BTreeMap<i64, LoadBalancer>,
    /// Certificates by ID.
    pub certificates: BTreeMap<i64, Certificate>,
    /// Primary IPs by ID.
    pub primary_ips: BTreeMap<i64, PrimaryIp>,
    /// Actions by ID.
    pub actions: BTreeMap<i64, Action>,
    pending: Vec<Pending>,
    /// How managed certificates get issued.
    pub cert_issuance: CertIssuance,
    /// The server the metadata service answers for.
    pub metadata_server: Option<i64>,
    /// How long new actions run.
    pub action_delay: Duration,
    /// Health overrides set through the admin API.
    pub health: HashMap<HealthKey, String>,
    /// Private IPs reserved by running actions: (network, ip).
    pub reserved_ips: HashSet<(i64, Ipv4Addr)>,
    /// Network and server limits (load balancer type caps live in the catalog).
    pub limits: NetworkLimits,
    /// The dedicated servers of the Robot account.
    pub robot: crate::robot::RobotWorld,
    pub(crate) server_ids: IdSeq,
    pub(crate) network_ids: IdSeq,
    pub(crate) lb_ids: IdSeq,
    pub(crate) cert_ids: IdSeq,
    action_ids: IdSeq,
    pub(crate) primary_ip_ids: IdSeq,
    /// Sequence number of the next server public IPv4.
    pub server_ipv4_seq: u32,
    /// Sequence number of the next server IPv6 /64.
    pub server_ipv6_seq: u32,
    /// Sequence number of the next load balancer IP pair.
    pub lb_ip_seq: u32,
    mac_seq: u32,
}

impl World {
    /// An empty project with the default catalog.
    pub fn new(action_delay: Duration) -> World {
        World {
            catalog: Catalog::default(),
            servers: BTreeMap::new(),
            networks: BTreeMap::new(),
            load_balancers: BTreeMap::new(),
            certificates: BTreeMap::new(),
            primary_ips: BTreeMap::new(),
            actions: BTreeMap::new(),
            pending: Vec::new(),
            cert_issuance: CertIssuance::default(),
            metadata_server: None,
            action_delay,
            health: HashMap::new(),
            reserved_ips: HashSet::new(),
            limits: NetworkLimits::default(),
            robot: crate::robot::RobotWorld::default(),
            server_ids: IdSeq(10_001),
            network_ids: IdSeq(2_001),
            lb_ids: IdSeq(3_001),
            cert_ids: IdSeq(4_001),
            action_ids: IdSeq(1),
            primary_ip_ids: IdSeq(5_001),
            server_ipv4_seq: 0,
            server_ipv6_seq: 0,
            lb_ip_seq: 0,
            mac_seq: 0,
        }
    }

    /// A fresh MAC address.
    pub fn new_mac(&mut self) -> String {
        self.mac_seq += 1;
        let b = self.mac_seq.to_be_bytes();
        format!("86:00:00:{:02x}:{:02x}:{:02x}", b[1], b[2], b[3])
    }

    /// Completes every action whose time has come.
    pub fn advance(&mut self, now: DateTime<Utc>) {
        loop {
            let next = self
                .pending
                .iter()
                .enumerate()
                .filter(|(_, p)| p.finish_at <= now)
                .min_by_key(|(_, p)| (p.finish_at, p.action))
                .map(|(i, _)| i);
            let Some(idx) = next else { break };
            let p = self.pending.remove(idx);
            let ok = p.fail.is_none();
            if let Some(a) = self.actions.get_mut(&p.action) {
                a.progress = 100;
                a.finished = Some(p.finish_at);
                if let Some(error) = &p.fail {
                    a.status = "error".to_string();
                    a.error = Some(error.clone());
                } else {
                    a.status = "success".to_string();
                }
            }
            let effect = if ok { p.on_success } else { p.on_error };
            if let Some(effect) = effect {
                effect(self);
            }
        }
    }

    /// Starts an action that finishes after the configured delay (in `error` with code
    /// `fail`, if given).
    pub fn start_action(
        &mut self,
        command: &str,
        resources: Vec<Res>,
        fail: Option<&str>,
        on_success: Option<Effect>,
        on_error: Option<Effect>,
    ) -> i64 {
        self.start_action_with(
            command,
            resources,
            Outcome::injected(fail),
            on_success,
            on_error,
        )
    }

    /// Starts an action that ends as `outcome` says.
    pub fn start_action_with(
        &mut self,
        command: &str,
        resources: Vec<Res>,
        outcome: Outcome,
        on_success: Option<Effect>,
        on_error: Option<Effect>,
    ) -> i64 {
        let id = self.action_ids.take();
        let started = Utc::now();
        let delay = chrono::Duration::from_std(outcome.delay.unwrap_or(self.action_delay))
            .unwrap_or_default();
        self.actions.insert(
            id,
            Action {
                id,
                command: command.to_string(),
                status: "running".to_string(),
                progress: 0,
                started,
                finished: None,
                resources,
                error: None,
            },
        );
        self.pending.push(Pending {
            action: id,
            finish_at: started + delay,
            fail: outcome.fail,
            on_success,
            on_error,
        });
        id
    }

    /// Whether a running action involves the resource.
    pub fn is_busy(&self, res: Res) -> bool {
        self.pending.iter().any(|p| {
            self.actions
                .get(&p.action)
                .is_some_and(|a| a.resources.contains(&res))
        })
    }

    /// `Err(locked)` (servers, load balancers, certificates) or `Err(conflict)` (networks)
    /// when a running action involves the resource.
    pub fn ensure_unlocked(&self, res: Res) -> ApiResult<()> {
        if !self.is_busy(res) {
            return Ok(());
        }
        let (id, kind) = res.parts();
        Err(match res {
            Res::Network(_) => ApiError::new(
                "conflict",
                format!("network {id} is currently being changed by another action"),
            ),
            _ => ApiError::new(
                "locked",
                format!("{kind} {id} is locked by a running action"),
            ),
        })
    }

    /// Number of running actions.
    pub fn running_actions(&self) -> usize {
        self.pending.len()
    }

    /// (server, network) of every `attach_to_network` of a server that still runs.
    pub fn pending_attachments(&self) -> Vec<(i64, i64)> {
        self.pending
            .iter()
            .filter_map(|p| self.actions.get(&p.action))
            .filter(|a| a.command == "attach_to_network")
            .filter_map(|a| {
                let server = a.resources.iter().find_map(|r| match r {
                    Res::Server(id) => Some(*id),
                    _ => None,
                })?;
                let network = a.resources.iter().find_map(|r| match r {
                    Res::Network(id) => Some(*id),
                    _ => None,
                })?;
                Some((server, network))
            })
            .collect()
    }

    /// Every private IP in use (or reserved) in a network.
    pub fn used_private_ips(&self, network: i64) -> HashSet<Ipv4Addr> {
        let mut used: HashSet<Ipv4Addr> = self
            .reserved_ips
            .iter()
            .filter(|(n, _)| *n == network)
            .map(|(_, ip)| *ip)
            .collect();
        for s in self.servers.values() {
            for pn in s.private_net.iter().filter(|pn| pn.network == network) {
                used.insert(pn.ip);
                used.extend(pn.alias_ips.iter().copied());
            }
        }
        for lb in self.load_balancers.values() {
            for (n, ip) in &lb.private_net {
                if *n == network {
                    used.insert(*ip);
                }
            }
        }
        used
    }

    /// Server by ID or 404.
    pub fn server(&self, id: i64) -> ApiResult<&Server> {
        self.servers
            .get(&id)
            .ok_or_else(|| ApiError::not_found("server"))
    }

    /// Network by ID or 404.
    pub fn network(&self, id: i64) -> ApiResult<&Network> {
        self.networks
            .get(&id)
            .ok_or_else(|| ApiError::not_found("network"))
    }

    /// Load balancer by ID or 404.
    pub fn load_balancer(&self, id: i64) -> ApiResult<&LoadBalancer> {
        self.load_balancers
            .get(&id)
            .ok_or_else(|| ApiError::not_found("load_balancer"))
    }

    /// Network ID by ID or name.
    pub fn network_id(&self, what: &IdOrName) -> Option<i64> {
        match what {
            IdOrName::Id(id) => self.networks.contains_key(id).then_some(*id),
            IdOrName::Name(n) => self
                .networks
                .values()
                .find(|net| &net.name == n)
                .map(|net| net.id),
        }
    }

    /// Servers matching a selector, sorted by ID.
    pub fn servers_matching(&self, selector: &crate::label_selector::Selector) -> Vec<i64> {
        self.servers
            .values()
            .filter(|s| selector.matches(&s.labels))
            .map(|s| s.id)
            .collect()
    }

    /// Removes a server and everything that refers to it (LB server targets, health entries,
    /// its Primary IPs: deleted with `auto_delete`, else unassigned).
    pub fn remove_server(&mut self, id: i64) {
        self.servers.remove(&id);
        self.release_primary_ips(Assignee::Server(id));
        for lb in self.load_balancers.values_mut() {
            lb.targets.retain(|t| t.kind != TargetKind::Server(id));
        }
        self.health
            .retain(|(_, k, _), _| *k != TargetKind::Server(id));
    }

    /// Removes a load balancer and everything that refers to it (health entries, its Primary
    /// IPs: deleted with `auto_delete`, else unassigned).
    pub fn remove_load_balancer(&mut self, id: i64) {
        self.load_balancers.remove(&id);
        self.health.retain(|(lb, _, _), _| *lb != id);
        self.release_primary_ips(Assignee::LoadBalancer(id));
    }

    /// Primary IPs of a removed resource: deleted when `auto_delete`, else unassigned.
    pub fn release_primary_ips(&mut self, assignee: Assignee) {
        self.primary_ips
            .retain(|_, ip| !(ip.assignee == Some(assignee) && ip.auto_delete));
        for ip in self.primary_ips.values_mut() {
            if ip.assignee == Some(assignee) {
                ip.assignee = None;
            }
        }
    }

    /// Primary IP by ID or 404.
    pub fn primary_ip(&self, id: i64) -> ApiResult<&PrimaryIp> {
        self.primary_ips
            .get(&id)
            .ok_or_else(|| ApiError::not_found("primary_ip"))
    }

    /// Removes a network and every attachment to it.
    pub fn remove_network(&mut self, id: i64) {
        self.networks.remove(&id);
        for s in self.servers.values_mut() {
            s.private_net.retain(|pn| pn.network != id);
        }
        for lb in self.load_balancers.values_mut() {
            lb.private_net.retain(|(n, _)| *n != id);
        }
        self.reserved_ips.retain(|(n, _)| *n != id);
    }
}
