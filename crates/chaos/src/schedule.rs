//! Schedules: what a seed makes happen, and when.
//!
//! A seeded RNG (`StdRng`, so a seed gives the same schedule with the same `Cargo.lock`) picks
//! the set-up (replicas, log verbosity, `HCLOUD_DEBUG`, the first Nodes and Services, a fault
//! on the CCM's start) and then a list of timed steps. The generator keeps a model of the
//! cluster, so every action names its object and makes sense when it is generated (only a
//! running server is powered off, only an existing Service is annotated); the runner skips,
//! and logs, an action whose object the CCM has changed meanwhile. Follow-ups that a real
//! cluster does by itself are scheduled with their cause: a kubelet registers its Node again
//! after the Node was deleted, a killed CCM is started again.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use hcloud_sim::Fault;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};

use crate::proxy::{FaultKind, ProxyRule};

/// The label the Services' `node-selector` annotation selects on.
pub const LB_LABEL: &str = "chaos/lb";
/// Nodes labelled so are no load balancer targets.
pub const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// Prefix of the `load-balancer.hetzner.cloud/*` annotations.
const ANNOTATION: &str = "load-balancer.hetzner.cloud/";

/// One schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    /// The seed it came from.
    pub seed: u64,
    /// CCM replicas (with leader election).
    pub replicas: usize,
    /// The CCM's `-v`.
    pub verbosity: u8,
    /// `HCLOUD_DEBUG=true` (request and response logging of the API client).
    pub hcloud_debug: bool,
    /// Servers with Nodes before the CCM starts (name, labels).
    pub initial_nodes: Vec<(String, BTreeMap<String, String>)>,
    /// LoadBalancer Services before the CCM starts (name, annotations).
    pub initial_services: Vec<(String, BTreeMap<String, String>)>,
    /// A fault the CCM's first requests meet (its start-up checks).
    pub startup_fault: Option<ProxyRule>,
    /// The steps, each after a delay.
    pub steps: Vec<Step>,
}

/// Actions that happen together, `delay` after the previous step.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Time since the previous step.
    pub delay: Duration,
    /// What happens.
    pub actions: Vec<Action>,
}

/// One change to the cluster, the cloud, the CCM processes or the faults.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A new server in the network, and its kubelet registers a Node.
    AddNode {
        /// Server and Node name.
        name: String,
        /// Node labels.
        labels: BTreeMap<String, String>,
    },
    /// The server is deleted (its kubelet stops with it).
    DeleteServer {
        /// Server name.
        name: String,
    },
    /// The server is powered off.
    PowerOff {
        /// Server name.
        name: String,
    },
    /// The server is powered on.
    PowerOn {
        /// Server name.
        name: String,
    },
    /// The kubelet stops reporting (the Node turns NotReady) while the server runs.
    KubeletStops {
        /// Node name.
        name: String,
    },
    /// The kubelet reports again.
    KubeletStarts {
        /// Node name.
        name: String,
    },
    /// An administrator deletes the Node object while its server runs.
    DeleteNode {
        /// Node name.
        name: String,
    },
    /// The kubelet registers its Node again (after [`Action::DeleteNode`]).
    Reregister {
        /// Node name.
        name: String,
    },
    /// A Node label is set (`Some`) or removed.
    LabelNode {
        /// Node name.
        name: String,
        /// Label key.
        key: String,
        /// New value; `None` removes it.
        value: Option<String>,
    },
    /// A LoadBalancer Service is created.
    AddService {
        /// Service name.
        name: String,
        /// Its annotations.
        annotations: BTreeMap<String, String>,
    },
    /// The Service is deleted.
    DeleteService {
        /// Service name.
        name: String,
    },
    /// A Service annotation is set (`Some`) or removed.
    Annotate {
        /// Service name.
        name: String,
        /// Annotation key.
        key: String,
        /// New value; `None` removes it.
        value: Option<String>,
    },
    /// The CCM replica is killed with SIGKILL.
    KillCcm {
        /// Replica index.
        replica: usize,
    },
    /// The CCM replica is started again.
    StartCcm {
        /// Replica index.
        replica: usize,
    },
    /// A fault rule in the proxy.
    ProxyFault(ProxyRule),
    /// A fault rule in the simulator (failed actions).
    CloudFault(Fault),
    /// Every proxy fault rule is dropped: an outage ends.
    ClearProxyFaults,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels = |m: &BTreeMap<String, String>| -> String {
            m.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        match self {
            Action::AddNode { name, labels: l } => {
                write!(f, "add server and Node {name} [{}]", labels(l))
            }
            Action::DeleteServer { name } => write!(f, "delete server {name}"),
            Action::PowerOff { name } => write!(f, "power off server {name}"),
            Action::PowerOn { name } => write!(f, "power on server {name}"),
            Action::KubeletStops { name } => write!(f, "kubelet of {name} stops (NotReady)"),
            Action::KubeletStarts { name } => write!(f, "kubelet of {name} reports again"),
            Action::DeleteNode { name } => write!(f, "delete Node {name} (its server runs)"),
            Action::Reregister { name } => write!(f, "kubelet registers Node {name} again"),
            Action::LabelNode { name, key, value } => match value {
                Some(v) => write!(f, "label Node {name} {key}={v}"),
                None => write!(f, "remove label {key} from Node {name}"),
            },
            Action::AddService {
                name,
                annotations: a,
            } => write!(f, "add Service {name} [{}]", labels(a)),
            Action::DeleteService { name } => write!(f, "delete Service {name}"),
            Action::Annotate { name, key, value } => match value {
                Some(v) => write!(f, "annotate Service {name} {key}={v}"),
                None => write!(f, "remove annotation {key} from Service {name}"),
            },
            Action::KillCcm { replica } => write!(f, "SIGKILL CCM replica {replica}"),
            Action::StartCcm { replica } => write!(f, "start CCM replica {replica}"),
            Action::ProxyFault(rule) => write!(f, "proxy fault: {rule}"),
            Action::CloudFault(fault) => write!(
                f,
                "cloud fault: the actions of the next {} {} {} fail",
                fault.count,
                fault.method.as_deref().unwrap_or("*"),
                fault.path
            ),
            Action::ClearProxyFaults => write!(f, "proxy faults cleared (the outage ends)"),
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "seed {}: {} CCM replica(s), -v={}, HCLOUD_DEBUG={}",
            self.seed, self.replicas, self.verbosity, self.hcloud_debug
        )?;
        for (name, labels) in &self.initial_nodes {
            writeln!(
                f,
                "  set-up: {}",
                Action::AddNode {
                    name: name.clone(),
                    labels: labels.clone()
                }
            )?;
        }
        for (name, annotations) in &self.initial_services {
            writeln!(
                f,
                "  set-up: {}",
                Action::AddService {
                    name: name.clone(),
                    annotations: annotations.clone()
                }
            )?;
        }
        if let Some(rule) = &self.startup_fault {
            writeln!(f, "  set-up: proxy fault: {rule}")?;
        }
        let mut at = Duration::ZERO;
        for step in &self.steps {
            at += step.delay;
            for action in &step.actions {
                writeln!(f, "  +{:.3}s {action}", at.as_secs_f64())?;
            }
        }
        Ok(())
    }
}

impl Schedule {
    /// Every action, with the set-up ones first.
    pub fn action_count(&self) -> usize {
        self.steps.iter().map(|s| s.actions.len()).sum()
    }
}

/// A server as the generator sees it.
#[derive(Debug, Clone)]
struct ModelServer {
    running: bool,
    kubelet: bool,
    /// The Node object exists (not deleted by an administrator, awaiting re-registration).
    registered: bool,
    labels: BTreeMap<String, String>,
    /// Taken by a follow-up that is still to come: not picked by other actions.
    reserved: bool,
}

#[derive(Debug, Default)]
struct Model {
    /// Live servers in creation order (index = name order).
    servers: BTreeMap<usize, ModelServer>,
    services: BTreeMap<usize, BTreeMap<String, String>>,
    next_server: usize,
    next_service: usize,
    /// Replicas killed and not yet started again.
    down: BTreeSet<usize>,
}

fn server_name(index: usize) -> String {
    format!("node-{index}")
}

fn service_name(index: usize) -> String {
    format!("svc-{index}")
}

fn parse_index(name: &str, prefix: &str) -> Option<usize> {
    name.strip_prefix(prefix)?.parse().ok()
}

impl Model {
    fn pick_server(&self, rng: &mut StdRng, keep: impl Fn(&ModelServer) -> bool) -> Option<usize> {
        let candidates: Vec<usize> = self
            .servers
            .iter()
            .filter(|(_, s)| !s.reserved && keep(s))
            .map(|(i, _)| *i)
            .collect();
        pick(rng, &candidates)
    }

    /// `action` on a server picked as [`Model::pick_server`] does, as one step.
    fn on_server(
        &self,
        rng: &mut StdRng,
        keep: impl Fn(&ModelServer) -> bool,
        action: fn(String) -> Action,
    ) -> Option<Vec<Action>> {
        self.pick_server(rng, keep)
            .map(|i| vec![action(server_name(i))])
    }

    fn pick_service(&self, rng: &mut StdRng) -> Option<usize> {
        let candidates: Vec<usize> = self.services.keys().copied().collect();
        pick(rng, &candidates)
    }

    /// Applies a (follow-up) action; `false` when it no longer makes sense (then it is dropped).
    fn apply(&mut self, action: &Action) -> bool {
        let server = |name: &str| parse_index(name, "node-");
        match action {
            Action::AddNode { name, labels } => {
                let Some(i) = server(name) else { return false };
                self.servers.insert(
                    i,
                    ModelServer {
                        running: true,
                        kubelet: true,
                        registered: true,
                        labels: labels.clone(),
                        reserved: false,
                    },
                );
            }
            Action::DeleteServer { name } => {
                return server(name).and_then(|i| self.servers.remove(&i)).is_some();
            }
            Action::PowerOff { name } | Action::PowerOn { name } => {
                let on = matches!(action, Action::PowerOn { .. });
                match server(name).and_then(|i| self.servers.get_mut(&i)) {
                    Some(s) if s.running != on => {
                        s.running = on;
                        s.reserved = false;
                    }
                    _ => return false,
                }
            }
            Action::KubeletStops { name } | Action::KubeletStarts { name } => {
                let up = matches!(action, Action::KubeletStarts { .. });
                match server(name).and_then(|i| self.servers.get_mut(&i)) {
                    Some(s) if s.kubelet != up => s.kubelet = up,
                    _ => return false,
                }
            }
            Action::DeleteNode { name } => {
                match server(name).and_then(|i| self.servers.get_mut(&i)) {
                    Some(s) if s.registered => {
                        s.registered = false;
                        s.reserved = true;
                    }
                    _ => return false,
                }
            }
            Action::Reregister { name } => {
                match server(name).and_then(|i| self.servers.get_mut(&i)) {
                    Some(s) if !s.registered => {
                        s.registered = true;
                        s.reserved = false;
                    }
                    _ => return false,
                }
            }
            Action::LabelNode { name, key, value } => {
                let Some(s) = server(name).and_then(|i| self.servers.get_mut(&i)) else {
                    return false;
                };
                match value {
                    Some(v) => s.labels.insert(key.clone(), v.clone()),
                    None => s.labels.remove(key),
                };
            }
            Action::AddService { name, annotations } => {
                let Some(i) = parse_index(name, "svc-") else {
                    return false;
                };
                self.services.insert(i, annotations.clone());
            }
            Action::DeleteService { name } => {
                return parse_index(name, "svc-")
                    .and_then(|i| self.services.remove(&i))
                    .is_some();
            }
            Action::Annotate { name, key, value } => {
                let Some(a) = parse_index(name, "svc-").and_then(|i| self.services.get_mut(&i))
                else {
                    return false;
                };
                match value {
                    Some(v) => a.insert(key.clone(), v.clone()),
                    None => a.remove(key),
                };
            }
            Action::KillCcm { replica } => return self.down.insert(*replica),
            Action::StartCcm { replica } => return self.down.remove(replica),
            Action::ProxyFault(_) | Action::CloudFault(_) | Action::ClearProxyFaults => {}
        }
        true
    }
}

fn pick<T: Copy>(rng: &mut StdRng, items: &[T]) -> Option<T> {
    if items.is_empty() {
        None
    } else {
        items.get(rng.random_range(0..items.len())).copied()
    }
}

fn ms(rng: &mut StdRng, range: std::ops::RangeInclusive<u64>) -> Duration {
    Duration::from_millis(rng.random_range(range))
}

/// Node labels of a new Node: sometimes the label the Services select.
fn node_labels(rng: &mut StdRng) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    if rng.random_bool(0.6) {
        labels.insert(LB_LABEL.to_owned(), "yes".to_owned());
    }
    labels
}

/// The annotations the generator sets, with the values it chooses from (`None`: removed).
const ANNOTATION_CHOICES: &[(&str, &[Option<&str>])] = &[
    ("node-selector", &[Some("chaos/lb=yes"), None]),
    ("use-private-ip", &[Some("true"), Some("false"), None]),
    (
        "algorithm-type",
        &[Some("round_robin"), Some("least_connections"), None],
    ),
    ("health-check-interval", &[Some("3s"), Some("15s"), None]),
];

fn annotation_change(
    rng: &mut StdRng,
    service: usize,
    renames: &mut usize,
) -> (String, Option<String>) {
    // Now and then a new name for the load balancer.
    if rng.random_bool(0.1) {
        *renames += 1;
        return (
            format!("{ANNOTATION}name"),
            Some(format!("chaos-{}-{}", service_name(service), renames)),
        );
    }
    let index = rng.random_range(0..ANNOTATION_CHOICES.len());
    let (key, values) = ANNOTATION_CHOICES[index];
    let value = values[rng.random_range(0..values.len())];
    (format!("{ANNOTATION}{key}"), value.map(str::to_owned))
}

fn service_annotations(rng: &mut StdRng) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::new();
    for (key, values) in ANNOTATION_CHOICES {
        if rng.random_bool(0.4)
            && let Some(Some(value)) = values.get(rng.random_range(0..values.len()))
        {
            annotations.insert(format!("{ANNOTATION}{key}"), (*value).to_owned());
        }
    }
    annotations
}

/// Requests the CCM makes (method, path pattern), for fault rules; `None` is any method.
const FAULT_TARGETS: &[(Option<&str>, &str)] = &[
    (None, "*"),
    (Some("GET"), "*"),
    (Some("POST"), "*"),
    (Some("GET"), "/servers*"),
    (Some("GET"), "/servers/{id}"),
    (Some("GET"), "/load_balancers*"),
    (Some("POST"), "/load_balancers"),
    (Some("POST"), "/load_balancers/{id}/actions/*"),
    (Some("PUT"), "/load_balancers/{id}"),
    (Some("DELETE"), "/load_balancers/{id}"),
    (Some("GET"), "/networks*"),
    (Some("POST"), "/networks/{id}/actions/*"),
    (Some("GET"), "/actions*"),
    (Some("GET"), "/load_balancer_types*"),
];

fn fault_kind(rng: &mut StdRng) -> FaultKind {
    match rng.random_range(0..100) {
        0..20 => FaultKind::ServerError {
            status: [500, 502, 503, 504][rng.random_range(0..4)],
            html: rng.random_bool(0.3),
        },
        20..35 => FaultKind::RateLimited {
            reset_after_secs: rng.random_range(1..=3),
        },
        35..50 => FaultKind::ResetBeforeForward,
        50..65 => FaultKind::ReplyLost,
        65..75 => FaultKind::TruncatedBody {
            abort: rng.random_bool(0.5),
        },
        75..85 => FaultKind::ProxyNotFound,
        _ => FaultKind::Latency(ms(rng, 100..=1500)),
    }
}

fn proxy_rule(rng: &mut StdRng) -> ProxyRule {
    // Mostly a few requests; now and then a short outage of one kind.
    let count = if rng.random_bool(0.15) {
        rng.random_range(4..=8)
    } else {
        rng.random_range(1..=3)
    };
    let (method, path) = pick(rng, FAULT_TARGETS).unwrap_or((None, "*"));
    ProxyRule {
        method: method.map(str::to_owned),
        path: path.to_owned(),
        count,
        kind: fault_kind(rng),
    }
}

/// Action paths whose actions the simulator makes fail.
const CLOUD_FAULT_PATHS: &[&str] = &[
    "/load_balancers",
    "/load_balancers/{id}/actions/add_target",
    "/load_balancers/{id}/actions/add_service",
    "/load_balancers/{id}/actions/attach_to_network",
    "/load_balancers/{id}/actions/*",
    "/networks/{id}/actions/add_route",
    "/networks/{id}/actions/delete_route",
];

/// The schedule of `seed`.
pub fn generate(seed: u64) -> Schedule {
    let mut rng = StdRng::seed_from_u64(seed);
    let replicas = if rng.random_bool(0.35) { 2 } else { 1 };
    let verbosity = [2, 4, 5, 5, 7][rng.random_range(0..5)];
    // Every third seed logs every request and answer of the API client.
    let hcloud_debug = seed.is_multiple_of(3);
    let mut model = Model::default();
    let mut initial_nodes = Vec::new();
    for _ in 0..rng.random_range(2..=4) {
        model.next_server += 1;
        let action = Action::AddNode {
            name: server_name(model.next_server),
            labels: node_labels(&mut rng),
        };
        model.apply(&action);
        if let Action::AddNode { name, labels } = action {
            initial_nodes.push((name, labels));
        }
    }
    let mut initial_services = Vec::new();
    for _ in 0..rng.random_range(1..=2) {
        model.next_service += 1;
        let annotations = service_annotations(&mut rng);
        model
            .services
            .insert(model.next_service, annotations.clone());
        initial_services.push((service_name(model.next_service), annotations));
    }
    let startup_fault = rng.random_bool(0.2).then(|| ProxyRule {
        method: Some("GET".to_owned()),
        path: "/locations*".to_owned(),
        count: 1,
        kind: if rng.random_bool(0.5) {
            FaultKind::ServerError {
                status: 503,
                html: false,
            }
        } else {
            FaultKind::ResetBeforeForward
        },
    });

    let mut renames = 0;
    let mut timeline: Vec<(Duration, Action)> = Vec::new();
    let mut pending: Vec<(Duration, Action)> = Vec::new();
    let mut now = Duration::ZERO;
    let steps = rng.random_range(10..=16);
    for _ in 0..steps {
        now += ms(&mut rng, 150..=600);
        flush(&mut model, &mut pending, &mut timeline, Some(now));
        for action in choose(
            &mut rng,
            &mut model,
            replicas,
            &mut renames,
            now,
            &mut pending,
        ) {
            if model.apply(&action) {
                timeline.push((now, action));
            }
        }
    }
    flush(&mut model, &mut pending, &mut timeline, None);
    // Drawn from a stream of its own, after the steps: the steps of every seed stay as they
    // were before this shape existed.
    let mut outage_rng = StdRng::seed_from_u64(seed ^ OUTAGE_STREAM);
    if outage_rng.random_bool(OUTAGE_SHARE) {
        let start =
            timeline.last().map_or(Duration::ZERO, |(at, _)| *at) + ms(&mut outage_rng, 150..=600);
        let mut tail = Vec::new();
        target_update_outage(&mut outage_rng, &mut model, start, &mut tail);
        flush(&mut model, &mut tail, &mut timeline, None);
    }

    let mut steps: Vec<Step> = Vec::new();
    let mut last = Duration::ZERO;
    for (at, action) in timeline {
        match steps.last_mut() {
            Some(step) if at == last => step.actions.push(action),
            _ => {
                steps.push(Step {
                    delay: at.saturating_sub(last),
                    actions: vec![action],
                });
                last = at;
            }
        }
    }
    Schedule {
        seed,
        replicas,
        verbosity,
        hcloud_debug,
        initial_nodes,
        initial_services,
        startup_fault,
        steps,
    }
}

/// Moves the pending follow-ups due by `until` (all when `None`) into the timeline, in time
/// order, dropping those that no longer make sense.
fn flush(
    model: &mut Model,
    pending: &mut Vec<(Duration, Action)>,
    timeline: &mut Vec<(Duration, Action)>,
    until: Option<Duration>,
) {
    pending.sort_by_key(|(at, _)| *at);
    let due = pending
        .iter()
        .take_while(|(at, _)| until.is_none_or(|u| *at <= u))
        .count();
    for (at, action) in pending.drain(..due) {
        if model.apply(&action) {
            timeline.push((at, action));
        }
    }
}

/// The actions of one step (already checked against the model, applied by the caller).
fn choose(
    rng: &mut StdRng,
    model: &mut Model,
    replicas: usize,
    renames: &mut usize,
    now: Duration,
    pending: &mut Vec<(Duration, Action)>,
) -> Vec<Action> {
    // A few tries: a pick whose precondition fails (no off server to power on) tries again.
    for _ in 0..8 {
        let roll = rng.random_range(0..100);
        let chosen = match roll {
            0..22 => Some(vec![Action::ProxyFault(proxy_rule(rng))]),
            22..26 => {
                let path = pick(rng, CLOUD_FAULT_PATHS).unwrap_or("/load_balancers");
                Some(vec![Action::CloudFault(
                    Fault::new(path)
                        .method("POST")
                        .count(rng.random_range(1..=2))
                        .fail_action(),
                )])
            }
            26..34 if model.servers.len() < 7 => {
                model.next_server += 1;
                Some(vec![Action::AddNode {
                    name: server_name(model.next_server),
                    labels: node_labels(rng),
                }])
            }
            34..39 if model.servers.len() > 1 => {
                model.on_server(rng, |_| true, |name| Action::DeleteServer { name })
            }
            39..46 => model.on_server(rng, |s| s.running, |name| Action::PowerOff { name }),
            46..53 => model.on_server(rng, |s| !s.running, |name| Action::PowerOn { name }),
            53..57 => model.on_server(
                rng,
                |s| s.running && s.kubelet && s.registered,
                |name| Action::KubeletStops { name },
            ),
            57..60 => model.on_server(rng, |s| !s.kubelet, |name| Action::KubeletStarts { name }),
            60..62 => model
                .pick_server(rng, |s| s.running && s.registered)
                .map(|i| {
                    let name = server_name(i);
                    pending.push((
                        now + ms(rng, 500..=2500),
                        Action::Reregister { name: name.clone() },
                    ));
                    vec![Action::DeleteNode { name }]
                }),
            62..67 => model.pick_server(rng, |s| s.registered).map(|i| {
                let (key, value) = if rng.random_bool(0.7) {
                    (LB_LABEL, rng.random_bool(0.6).then(|| "yes".to_owned()))
                } else {
                    (
                        EXCLUDE_LABEL,
                        rng.random_bool(0.5).then(|| "true".to_owned()),
                    )
                };
                vec![Action::LabelNode {
                    name: server_name(i),
                    key: key.to_owned(),
                    value,
                }]
            }),
            67..72 if model.services.len() < 4 => {
                model.next_service += 1;
                Some(vec![Action::AddService {
                    name: service_name(model.next_service),
                    annotations: service_annotations(rng),
                }])
            }
            72..76 => model.pick_service(rng).map(|i| {
                vec![Action::DeleteService {
                    name: service_name(i),
                }]
            }),
            76..84 => model.pick_service(rng).map(|i| {
                let (key, value) = annotation_change(rng, i, renames);
                vec![Action::Annotate {
                    name: service_name(i),
                    key,
                    value,
                }]
            }),
            84..88 => {
                let up: Vec<usize> = (0..replicas).filter(|r| !model.down.contains(r)).collect();
                pick(rng, &up).map(|replica| {
                    pending.push((now + ms(rng, 200..=2000), Action::StartCcm { replica }));
                    vec![Action::KillCcm { replica }]
                })
            }
            88..92 => blind_spot(rng, model, now, pending),
            _ => None,
        };
        if let Some(actions) = chosen {
            return actions;
        }
    }
    Vec::new()
}

/// Derives the RNG stream of the target-update outage from the seed.
const OUTAGE_STREAM: u64 = 0x7461_7267_6574_7321;
/// The share of schedules that end with a target-update outage.
const OUTAGE_SHARE: f64 = 0.2;

/// A target-update outage: from `start`, every request that adds or removes load balancer
/// targets fails (a 5xx, or a reset before it is forwarded) while two Nodes join (selected by
/// every Service: they carry the label the `node-selector` asks for); 20–35 s later the
/// outage ends. Every Service whose target update failed backs off meanwhile, its backoff
/// growing with each try; once the outage is over, the Nodes must still reach every load
/// balancer within the convergence limit.
fn target_update_outage(
    rng: &mut StdRng,
    model: &mut Model,
    start: Duration,
    pending: &mut Vec<(Duration, Action)>,
) {
    let kind = match rng.random_range(0..4) {
        0 => FaultKind::ResetBeforeForward,
        n => FaultKind::ServerError {
            status: [500, 502, 503][n - 1],
            html: rng.random_bool(0.3),
        },
    };
    pending.push((
        start,
        Action::ProxyFault(ProxyRule {
            method: Some("POST".to_owned()),
            path: "/load_balancers/{id}/actions/*_target".to_owned(),
            count: u32::MAX,
            kind,
        }),
    ));
    let mut at = start;
    for _ in 0..2 {
        at += ms(rng, 300..=2500);
        model.next_server += 1;
        pending.push((
            at,
            Action::AddNode {
                name: server_name(model.next_server),
                labels: BTreeMap::from([(LB_LABEL.to_owned(), "yes".to_owned())]),
            },
        ));
    }
    pending.push((start + ms(rng, 20_000..=35_000), Action::ClearProxyFaults));
}

/// The lifecycle blind spot: a running server's kubelet stops (its Node turns NotReady) while
/// an older server is powered off; a little more than one of the CCM's 10-s status periods
/// later (so that a status check has seen both), the first server is deleted and the older one
/// powered on at the same moment: the number of running servers and the newest of them stay
/// the same.
fn blind_spot(
    rng: &mut StdRng,
    model: &mut Model,
    now: Duration,
    pending: &mut Vec<(Duration, Action)>,
) -> Option<Vec<Action>> {
    let newest_running = model
        .servers
        .iter()
        .filter(|(_, s)| s.running)
        .map(|(i, _)| *i)
        .max()?;
    let victim = model.pick_server(rng, |s| s.running && s.kubelet && s.registered)?;
    if victim == newest_running {
        return None;
    }
    let older_off: Vec<usize> = model
        .servers
        .iter()
        .filter(|(i, s)| !s.running && !s.reserved && **i < newest_running)
        .map(|(i, _)| *i)
        .collect();
    let revived = pick(rng, &older_off)?;
    for i in [victim, revived] {
        if let Some(s) = model.servers.get_mut(&i) {
            s.reserved = true;
        }
    }
    let at = now + ms(rng, 10_500..=12_000);
    pending.push((
        at,
        Action::DeleteServer {
            name: server_name(victim),
        },
    ));
    pending.push((
        at,
        Action::PowerOn {
            name: server_name(revived),
        },
    ));
    Some(vec![Action::KubeletStops {
        name: server_name(victim),
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_schedule() {
        for seed in [1, 2, 77, 1234] {
            assert_eq!(generate(seed), generate(seed));
            assert_eq!(generate(seed).to_string(), generate(seed).to_string());
        }
        assert_ne!(generate(1).to_string(), generate(2).to_string());
    }

    /// Replays a schedule against a fresh model: every action must make sense when it comes.
    #[test]
    fn every_action_fits_the_state_it_meets() {
        for seed in 0..300 {
            let schedule = generate(seed);
            let mut model = Model::default();
            for (name, labels) in &schedule.initial_nodes {
                assert!(model.apply(&Action::AddNode {
                    name: name.clone(),
                    labels: labels.clone()
                }));
            }
            for (name, annotations) in &schedule.initial_services {
                assert!(model.apply(&Action::AddService {
                    name: name.clone(),
                    annotations: annotations.clone()
                }));
            }
            for action in schedule.steps.iter().flat_map(|s| &s.actions) {
                // Reservations are the generator's own bookkeeping; clear them so that the
                // replay checks only the preconditions.
                for s in model.servers.values_mut() {
                    s.reserved = false;
                }
                assert!(
                    model.apply(action),
                    "seed {seed}: {action} does not fit\n{schedule}"
                );
            }
            // Killed replicas are always started again, removed Nodes registered again.
            assert!(model.down.is_empty(), "seed {seed}\n{schedule}");
            assert!(model.servers.values().all(|s| s.registered), "seed {seed}");
            assert!(schedule.replicas == 1 || schedule.replicas == 2);
        }
    }

    #[test]
    fn some_schedules_end_with_nodes_joining_during_a_target_update_outage() {
        let mut outages = 0;
        for seed in 0..200 {
            let schedule = generate(seed);
            let mut at = Duration::ZERO;
            let mut fault_at = None;
            let mut joined = 0;
            let mut cleared_at = None;
            for step in &schedule.steps {
                at += step.delay;
                for action in &step.actions {
                    match action {
                        Action::ProxyFault(rule) if rule.count == u32::MAX => {
                            assert_eq!(rule.path, "/load_balancers/{id}/actions/*_target");
                            fault_at = Some(at);
                        }
                        Action::AddNode { labels, .. }
                            if fault_at.is_some() && cleared_at.is_none() =>
                        {
                            assert_eq!(labels.get(LB_LABEL).map(String::as_str), Some("yes"));
                            joined += 1;
                        }
                        Action::ClearProxyFaults => cleared_at = Some(at),
                        _ => {}
                    }
                }
            }
            let Some(fault_at) = fault_at else {
                assert_eq!(cleared_at, None, "seed {seed}");
                continue;
            };
            outages += 1;
            let cleared_at = cleared_at.unwrap_or_else(|| panic!("seed {seed}: never cleared"));
            let outage = cleared_at - fault_at;
            assert!(
                (Duration::from_secs(20)..=Duration::from_secs(35)).contains(&outage),
                "seed {seed}: {outage:?}"
            );
            assert_eq!(joined, 2, "seed {seed}\n{schedule}");
            assert_eq!(at, cleared_at, "seed {seed}: the outage ends the schedule");
        }
        assert!(
            (20..=60).contains(&outages),
            "{outages} outages in 200 seeds"
        );
    }

    #[test]
    fn the_generator_covers_every_kind_of_change_and_fault() {
        let mut seen = BTreeSet::new();
        let mut fault_kinds = BTreeSet::new();
        let mut blind_spots = 0;
        for seed in 0..200 {
            let schedule = generate(seed);
            for step in &schedule.steps {
                for action in &step.actions {
                    let name = format!("{action:?}");
                    seen.insert(name.split([' ', '(', '{']).next().unwrap_or("").to_owned());
                    if let Action::ProxyFault(rule) = action {
                        fault_kinds.insert(rule.kind.label());
                    }
                }
                // A deletion and a power-on in one step: the blind spot's second half.
                let deletes = step
                    .actions
                    .iter()
                    .any(|a| matches!(a, Action::DeleteServer { .. }));
                let powers_on = step
                    .actions
                    .iter()
                    .any(|a| matches!(a, Action::PowerOn { .. }));
                if deletes && powers_on {
                    blind_spots += 1;
                }
            }
        }
        for kind in [
            "AddNode",
            "DeleteServer",
            "PowerOff",
            "PowerOn",
            "KubeletStops",
            "KubeletStarts",
            "DeleteNode",
            "Reregister",
            "LabelNode",
            "AddService",
            "DeleteService",
            "Annotate",
            "KillCcm",
            "StartCcm",
            "ProxyFault",
            "CloudFault",
            "ClearProxyFaults",
        ] {
            assert!(seen.contains(kind), "{kind} never generated: {seen:?}");
        }
        assert_eq!(fault_kinds.len(), 7, "{fault_kinds:?}");
        assert!(blind_spots >= 5, "only {blind_spots} blind-spot steps");
    }
}
