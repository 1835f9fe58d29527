//! The desired state of a Service's load balancer and the steps that take the current load
//! balancer there (pure: no API calls).
//!
//! The rule, as in the official CCM: a setting nobody asked for is left as it is. Only what an
//! annotation or an `HCLOUD_LOAD_BALANCERS_*` variable sets is compared and changed; on
//! creation an unset setting gets the API's default. Annotations are parsed where they are
//! used, so a bad value in one the configuration does not use never fails a sync.
//!
//! [`Desired::new`] and [`Desired::diff`] are the pure half of ensure's decision (see
//! `decide.rs`); every [`Step`] prints as one line of `hcloud-ccm plan`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use cloud_provider::well_known::address_type::INTERNAL_IP;
use hcloud_api::models::{
    Algorithm, AlgorithmType, AttachToNetworkRequest, ChangeDnsPtrRequest,
    CreateLoadBalancerRequest, HealthCheckProtocol, Labels, LoadBalancer, ServiceProtocol,
    TargetSpec, TargetType,
};
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, Service, ServicePort,
};

use super::annotations::{AnnotationError, Annotations, CertificateType, Errors, keys};
use super::cluster::CLUSTER_NAME_LABEL;
use super::naming::{SERVICE_UID_LABEL, default_name};
use super::per_port::{PerPort, PortSettings};
pub use super::robot_targets::{DesiredIpTarget, RobotNode, RobotView};
pub use super::services::{
    DesiredHealthCheck, DesiredHealthCheckHttp, DesiredHttp, DesiredService,
};
use super::settings::{DEFAULT_LB_TYPE, LoadBalancerSettings};
pub use super::steps::{Notice, Step, Subject, reasons};
pub use super::user_labels::LabelChanges;
use crate::provider_id::ProviderId;

/// Where a new load balancer is placed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Placement {
    /// A location, e.g. `fsn1`.
    Location(String),
    /// A network zone, e.g. `eu-central`.
    NetworkZone(String),
}

/// The private network the load balancer belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredNetwork {
    /// The provider's network (`HCLOUD_NETWORK`).
    pub id: i64,
    /// `private-ipv4`: a different IP re-attaches the load balancer.
    pub ip: Option<String>,
    /// `private-subnet-ip-range` (annotation > env), used when attaching.
    pub ip_range: Option<String>,
}

/// The certificates of the https services.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Certificates {
    /// None asked for (not https, or no `http-certificates`): left as they are.
    #[default]
    Unset,
    /// `http-certificates`: IDs or names of uploaded certificates.
    Uploaded(Vec<String>),
    /// `certificate-type: managed`: the certificate to find by the Service UID label or create.
    Managed(ManagedCertificate),
    /// `http-certificate-secret`: the certificate uploaded from this TLS Secret of the
    /// Service's namespace, found by the Service UID label and the content's digest.
    Secret(String),
}

/// A managed certificate as the Service asks for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManagedCertificate {
    /// `http-managed-certificate-name`, default `ccm-managed-certificate-<uid>`.
    pub name: String,
    /// `http-managed-certificate-domains`.
    pub domains: Vec<String>,
    /// `http-managed-certificate-acme-staging` (Hetzner-internal testing).
    pub acme_staging: bool,
}

/// The uploaded certificates (IDs or names) an https port takes from its per-port settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortCertificates {
    /// The annotation that names them (the port's own, or the Service-wide one).
    pub key: String,
    /// IDs or names of uploaded certificates.
    pub refs: Vec<String>,
}

/// A target server and the node it stands for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredTarget {
    /// Server ID.
    pub server: i64,
    /// Node name (for events).
    pub node: String,
    /// Reached over the private network although the targets are public: the server has no
    /// public IPv4 (see [`Desired::reach_servers_without_public_ipv4`]).
    pub private: bool,
}

/// What the status reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusOptions {
    /// `hostname`: the only ingress when set.
    pub hostname: Option<String>,
    /// Leave the IPv6 address out.
    pub disable_ipv6: bool,
    /// Leave private IPs out.
    pub disable_private_ingress: bool,
    /// PROXY protocol is on: `ipMode: Proxy` instead of `VIP`.
    pub proxy_protocol: bool,
    /// Beyond the official CCM: the Service's first `spec.ipFamilies` is IPv6, so the public
    /// IPv6 is listed before the IPv4 (the official order, IPv4 first, otherwise).
    pub ipv6_first: bool,
}

impl StatusOptions {
    /// From the annotations over the settings; bad values are collected into `errors`.
    pub fn read(a: &Annotations, settings: &LoadBalancerSettings, errors: &mut Errors) -> Self {
        Self {
            hostname: a.string_or_empty(keys::HOSTNAME).filter(|h| !h.is_empty()),
            disable_ipv6: errors
                .take(a.bool(keys::IPV6_DISABLED))
                .unwrap_or(settings.disable_ipv6),
            disable_private_ingress: errors
                .take(a.bool(keys::DISABLE_PRIVATE_INGRESS))
                .unwrap_or(settings.disable_private_ingress),
            proxy_protocol: errors
                .take(a.bool(keys::USES_PROXYPROTOCOL))
                .or(settings.uses_proxyprotocol)
                .unwrap_or(false)
                || super::per_port::some_port_uses_proxyprotocol(a),
            ipv6_first: false,
        }
    }

    /// These options with the order of the public addresses following `service`'s
    /// `spec.ipFamilies` (IPv6 first when its first family is IPv6).
    pub fn for_service(self, service: &Service) -> Self {
        Self {
            ipv6_first: ipv6_first(service),
            ..self
        }
    }

    /// Like [`StatusOptions::read`], ignoring bad values (for paths that must not fail).
    pub fn new(a: &Annotations, settings: &LoadBalancerSettings) -> Self {
        Self::read(a, settings, &mut Errors::default())
    }
}

/// Everything the Service asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// Load balancer name (lookup and creation).
    pub name: String,
    /// Service UID (the label value).
    pub uid: String,
    /// Service name (for messages).
    pub service: String,
    /// The `name` annotation: the only thing that renames an existing load balancer.
    pub rename: Option<String>,
    /// Placement for creation; `None` when neither annotation nor settings give one.
    pub placement: Option<Placement>,
    /// The annotation that chose [`Desired::placement`] (`location` or `network-zone`);
    /// `None` when the settings did. Only an annotation is compared with where an existing
    /// load balancer is ([`Desired::not_moved`]).
    pub placement_annotation: Option<&'static str>,
    /// `type` annotation, else `HCLOUD_LOAD_BALANCERS_TYPE`: existing load balancers are
    /// changed to it. `None`: left as they are.
    pub lb_type: Option<String>,
    /// Type used on creation ([`Desired::lb_type`], else lb11).
    pub create_type: String,
    /// Balancing algorithm; `None`: left as it is.
    pub algorithm: Option<AlgorithmType>,
    /// One service per TCP port, sorted by listen port.
    pub services: Vec<DesiredService>,
    /// Service ports left as the load balancer has them: their per-port annotations are
    /// invalid (a Warning says why). Never deleted, never added.
    pub kept_ports: BTreeSet<u16>,
    /// Certificates of the https services; resolved to IDs before diffing.
    pub certificates: Certificates,
    /// Uploaded certificates (IDs or names) of the https services that name their own, by
    /// listen port (per-port annotations); the `certificates` field is for the others.
    pub port_certificates: BTreeMap<u16, PortCertificates>,
    /// Target servers, sorted by server ID.
    pub targets: Vec<DesiredTarget>,
    /// The selected Nodes with a Robot providerID, sorted by server number.
    pub robot_nodes: Vec<RobotNode>,
    /// IP targets (of Robot Nodes), chosen by [`Desired::choose_robot_targets`]; every other
    /// IP target is removed.
    pub ip_targets: Vec<DesiredIpTarget>,
    /// Targets are reached over the private network.
    pub use_private_ip: bool,
    /// The network to be attached to; `None`: detached from every network.
    pub network: Option<DesiredNetwork>,
    /// Whether the public interface is on; `None`: left as it is.
    pub public_interface: Option<bool>,
    /// Reverse DNS of the public IPv4.
    pub ipv4_rdns: Option<String>,
    /// Reverse DNS of the public IPv6.
    pub ipv6_rdns: Option<String>,
    /// Status reporting.
    pub status: StatusOptions,
    /// Warnings (events) and notes about what was left out.
    pub notices: Vec<Notice>,
    /// `HCLOUD_LOAD_BALANCERS_CLUSTER_NAME`: the cluster label's value; `None`: no label.
    pub cluster: Option<String>,
    /// Beyond the official CCM: the `labels` annotation's changes of the user labels.
    pub user_labels: LabelChanges,
    /// Beyond the official CCM: `protection-delete`; `None`: left as it is.
    pub delete_protection: Option<bool>,
    /// Beyond the official CCM: `shared-load-balancer`, the name of the load balancer the
    /// Service shares with others (see `shared.rs`); `None`: a load balancer of its own.
    pub shared: Option<String>,
    /// How the Service takes part in its shared load balancer, once decided
    /// (`shared.rs`); `None` before that, and for a load balancer of its own.
    pub share: Option<super::shared::Share>,
    /// The settings that choose the targets, as text (`node-selector`, `use-private-ip`): a
    /// shared load balancer records the digest of its primary owner's.
    pub target_settings: String,
}

/// Whether `name` can name a Secret (a DNS subdomain: lower case letters, digits, `-` and
/// `.`, each part starting and ending with a letter or digit, at most 253 characters).
fn is_object_name(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|part| {
            part.starts_with(alnum)
                && part.ends_with(alnum)
                && part.chars().all(|c| alnum(c) || c == '-')
        })
}

fn seconds(d: std::time::Duration) -> u32 {
    u32::try_from(d.as_secs()).unwrap_or(u32::MAX)
}

fn service_name(service: &Service) -> &str {
    service.metadata.name.as_deref().unwrap_or_default()
}

/// The `NodePortNotAllocated` Warning's message for the TCP port at `index` of `spec.ports`
/// (`label`: its name and port, or its port).
fn no_node_port_message(index: usize, label: &str) -> String {
    format!(
        "spec.ports[{index}].nodePort: port {label} has no NodePort, so the load balancer has no service for it (Hetzner load balancers forward to NodePorts); set spec.allocateLoadBalancerNodePorts to true (or leave it unset), or give the port an explicit nodePort"
    )
}

/// A Service port for messages: `name (port)`, or the port alone when it has no name.
fn port_label(port: &ServicePort) -> String {
    port.name
        .as_deref()
        .filter(|n| !n.is_empty())
        .map_or_else(|| port.port.to_string(), |n| format!("{n} ({})", port.port))
}

/// The protocol of a Service port (`TCP` when unset, as the apiserver defaults it).
fn port_protocol(port: &ServicePort) -> &str {
    port.protocol.as_deref().unwrap_or("TCP")
}

/// Beyond the official CCM: the `UnsupportedProtocolConfigured` Warning for a Service that has
/// ports but none of them TCP (all UDP or SCTP), naming each port and its protocol. Such a
/// Service gets no load balancer: Hetzner load balancers carry TCP only (HTTP and HTTPS run
/// over TCP), so one would be billed and serve nothing (the official CCM makes it anyway, with
/// no service on it, and writes its addresses into the status). One it has (by its UID label)
/// is deleted, as for a Service that stops being of type LoadBalancer.
///
/// `None` when a port is TCP (a mixed Service is served on its TCP ports, with the official
/// Warning for each other one) or when the Service has no ports.
pub fn no_tcp_port(service: &Service) -> Option<Notice> {
    let ports = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_deref())
        .unwrap_or_default();
    if ports.is_empty() || ports.iter().any(|p| port_protocol(p) == "TCP") {
        return None;
    }
    let named: Vec<String> = ports
        .iter()
        .map(|p| format!("port {} is {}", port_label(p), port_protocol(p)))
        .collect();
    Some(Notice::warn(
        reasons::UNSUPPORTED_PROTOCOL_CONFIGURED,
        format!(
            "no load balancer is made for service with name {}: Hetzner Cloud load balancers carry TCP only (HTTP and HTTPS run over TCP) and none of its ports is TCP: {}. Any load balancer it has is deleted; add a TCP port to get one",
            service_name(service),
            named.join(", ")
        ),
    ))
}

/// The legacy annotation that asked for source ranges before `spec.loadBalancerSourceRanges`.
const SOURCE_RANGES_ANNOTATION: &str = "service.beta.kubernetes.io/load-balancer-source-ranges";

/// Beyond the official CCM (which ignores them silently): the `LoadBalancerSourceRangesIgnored`
/// Warning when `spec.loadBalancerSourceRanges` (or its legacy annotation) is set. Hetzner
/// load balancers have no access control list, so they accept every client; the Warning says
/// so and where a filter can go instead.
pub fn source_ranges_ignored(service: &Service) -> Option<Notice> {
    let in_spec = service
        .spec
        .as_ref()
        .and_then(|s| s.load_balancer_source_ranges.as_ref())
        .is_some_and(|ranges| ranges.iter().any(|r| !r.trim().is_empty()));
    let in_annotation = service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SOURCE_RANGES_ANNOTATION))
        .is_some_and(|v| !v.trim().is_empty());
    let field = match (in_spec, in_annotation) {
        (true, _) => "spec.loadBalancerSourceRanges".to_owned(),
        (false, true) => format!("the annotation {SOURCE_RANGES_ANNOTATION}"),
        (false, false) => return None,
    };
    Some(Notice::warn(
        reasons::SOURCE_RANGES_IGNORED,
        format!(
            "{field} is ignored: Hetzner Cloud load balancers have no access control list and accept connections from every address. Filter on the servers instead: a Hetzner Cloud Firewall applied to the servers (or a firewall on them, or a NetworkPolicy) can keep the NodePorts closed to all but the load balancer; since the servers see the load balancer's address, filtering by client address needs the client's address passed on ({} or protocol http/https with X-Forwarded-For) and a filter in the ingress controller or the application",
            keys::USES_PROXYPROTOCOL
        ),
    ))
}

/// Beyond the official CCM (which ignores them silently): one `UnknownAnnotation` Warning per
/// `load-balancer.hetzner.cloud/` annotation that no setting reads (a typo), naming the
/// closest known key. Per-port keys are checked by [`PerPort`]; the read-only keys old CCMs
/// wrote ([`super::annotations::LEGACY_KEYS`]) are not reported.
pub fn unknown_annotations(a: &Annotations) -> Vec<Notice> {
    use super::annotations::{LEGACY_KEYS, PREFIX, closest_key};
    a.entries()
        .map(|(key, _)| key)
        .filter(|key| key.starts_with(PREFIX))
        .filter(|key| !key.starts_with(super::per_port::PORT_PREFIX))
        .filter(|key| !keys::ALL.contains(key) && !LEGACY_KEYS.contains(key))
        .map(|key| {
            Notice::warn(
                reasons::UNKNOWN_ANNOTATION,
                format!(
                    "annotation {key} is not one this CCM reads and is ignored; the closest known key is {}",
                    closest_key(key)
                ),
            )
        })
        .collect()
}

/// Whether the first of `service`'s `spec.ipFamilies` is IPv6 (the apiserver sets them from
/// `ipFamilyPolicy` and the cluster's service CIDRs; the primary family cannot change).
fn ipv6_first(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.ip_families.as_ref())
        .and_then(|families| families.first())
        .is_some_and(|family| family == "IPv6")
}

/// Whether `provider_id` starts with a prefix the official CCM knows.
fn known_prefix(provider_id: &str) -> bool {
    ["hcloud://", "hrobot://"]
        .iter()
        .any(|p| provider_id.starts_with(p))
}

impl Desired {
    /// The desired state for `service` with `nodes` as candidate targets. A Service without
    /// a TCP port gets no load balancer at all: callers ask [`no_tcp_port`] first.
    ///
    /// Errors are user errors: every bad value of an annotation that is used, as text naming
    /// the annotation and the value.
    pub fn new(
        service: &Service,
        a: &Annotations,
        settings: &LoadBalancerSettings,
        network_id: Option<i64>,
        nodes: &[Arc<Node>],
    ) -> Result<Self, String> {
        let mut errors = Errors::default();
        let mut notices = Vec::new();
        let uid = service.metadata.uid.clone().unwrap_or_default();
        let svc_name = service_name(service);

        let rename = errors.take(a.string(keys::NAME));
        let shared = errors.take(a.string(keys::SHARED_LOAD_BALANCER));
        if let (Some(shared), Some(name)) = (&shared, &rename)
            && shared != name
        {
            errors.0.push(AnnotationError {
                annotation: keys::SHARED_LOAD_BALANCER.to_owned(),
                value: shared.clone(),
                reason: format!(
                    "names another load balancer than {} ({name}); a shared load balancer is named by {} alone",
                    keys::NAME,
                    keys::SHARED_LOAD_BALANCER
                ),
            });
        }

        // Location (annotation, else env) beats network zone; `location: ""` clears the env
        // location so that a network zone can be used.
        let mut location = settings.location.clone();
        if let Some(v) = a.string_or_empty(keys::LOCATION) {
            location = Some(v).filter(|v| !v.is_empty());
        }
        let mut zone = settings.network_zone.clone();
        if let Some(v) = a.string_or_empty(keys::NETWORK_ZONE) {
            zone = Some(v).filter(|v| !v.is_empty());
        }
        let annotated = |key| a.string_or_empty(key).is_some_and(|v| !v.is_empty());
        let placement_annotation = match (&location, &zone) {
            (Some(_), _) => annotated(keys::LOCATION).then_some(keys::LOCATION),
            (None, Some(_)) => annotated(keys::NETWORK_ZONE).then_some(keys::NETWORK_ZONE),
            (None, None) => None,
        };
        let placement = location
            .map(Placement::Location)
            .or(zone.map(Placement::NetworkZone));
        notices.extend(source_ranges_ignored(service));
        notices.extend(unknown_annotations(a));

        let mut lb_type = settings.lb_type.clone();
        if let Some(v) = a.string_or_empty(keys::TYPE) {
            lb_type = Some(v).filter(|v| !v.is_empty());
        }
        if lb_type.is_none() {
            notices.push(Notice::warn(
                reasons::LOAD_BALANCER_TYPE_UNCONFIGURED,
                format!(
                    "Load Balancer Type unconfigured: this will be required in the future, set it with the annotation {:?} or cluster-wide with the environment variable {:?}",
                    keys::TYPE,
                    "HCLOUD_LOAD_BALANCERS_TYPE"
                ),
            ));
        }

        let algorithm = errors.take(a.algorithm()).or(settings.algorithm.clone());
        let disable_public = errors
            .take(a.bool(keys::DISABLE_PUBLIC_NETWORK))
            .or(settings.disable_public_network);
        let wide = Self::port_settings(service, a, settings, &uid, &mut errors);
        let mut per_port = PerPort::read(service, a);

        let mut services: BTreeMap<u16, DesiredService> = BTreeMap::new();
        let mut kept_ports = BTreeSet::new();
        let mut tcp_ports = 0usize;
        let ports = service
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .map(Vec::as_slice)
            .unwrap_or_default();
        for (index, port) in ports.iter().enumerate() {
            let proto = port_protocol(port);
            let label = port_label(port);
            if proto != "TCP" {
                notices.push(Notice::warn(
                    reasons::UNSUPPORTED_PROTOCOL_CONFIGURED,
                    format!(
                        "configured unsupported Hetzner Cloud load balancer protocol {proto} for service with name {svc_name}"
                    ),
                ));
                continue;
            }
            tcp_ports += 1;
            let Ok(listen_port) = u16::try_from(port.port) else {
                notices.push(Notice::log(format!(
                    "port {label}: not a valid port number"
                )));
                continue;
            };
            // No NodePort (allocateLoadBalancerNodePorts: false, no explicit nodePort): the
            // port gets no service, and a Warning says why (the official CCM sends destination
            // port 0, which the API refuses).
            let Some(node_port) = port
                .node_port
                .and_then(|p| u16::try_from(p).ok())
                .filter(|p| *p != 0)
            else {
                notices.push(Notice::warn(
                    reasons::NODE_PORT_NOT_ALLOCATED,
                    no_node_port_message(index, &label),
                ));
                continue;
            };
            // Per-port annotations (beyond the official CCM): `None` leaves the port as the
            // load balancer has it.
            match per_port.settings(port, listen_port, &wide, &mut errors, |a, errors| {
                Self::port_settings(service, a, settings, &uid, errors)
            }) {
                Some(wanted) => {
                    services.insert(listen_port, wanted.service(listen_port, node_port));
                }
                None => {
                    kept_ports.insert(listen_port);
                }
            }
        }
        let (certificates, port_certificates) =
            per_port.finish(&mut services, &mut kept_ports, wide.certificates);
        notices.append(&mut per_port.notices);

        // TCP ports without NodePorts (e.g. allocateLoadBalancerNodePorts: false) would leave
        // the load balancer with no service: refuse instead of deleting every service it has.
        if services.is_empty() && kept_ports.is_empty() && tcp_ports > 0 {
            errors.0.push(AnnotationError {
                annotation: "spec.ports[].nodePort".to_owned(),
                value: String::new(),
                reason: "none of the Service's TCP ports has a NodePort; Hetzner load balancers forward to NodePorts, so set spec.allocateLoadBalancerNodePorts to true (or leave it unset), or give the ports explicit nodePorts".to_owned(),
            });
        }

        let use_private_ip = errors
            .take(a.bool(keys::USE_PRIVATE_IP))
            .unwrap_or(settings.use_private_ip);
        if use_private_ip && network_id.is_none() {
            errors.0.push(AnnotationError {
                annotation: keys::USE_PRIVATE_IP.to_owned(),
                value: "true".to_owned(),
                reason: "needs a network: set HCLOUD_NETWORK (or HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP / the annotation to false)".to_owned(),
            });
        }
        let selector = errors.take(a.node_selector());
        let target_settings = format!(
            "node-selector={};use-private-ip={use_private_ip}",
            a.raw(keys::NODE_SELECTOR).unwrap_or_default().trim()
        );
        let mut targets = BTreeMap::new();
        let mut robot_nodes = BTreeMap::new();
        for node in nodes {
            let node_name = node.metadata.name.clone().unwrap_or_default();
            if let Some(selector) = &selector {
                let labels = node.metadata.labels.clone().unwrap_or_default();
                if !selector.matches(&labels) {
                    continue;
                }
            }
            let provider_id = node
                .spec
                .as_ref()
                .and_then(|s| s.provider_id.as_deref())
                .unwrap_or_default();
            match ProviderId::parse(provider_id) {
                Ok(ProviderId::Cloud(id)) => {
                    targets.entry(id).or_insert(node_name);
                }
                Ok(ProviderId::Robot(number)) => {
                    let internal_ip = node
                        .status
                        .iter()
                        .flat_map(|s| s.addresses.iter().flatten())
                        .find(|a| a.type_ == INTERNAL_IP)
                        .map(|a| a.address.clone());
                    robot_nodes
                        .entry(u64::try_from(number).unwrap_or_default())
                        .or_insert((node_name, internal_ip));
                }
                Err(_) if !known_prefix(provider_id) => notices.push(Notice::warn_node(
                    &node_name,
                    reasons::UNKNOWN_PROVIDER_ID_PREFIX,
                    format!(
                        "Node could not be added to Load Balancer for service {svc_name} because the provider ID does not match any known format"
                    ),
                )),
                Err(err) => notices.push(Notice::warn_node(
                    &node_name,
                    reasons::INVALID_PROVIDER_ID,
                    format!(
                        "Node could not be added to Load Balancer for service {svc_name}: spec.{err}"
                    ),
                )),
            }
        }

        // Fixed IP and subnet matter only with a network (read lazily).
        let network = network_id.map(|id| DesiredNetwork {
            id,
            ip: errors.take(a.private_ipv4()).map(|ip| ip.to_string()),
            ip_range: errors
                .take(a.private_subnet_ip_range())
                .or(settings.private_subnet_ip_range)
                .map(|r| r.to_string()),
        });
        let public_interface = match disable_public {
            Some(true) if network_id.is_none() => {
                notices.push(Notice::log(
                    "the public interface stays enabled: disabling it needs a network (HCLOUD_NETWORK)",
                ));
                None
            }
            other => other.map(|disable| !disable),
        };
        let status = StatusOptions::read(a, settings, &mut errors).for_service(service);
        let rdns = |key: &str| a.string_or_empty(key).filter(|v| !v.is_empty());
        let user_labels = LabelChanges::read(a, &mut errors);
        let delete_protection = super::user_labels::delete_protection(a, &mut errors);

        errors.finish().map_err(|e| e.to_string())?;
        // A shared load balancer is found by its name and never renamed.
        let (name, rename) = match &shared {
            Some(shared) => (shared.clone(), None),
            None => (
                rename.clone().unwrap_or_else(|| default_name(service)),
                rename,
            ),
        };
        Ok(Self {
            name,
            uid,
            service: svc_name.to_owned(),
            rename,
            placement,
            placement_annotation,
            create_type: lb_type
                .clone()
                .unwrap_or_else(|| DEFAULT_LB_TYPE.to_owned()),
            lb_type,
            algorithm,
            services: services.into_values().collect(),
            kept_ports,
            certificates,
            port_certificates,
            targets: targets
                .into_iter()
                .map(|(server, node)| DesiredTarget {
                    server,
                    node,
                    private: false,
                })
                .collect(),
            robot_nodes: robot_nodes
                .into_iter()
                .map(|(number, (node, internal_ip))| RobotNode {
                    number,
                    node,
                    internal_ip,
                })
                .collect(),
            ip_targets: Vec::new(),
            use_private_ip,
            network,
            public_interface,
            ipv4_rdns: rdns(keys::IPV4_RDNS),
            ipv6_rdns: rdns(keys::IPV6_RDNS),
            status,
            notices,
            cluster: settings.cluster_name.clone(),
            user_labels,
            delete_protection,
            shared,
            share: None,
            target_settings,
        })
    }

    /// What a Service port asks for, read from `a` (the Service's annotations, or a port's
    /// view of them) over the settings.
    pub(super) fn port_settings(
        service: &Service,
        a: &Annotations,
        settings: &LoadBalancerSettings,
        uid: &str,
        errors: &mut Errors,
    ) -> PortSettings {
        let proxyprotocol = errors
            .take(a.bool(keys::USES_PROXYPROTOCOL))
            .or(settings.uses_proxyprotocol);
        let protocol = errors.take(a.protocol()).unwrap_or(ServiceProtocol::Tcp);

        // HTTP settings and certificates: read only for http/https services.
        let http = if protocol == ServiceProtocol::Tcp {
            None
        } else {
            Some(DesiredHttp {
                cookie_name: errors.take(a.string(keys::HTTP_COOKIE_NAME)),
                cookie_lifetime: errors.take(a.seconds(keys::HTTP_COOKIE_LIFETIME, 1, u32::MAX)),
                certificates: None,
                redirect_http: errors.take(a.bool(keys::HTTP_REDIRECT_HTTP)),
                sticky_sessions: errors.take(a.bool(keys::HTTP_STICKY_SESSIONS)),
                timeout_idle: errors.take(a.seconds(keys::HTTP_TIMEOUT_IDLE, 30, 300)),
            })
        };
        let certificates = if protocol == ServiceProtocol::Https {
            Self::certificates(a, uid, errors)
        } else {
            Certificates::Unset
        };

        // Health check: any health-check setting (annotation or variable) makes it follow the
        // service protocol; with none it is TCP on the NodePort.
        let hc_protocol = errors.take(a.health_check_protocol());
        let hc_port = errors.take(a.health_check_port());
        let interval = errors
            .take(a.seconds(keys::HEALTH_CHECK_INTERVAL, 3, 60))
            .or(settings.health_check_interval.map(seconds));
        let timeout = errors
            .take(a.seconds(keys::HEALTH_CHECK_TIMEOUT, 1, 60))
            .or(settings.health_check_timeout.map(seconds));
        let retries = errors
            .take(a.number(keys::HEALTH_CHECK_RETRIES, 0, 5))
            .or(settings.health_check_retries);
        let configured = hc_protocol.is_some()
            || hc_port.is_some()
            || interval.is_some()
            || timeout.is_some()
            || retries.is_some();
        let hc_protocol = match (configured, hc_protocol) {
            (false, _) => HealthCheckProtocol::Tcp,
            (true, Some(p)) => p,
            (true, None) => match protocol {
                ServiceProtocol::Http => HealthCheckProtocol::Http,
                ServiceProtocol::Https => HealthCheckProtocol::Https,
                _ => HealthCheckProtocol::Tcp,
            },
        };
        // Beyond the official CCM: externalTrafficPolicy Local checks kube-proxy's answer on the
        // Service's healthCheckNodePort, and, opt-in, Cluster checks kube-proxy's own health
        // port (unless a health-check annotation says otherwise).
        let (hc_protocol, hc_http, hc_port) = match super::local_traffic::check_port(
            service,
            a,
            settings.health_check_kube_proxy,
            errors,
        ) {
            Some(local_port) => (
                HealthCheckProtocol::Http,
                Some(super::local_traffic::http()),
                Some(local_port),
            ),
            None => {
                let hc_http =
                    (hc_protocol != HealthCheckProtocol::Tcp).then(|| DesiredHealthCheckHttp {
                        domain: errors.take(a.string(keys::HEALTH_CHECK_HTTP_DOMAIN)),
                        path: errors.take(a.string(keys::HEALTH_CHECK_HTTP_PATH)),
                        status_codes: Some(a.list(keys::HTTP_STATUS_CODES))
                            .filter(|c| !c.is_empty()),
                        tls: errors.take(a.bool(keys::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE)),
                    });
                (hc_protocol, hc_http, hc_port)
            }
        };
        PortSettings {
            protocol,
            proxyprotocol,
            http,
            certificates,
            health_check: DesiredHealthCheck {
                protocol: hc_protocol,
                port: hc_port.unwrap_or_default(),
                interval,
                timeout,
                retries,
                http: hc_http,
            },
            health_check_port: hc_port,
        }
    }

    fn certificates(a: &Annotations, uid: &str, errors: &mut Errors) -> Certificates {
        let kind = errors.take(a.certificate_type());
        if a.is_set(keys::HTTP_CERTIFICATE_SECRET) {
            return Self::secret_certificate(a, kind, errors);
        }
        match kind.unwrap_or_default() {
            CertificateType::Managed => {
                let domains = a.list(keys::HTTP_MANAGED_CERTIFICATE_DOMAINS);
                if domains.is_empty() {
                    errors.0.push(AnnotationError {
                        annotation: keys::HTTP_MANAGED_CERTIFICATE_DOMAINS.to_owned(),
                        value: a
                            .raw(keys::HTTP_MANAGED_CERTIFICATE_DOMAINS)
                            .unwrap_or_default()
                            .to_owned(),
                        reason: format!(
                            "must name at least one domain when {} is managed",
                            keys::CERTIFICATE_TYPE
                        ),
                    });
                }
                Certificates::Managed(ManagedCertificate {
                    name: a
                        .string_or_empty(keys::HTTP_MANAGED_CERTIFICATE_NAME)
                        .filter(|n| !n.is_empty())
                        .unwrap_or_else(|| format!("ccm-managed-certificate-{uid}")),
                    domains,
                    // As officially: anything but a true value means no staging.
                    acme_staging: a
                        .bool(keys::HTTP_MANAGED_CERTIFICATE_ACME_STAGING)
                        .ok()
                        .flatten()
                        .unwrap_or(false),
                })
            }
            CertificateType::Uploaded => {
                let refs = a.list(keys::HTTP_CERTIFICATES);
                if refs.is_empty() {
                    Certificates::Unset
                } else {
                    Certificates::Uploaded(refs)
                }
            }
        }
    }

    /// `http-certificate-secret`: a Secret name, with neither a managed certificate nor
    /// uploaded ones named beside it.
    fn secret_certificate(
        a: &Annotations,
        kind: Option<CertificateType>,
        errors: &mut Errors,
    ) -> Certificates {
        let key = keys::HTTP_CERTIFICATE_SECRET;
        let raw = a.raw(key).unwrap_or_default();
        let conflict = |other: &str, value: &str| AnnotationError {
            annotation: key.to_owned(),
            value: raw.to_owned(),
            reason: format!("cannot be used with {other}: {value}; set one of them"),
        };
        if kind == Some(CertificateType::Managed) {
            errors.0.push(conflict(keys::CERTIFICATE_TYPE, "managed"));
            return Certificates::Unset;
        }
        if let Some(named) = a.raw(keys::HTTP_CERTIFICATES) {
            errors.0.push(conflict(keys::HTTP_CERTIFICATES, named));
            return Certificates::Unset;
        }
        let name = raw.trim();
        if !is_object_name(name) {
            errors.0.push(AnnotationError {
                annotation: key.to_owned(),
                value: raw.to_owned(),
                reason: "is not a Secret name (lower case letters, digits, '-' and '.', at most 253 characters)".to_owned(),
            });
            return Certificates::Unset;
        }
        Certificates::Secret(name.to_owned())
    }

    /// Put resolved certificate IDs into every https service.
    pub fn set_certificates(&mut self, ids: &[i64]) {
        for service in &mut self.services {
            if service.protocol == ServiceProtocol::Https
                && !self.port_certificates.contains_key(&service.listen_port)
                && let Some(http) = &mut service.http
            {
                http.certificates = Some(ids.to_vec());
            }
        }
    }

    /// The labels `current` should have: as they are with the `labels` annotation's changes,
    /// plus the Service UID label (and the cluster label when a cluster name is set).
    pub fn labels(&self, current: &Labels) -> Labels {
        if let Some(share) = &self.share {
            return share.labels.clone();
        }
        let mut labels = self.user_labels.apply(current);
        labels.insert(SERVICE_UID_LABEL.to_owned(), self.uid.clone());
        if let Some(cluster) = &self.cluster {
            labels.insert(CLUSTER_NAME_LABEL.to_owned(), cluster.clone());
        }
        labels
    }

    /// Whether `target` is reached over the private network.
    fn reaches_privately(&self, target: &DesiredTarget) -> bool {
        self.use_private_ip || target.private
    }

    fn target(&self, target: &DesiredTarget) -> TargetSpec {
        TargetSpec::server(target.server, self.reaches_privately(target))
    }

    /// Whether an IP target stays: it is the chosen IP of a selected Robot Node (none while
    /// Robot support is off, as officially: then every IP target is removed).
    fn keeps_ip_target(&self, ip: &str) -> bool {
        self.ip_targets.iter().any(|t| t.ip == ip)
    }

    /// Whether the create request can attach the network itself (no fixed IP or subnet).
    fn network_on_create(&self) -> Option<i64> {
        self.network
            .as_ref()
            .filter(|n| n.ip.is_none() && n.ip_range.is_none())
            .map(|n| n.id)
    }

    /// `POST /load_balancers` for this desired state; `max_targets` is the type's limit. Unset settings
    /// are not sent (algorithm, public interface) or sent as the API's defaults (services).
    pub fn create_request(
        &self,
        placement: &Placement,
        max_targets: usize,
    ) -> CreateLoadBalancerRequest {
        let network = self.network_on_create();
        let (location, network_zone) = match placement {
            Placement::Location(l) => (Some(l.clone()), None),
            Placement::NetworkZone(z) => (None, Some(z.clone())),
        };
        // Private targets need the network; without it at creation they are added later.
        let targets = if self.use_private_ip && network.is_none() {
            Vec::new()
        } else {
            self.targets
                .iter()
                .filter(|t| network.is_some() || !self.reaches_privately(t))
                .map(|t| self.target(t))
                .chain(self.ip_targets.iter().map(|t| TargetSpec::ip(t.ip.clone())))
                .take(max_targets)
                .collect()
        };
        // Disabling the public interface needs the network: when it cannot be attached at
        // creation, the interface is turned off after attaching.
        let public_interface = match (self.public_interface, network) {
            (Some(false), None) => None,
            (p, _) => p,
        };
        CreateLoadBalancerRequest {
            name: self.name.clone(),
            load_balancer_type: self.create_type.clone(),
            location,
            network_zone,
            algorithm: self.algorithm.clone().map(Algorithm::new),
            services: self.services.iter().map(DesiredService::spec).collect(),
            targets,
            labels: Some(self.labels(&Labels::new())),
            public_interface,
            network,
            ..CreateLoadBalancerRequest::default()
        }
    }

    /// The services of the create request (as [`Desired::create_request`] sends them), e.g.
    /// once a managed certificate's ID is known.
    pub fn create_request_services(&self) -> Vec<hcloud_api::models::ServiceSpec> {
        self.services.iter().map(DesiredService::spec).collect()
    }

    /// The steps from `lb` to this desired state, in a safe order. Target additions stop at the load
    /// balancer type's `max_targets` (a type change shows up in the next round).
    pub fn diff(&self, lb: &LoadBalancer) -> Vec<Step> {
        let mut steps = Vec::new();
        // A shared load balancer's own settings and targets are its primary owner's.
        let own_settings = self.share.as_ref().is_none_or(|s| s.primary);
        if let Some(share) = &self.share {
            if share.labels != lb.labels {
                steps.push(Step::Update {
                    name: None,
                    labels: Some(share.labels.clone()),
                });
            }
            return self.diff_rest(lb, steps, own_settings);
        }

        // Name (only with the name annotation) and label (PUT, never locked).
        let name = self.rename.clone().filter(|n| *n != lb.name);
        // A load balancer made before the cluster name was set gets the cluster label.
        let unlabelled_cluster = self
            .cluster
            .as_ref()
            .is_some_and(|c| lb.labels.get(CLUSTER_NAME_LABEL) != Some(c));
        let labels = (lb.labels.get(SERVICE_UID_LABEL) != Some(&self.uid) || unlabelled_cluster)
            .then(|| self.labels(&lb.labels));
        // Beyond the official CCM: the `labels` annotation (with the UID label above when that
        // is written too).
        let user_labels = labels
            .is_none()
            .then(|| self.user_labels.differences(&lb.labels))
            .filter(|changes| !changes.is_empty());
        if name.is_some() || labels.is_some() {
            steps.push(Step::Update { name, labels });
        }
        if let Some(changes) = user_labels {
            steps.push(Step::ChangeLabels {
                labels: self.labels(&lb.labels),
                changes,
            });
        }
        self.diff_rest(lb, steps, own_settings)
    }

    /// The diff after the name and labels: networks, targets, services, type, algorithm,
    /// public interface, protection and reverse DNS; with `own_settings` false (a shared load
    /// balancer's owner that is not its primary) only the services.
    fn diff_rest(&self, lb: &LoadBalancer, mut steps: Vec<Step>, own_settings: bool) -> Vec<Step> {
        if !own_settings {
            let (deletes, updates, adds) = self.service_steps(lb);
            steps.extend(deletes);
            steps.extend(updates);
            steps.extend(adds);
            return steps;
        }

        // Networks: detach from every other one (from all without HCLOUD_NETWORK) and from
        // ours when the fixed IP differs; then attach.
        let keeps = |network: i64, ip: &str| {
            self.network
                .as_ref()
                .is_some_and(|n| n.id == network && n.ip.as_deref().is_none_or(|want| want == ip))
        };
        for attached in &lb.private_net {
            if !keeps(attached.network, &attached.ip) {
                steps.push(Step::DetachNetwork(attached.network));
            }
        }
        if let Some(network) = &self.network
            && !lb.private_net.iter().any(|p| keeps(p.network, &p.ip))
        {
            steps.push(Step::AttachNetwork(AttachToNetworkRequest {
                network: network.id,
                ip: network.ip.clone(),
                ip_range: network.ip_range.clone(),
            }));
        }

        let (remove, add, _) = self.target_changes(lb);
        // An adopted shared load balancer's other targets may be its own: none is removed.
        if !self.share.as_ref().is_some_and(|s| s.adopted) {
            steps.extend(remove);
        }
        let (deletes, updates, new_services) = self.service_steps(lb);
        steps.extend(deletes);

        if let Some(to) = self.type_change(lb) {
            steps.push(Step::ChangeType {
                from: lb.load_balancer_type.name.clone(),
                to: to.to_owned(),
            });
        }
        if let Some(algorithm) = &self.algorithm
            && lb.algorithm.kind != *algorithm
        {
            steps.push(Step::ChangeAlgorithm {
                from: lb.algorithm.kind.clone(),
                to: algorithm.clone(),
            });
        }

        // New services after the updates: an update may free a port a new one listens on
        // (turning a redirect off frees port 80).
        steps.extend(updates);
        steps.extend(new_services);
        steps.extend(add);

        if let Some(want) = self.public_interface
            && lb.public_net.enabled != want
        {
            steps.push(if want {
                Step::EnablePublicInterface
            } else {
                Step::DisablePublicInterface
            });
        }
        if let Some(protect) = self.delete_protection
            && lb.protection.delete != protect
        {
            steps.push(Step::ChangeProtection(protect));
        }
        let ptrs = [
            (&lb.public_net.ipv4, &self.ipv4_rdns),
            (&lb.public_net.ipv6, &self.ipv6_rdns),
        ];
        for (current, wanted) in ptrs {
            if let (Some(ip), Some(ptr)) = (&current.ip, wanted)
                && current.dns_ptr.as_ref() != Some(ptr)
            {
                steps.push(Step::ChangeDnsPtr(ChangeDnsPtrRequest {
                    ip: ip.clone(),
                    dns_ptr: Some(ptr.clone()),
                }));
            }
        }
        steps
    }

    /// The service steps: deletions (ports neither wanted nor kept), updates and additions.
    fn service_steps(&self, lb: &LoadBalancer) -> (Vec<Step>, Vec<Step>, Vec<Step>) {
        let wanted_ports: BTreeSet<u16> = self.services.iter().map(|s| s.listen_port).collect();
        let deletes = lb
            .services
            .iter()
            .filter(|s| {
                !wanted_ports.contains(&s.listen_port) && !self.kept_ports.contains(&s.listen_port)
            })
            .map(|s| Step::DeleteService(s.listen_port))
            .collect();
        let mut updates = Vec::new();
        let mut adds = Vec::new();
        for wanted in &self.services {
            match lb
                .services
                .iter()
                .find(|s| s.listen_port == wanted.listen_port)
            {
                None => adds.push(Step::AddService(wanted.spec())),
                Some(current) => {
                    let changes = wanted.changes(current);
                    if !changes.is_empty() {
                        updates.push(Step::UpdateService {
                            update: wanted.update(current),
                            changes,
                        });
                    }
                }
            }
        }
        (deletes, updates, adds)
    }

    /// The `LoadBalancerNotMoved` Warning when the `location` or `network-zone` annotation
    /// asks for another place than where `lb` is: Hetzner cannot move a load balancer, so it
    /// stays (nothing else changes because of it). `None` when the place matches, the settings
    /// (not an annotation) chose it, or the API did not say where `lb` is.
    pub fn not_moved(&self, lb: &LoadBalancer) -> Option<Notice> {
        let key = self.placement_annotation?;
        let (wanted, actual) = match self.placement.as_ref()? {
            Placement::Location(want) => {
                let here = &lb.location;
                let same = *want == here.name || want.parse::<i64>().ok() == Some(here.id);
                (want, (!same).then_some(here.name.as_str()))
            }
            Placement::NetworkZone(want) => {
                let here = lb.location.network_zone.as_str();
                (want, (want != here).then_some(here))
            }
        };
        let actual = actual.filter(|a| !a.is_empty())?;
        Some(Notice::warn(
            reasons::LOAD_BALANCER_NOT_MOVED,
            format!(
                "{key}: load balancer {:?} stays in {actual}, not {wanted}: Hetzner Cloud cannot move a load balancer, so changing the annotation after it was created has no effect. To move it, delete and re-create the Service (a new load balancer is created in {wanted}, with new public IPs), or create a second Service in {wanted}, move the traffic to its addresses and delete this one",
                lb.name
            ),
        ))
    }

    /// The type `lb` is changed to (name or ID), when it is not of the wanted one.
    pub fn type_change(&self, lb: &LoadBalancer) -> Option<&str> {
        self.lb_type.as_deref().filter(|t| {
            *t != lb.load_balancer_type.name
                && t.parse::<i64>().ok() != Some(lb.load_balancer_type.id)
        })
    }

    /// Removals, additions (within the type's limit) and the nodes left out for the limit.
    fn target_changes(&self, lb: &LoadBalancer) -> (Vec<Step>, Vec<Step>, Vec<&str>) {
        let desired: BTreeMap<i64, bool> = self
            .targets
            .iter()
            .map(|t| (t.server, self.reaches_privately(t)))
            .collect();
        let mut remove = Vec::new();
        let mut kept = BTreeSet::new();
        let mut kept_ips = BTreeSet::new();
        // Every target counts against the limit, label-selector targets included.
        let mut count = lb.targets.len();
        for target in &lb.targets {
            match target.kind {
                TargetType::Server => {
                    let Some(id) = target.server.as_ref().map(|s| s.id) else {
                        continue;
                    };
                    if desired.get(&id) == Some(&target.use_private_ip) {
                        kept.insert(id);
                    } else {
                        remove.push(Step::RemoveTarget(TargetSpec::server(id, false)));
                        count = count.saturating_sub(1);
                    }
                }
                TargetType::Ip => {
                    let Some(ip) = &target.ip else { continue };
                    if self.keeps_ip_target(&ip.ip) {
                        kept_ips.insert(ip.ip.as_str());
                    } else {
                        remove.push(Step::RemoveTarget(TargetSpec::ip(ip.ip.clone())));
                        count = count.saturating_sub(1);
                    }
                }
                // Label-selector targets are left as they are, as officially.
                _ => {}
            }
        }
        let max = match lb.load_balancer_type.max_targets {
            0 => usize::MAX,
            n => n as usize,
        };
        let mut add = Vec::new();
        let mut left_out = Vec::new();
        // Robot Nodes' IP targets after the cloud servers, as officially.
        let wanted = self
            .targets
            .iter()
            .filter(|t| !kept.contains(&t.server))
            .map(|t| (self.target(t), t.node.as_str()))
            .chain(
                self.ip_targets
                    .iter()
                    .filter(|t| !kept_ips.contains(t.ip.as_str()))
                    .map(|t| (TargetSpec::ip(t.ip.clone()), t.node.as_str())),
            );
        for (spec, node) in wanted {
            if count >= max {
                left_out.push(node);
            } else {
                add.push(Step::AddTarget(spec));
                count += 1;
            }
        }
        (remove, add, left_out)
    }

    /// `MaxTargetsReached` for every node [`Desired::diff`] leaves out of `lb` for the type's
    /// limit (ask after the last round).
    pub fn left_out(&self, lb: &LoadBalancer) -> Vec<Notice> {
        if self.share.as_ref().is_some_and(|s| !s.primary) {
            return Vec::new();
        }
        self.target_changes(lb)
            .2
            .into_iter()
            .map(|node| self.max_targets_reached(node))
            .collect()
    }

    /// The official `MaxTargetsReached` Warning for `node`.
    pub fn max_targets_reached(&self, node: &str) -> Notice {
        Notice::warn_node(
            node,
            reasons::MAX_TARGETS_REACHED,
            format!(
                "Node could not be added to Load Balancer for service {} because the max number of targets has been reached",
                self.service
            ),
        )
    }
}

/// The deprecation warning for `lb_type` at `now` (RFC 3339 times compared as instants):
/// `Ok(Some)` while deprecated but orderable, `Err` once it can no longer be ordered.
pub fn deprecation(
    lb_type: &hcloud_api::models::LoadBalancerType,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Option<Notice>, String> {
    let Some(deprecation) = &lb_type.deprecation else {
        return Ok(None);
    };
    let unavailable_after = deprecation
        .unavailable_after
        .as_deref()
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&chrono::Utc));
    match unavailable_after {
        Some(after) if now > after => Err(format!(
            "Load Balancer Type {:?} is unavailable and can no longer be ordered",
            lb_type.name
        )),
        Some(after) => Ok(Some(Notice::warn(
            reasons::LOAD_BALANCER_TYPE_DEPRECATED,
            format!(
                "Load Balancer Type {:?} is deprecated and will no longer be available for order as of {}",
                lb_type.name,
                after.format("%Y-%m-%d")
            ),
        ))),
        None => Ok(Some(Notice::warn(
            reasons::LOAD_BALANCER_TYPE_DEPRECATED,
            format!("Load Balancer Type {:?} is deprecated", lb_type.name),
        ))),
    }
}

/// The status of `lb`; `Err` with a reason while its public IPs are not assigned yet.
pub fn status(lb: &LoadBalancer, opts: &StatusOptions) -> Result<LoadBalancerStatus, String> {
    let ingress = |ip: Option<String>, hostname: Option<String>| LoadBalancerIngress {
        ip_mode: ip.as_ref().map(|_| {
            if opts.proxy_protocol {
                "Proxy".to_owned()
            } else {
                "VIP".to_owned()
            }
        }),
        ip,
        hostname,
        ports: None,
    };
    if let Some(hostname) = &opts.hostname {
        return Ok(LoadBalancerStatus {
            ingress: Some(vec![ingress(None, Some(hostname.clone()))]),
        });
    }
    let mut ingresses = Vec::new();
    if lb.public_net.enabled {
        let Some(ipv4) = lb.public_net.ipv4.ip.clone() else {
            return Err(format!(
                "load balancer {:?} (ID {}) has no public IPv4 yet: it is still being created",
                lb.name, lb.id
            ));
        };
        let ipv6 = lb.public_net.ipv6.ip.clone().filter(|_| !opts.disable_ipv6);
        // IPv4 first, as officially; IPv6 first for a Service whose first family is IPv6.
        let public = if opts.ipv6_first {
            [ipv6, Some(ipv4)]
        } else {
            [Some(ipv4), ipv6]
        };
        ingresses.extend(
            public
                .into_iter()
                .flatten()
                .map(|ip| ingress(Some(ip), None)),
        );
    }
    if !opts.disable_private_ingress {
        for private in lb.private_net.iter().filter(|p| !p.ip.is_empty()) {
            ingresses.push(ingress(Some(private.ip.clone()), None));
        }
    }
    Ok(LoadBalancerStatus {
        ingress: Some(ingresses),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcloud_api::models::{
        Deprecation, LoadBalancerIp, LoadBalancerPrivateNet, LoadBalancerPublicNet,
        LoadBalancerService, LoadBalancerTarget, LoadBalancerType, TargetIp,
    };
    use k8s_openapi::api::core::v1::{NodeSpec, ServicePort};
    use std::time::Duration;

    fn service(ports: &[(i32, &str, Option<i32>)]) -> Service {
        crate::test_support::web_service(
            "0f2f6c0e-1b2a-4c3d-9e8f-0123456789ab",
            ports.iter().map(|(port, proto, node_port)| ServicePort {
                port: *port,
                protocol: Some((*proto).to_owned()),
                node_port: *node_port,
                ..ServicePort::default()
            }),
        )
    }

    fn node(name: &str, provider_id: &str, labels: &[(&str, &str)]) -> Arc<Node> {
        let mut node = Node::default();
        node.metadata.name = Some(name.to_owned());
        node.metadata.labels = Some(crate::test_support::labels(labels));
        node.spec = Some(NodeSpec {
            provider_id: Some(provider_id.to_owned()).filter(|p| !p.is_empty()),
            ..NodeSpec::default()
        });
        Arc::new(node)
    }

    use crate::test_support::annotations as ann;

    fn tcp80() -> Service {
        service(&[(80, "TCP", Some(30080))])
    }

    fn desired_with(
        svc: &Service,
        pairs: &[(&str, &str)],
        settings: &LoadBalancerSettings,
        network: Option<i64>,
        nodes: &[Arc<Node>],
    ) -> Desired {
        Desired::new(svc, &ann(pairs), settings, network, nodes).unwrap()
    }

    fn desired_of(svc: &Service, pairs: &[(&str, &str)], nodes: &[Arc<Node>]) -> Desired {
        desired_with(svc, pairs, &LoadBalancerSettings::default(), None, nodes)
    }

    /// The LB as the API would show it right after creating `desired`.
    fn created(desired: &Desired) -> LoadBalancer {
        let request = desired.create_request(&Placement::Location("fsn1".into()), usize::MAX);
        let mut lb = LoadBalancer {
            id: 1,
            name: desired.name.clone(),
            labels: desired.labels(&Labels::new()),
            load_balancer_type: LoadBalancerType {
                name: desired.create_type.clone(),
                max_targets: 25,
                ..LoadBalancerType::default()
            },
            algorithm: Algorithm::new(
                desired
                    .algorithm
                    .clone()
                    .unwrap_or(AlgorithmType::RoundRobin),
            ),
            public_net: LoadBalancerPublicNet {
                enabled: request.public_interface.unwrap_or(true),
                ipv4: LoadBalancerIp {
                    ip: Some("198.51.100.1".into()),
                    ..LoadBalancerIp::default()
                },
                ipv6: LoadBalancerIp {
                    ip: Some("2001:db8::1".into()),
                    ..LoadBalancerIp::default()
                },
            },
            ..LoadBalancer::default()
        };
        for s in &request.services {
            lb.services.push(LoadBalancerService {
                protocol: s.protocol.clone(),
                listen_port: s.listen_port,
                destination_port: s.destination_port,
                proxyprotocol: s.proxyprotocol,
                http: s.http.clone(),
                health_check: s.health_check.clone(),
            });
        }
        for t in &request.targets {
            lb.targets.push(LoadBalancerTarget {
                kind: TargetType::Server,
                server: t.server,
                use_private_ip: t.use_private_ip.unwrap_or(false),
                ..LoadBalancerTarget::default()
            });
        }
        if let Some(network) = request.network {
            lb.private_net.push(LoadBalancerPrivateNet {
                network,
                ip: "10.0.0.2".into(),
            });
        }
        lb
    }

    fn texts(steps: &[Step]) -> Vec<String> {
        steps.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_official_status_codes_annotation_drives_http_health_checks() {
        let p = desired_of(
            &tcp80(),
            &[
                (keys::HEALTH_CHECK_PROTOCOL, "http"),
                (keys::HTTP_STATUS_CODES, "200,204"),
            ],
            &[],
        );
        let hc = p.services[0].spec().health_check.unwrap();
        assert_eq!(hc.http.unwrap().status_codes, vec!["200", "204"]);
    }

    #[test]
    fn unset_settings_are_left_as_the_load_balancer_has_them() {
        let svc = tcp80();
        let p = desired_of(&svc, &[], &[]);
        let mut lb = created(&p);
        // Someone tuned the load balancer by hand: nothing asks otherwise, so nothing changes.
        lb.name = "renamed-by-hand".into();
        lb.algorithm = Algorithm::new(AlgorithmType::LeastConnections);
        lb.load_balancer_type.name = "lb21".into();
        lb.public_net.enabled = false;
        let s = &mut lb.services[0];
        s.proxyprotocol = true;
        let hc = s.health_check.as_mut().unwrap();
        (hc.interval, hc.timeout, hc.retries) = (5, 3, 1);
        assert_eq!(p.diff(&lb), Vec::new());
        // The request on creation leaves algorithm and public interface to the API.
        let request = p.create_request(&Placement::Location("fsn1".into()), 25);
        assert_eq!(request.algorithm, None);
        assert_eq!(request.public_interface, None);
    }

    #[test]
    fn set_settings_are_enforced_annotation_over_env() {
        let svc = tcp80();
        let settings = LoadBalancerSettings {
            algorithm: Some(AlgorithmType::RoundRobin),
            uses_proxyprotocol: Some(false),
            health_check_retries: Some(2),
            lb_type: Some("lb21".into()),
            ..LoadBalancerSettings::default()
        };
        let base = desired_of(&svc, &[], &[]);
        let lb = created(&base);
        let p = desired_with(
            &svc,
            &[
                (keys::ALGORITHM_TYPE, "LEAST_CONNECTIONS"),
                (keys::NAME, "web-lb"),
            ],
            &settings,
            None,
            &[],
        );
        assert_eq!(
            texts(&p.diff(&lb)),
            vec![
                "rename to \"web-lb\"",
                "change type lb11 -> lb21",
                "change algorithm round_robin -> least_connections",
                "update service 80: health check retries 3 -> 2",
            ]
        );
    }

    #[test]
    fn health_check_follows_the_service_protocol_only_when_configured() {
        let svc = service(&[(443, "TCP", Some(30443))]);
        let https = [(keys::PROTOCOL, "https"), (keys::HTTP_CERTIFICATES, "7")];
        // Nothing about health checks: TCP on the NodePort.
        let p = desired_of(&svc, &https, &[]);
        assert_eq!(
            p.services[0].health_check.protocol,
            HealthCheckProtocol::Tcp
        );
        // An annotation makes it follow the protocol ...
        let mut pairs = https.to_vec();
        pairs.push((keys::HEALTH_CHECK_INTERVAL, "5s"));
        let p = desired_of(&svc, &pairs, &[]);
        assert_eq!(
            p.services[0].health_check.protocol,
            HealthCheckProtocol::Https
        );
        // ... and so does a variable.
        let settings = LoadBalancerSettings {
            health_check_timeout: Some(Duration::from_secs(4)),
            ..LoadBalancerSettings::default()
        };
        let p = desired_with(&svc, &https, &settings, None, &[]);
        let hc = &p.services[0].health_check;
        assert_eq!(hc.protocol, HealthCheckProtocol::Https);
        assert_eq!(hc.timeout, Some(4));
        assert_eq!(hc.interval, None);
    }

    #[test]
    fn bad_values_fail_only_where_they_are_used() {
        let svc = tcp80();
        // Unused: HTTP health-check fields of a TCP check, http-* of a TCP service,
        // private-ipv4 without a network.
        let unused = [
            (keys::HEALTH_CHECK_HTTP_VALIDATE_CERTIFICATE, "maybe"),
            (keys::HTTP_STICKY_SESSIONS, "perhaps"),
            (keys::HTTP_TIMEOUT_IDLE, "forever"),
            (keys::PRIVATE_IPV4, "not-an-ip"),
        ];
        type Case<'a> = (Vec<(&'a str, &'a str)>, Option<&'a str>);
        let cases: Vec<Case<'_>> = vec![
            (unused.to_vec(), None),
            (
                [unused.as_slice(), &[(keys::HEALTH_CHECK_PROTOCOL, "http")]].concat(),
                Some("health-check-http-validate-certificate: \"maybe\" is not a boolean"),
            ),
            (
                [unused.as_slice(), &[(keys::PROTOCOL, "http")]].concat(),
                Some("http-sticky-sessions: \"perhaps\" is not a boolean"),
            ),
            (
                vec![(keys::ALGORITHM_TYPE, "fastest")],
                Some("algorithm-type: \"fastest\" is not one of round_robin, least_connections"),
            ),
        ];
        for (pairs, error) in cases {
            let result = Desired::new(
                &svc,
                &ann(&pairs),
                &LoadBalancerSettings::default(),
                None,
                &[],
            );
            match error {
                None => assert!(result.is_ok(), "{pairs:?}: {result:?}"),
                Some(text) => {
                    let err = result.unwrap_err();
                    assert!(err.contains(text), "{pairs:?}: {err}");
                }
            }
        }
        // With a network, private-ipv4 is used.
        let err = Desired::new(
            &svc,
            &ann(&[(keys::PRIVATE_IPV4, "not-an-ip")]),
            &LoadBalancerSettings::default(),
            Some(7),
            &[],
        )
        .unwrap_err();
        assert!(err.contains("private-ipv4: \"not-an-ip\""), "{err}");
    }

    #[test]
    fn location_beats_network_zone() {
        let svc = tcp80();
        let env_location = LoadBalancerSettings {
            location: Some("fsn1".into()),
            ..LoadBalancerSettings::default()
        };
        let env_zone = LoadBalancerSettings {
            network_zone: Some("eu-central".into()),
            ..LoadBalancerSettings::default()
        };
        let loc = |l: &str| Some(Placement::Location(l.into()));
        let zone = |z: &str| Some(Placement::NetworkZone(z.into()));
        let cases = [
            (vec![], &env_location, loc("fsn1")),
            (
                vec![(keys::NETWORK_ZONE, "us-east")],
                &env_location,
                loc("fsn1"),
            ),
            (
                vec![(keys::LOCATION, ""), (keys::NETWORK_ZONE, "us-east")],
                &env_location,
                zone("us-east"),
            ),
            (
                vec![(keys::LOCATION, "nbg1"), (keys::NETWORK_ZONE, "us-east")],
                &env_zone,
                loc("nbg1"),
            ),
            (vec![], &env_zone, zone("eu-central")),
            (vec![(keys::LOCATION, "")], &env_location, None),
        ];
        for (pairs, settings, want) in cases {
            let p = desired_with(&svc, &pairs, settings, None, &[]);
            assert_eq!(p.placement, want, "{pairs:?}");
        }
    }

    #[test]
    fn networks_detach_others_and_reattach_for_a_new_private_ip() {
        let svc = tcp80();
        let mut lb = created(&desired_of(&svc, &[], &[]));
        lb.private_net = vec![
            LoadBalancerPrivateNet {
                network: 7,
                ip: "10.0.0.5".into(),
            },
            LoadBalancerPrivateNet {
                network: 9,
                ip: "10.9.0.5".into(),
            },
        ];
        let s = LoadBalancerSettings::default();
        let ours = desired_with(&svc, &[], &s, Some(7), &[]);
        assert_eq!(texts(&ours.diff(&lb)), vec!["detach from network 9"]);
        let moved = desired_with(&svc, &[(keys::PRIVATE_IPV4, "10.0.0.50")], &s, Some(7), &[]);
        assert_eq!(
            texts(&moved.diff(&lb)),
            vec![
                "detach from network 7",
                "detach from network 9",
                "attach to network 7 with IP 10.0.0.50"
            ]
        );
        let none = desired_with(&svc, &[], &s, None, &[]);
        assert_eq!(
            texts(&none.diff(&lb)),
            vec!["detach from network 7", "detach from network 9"]
        );
    }

    #[test]
    fn targets_ip_targets_go_label_selectors_stay_and_the_limit_counts_all() {
        let svc = tcp80();
        let nodes: Vec<_> = (1..=4)
            .map(|i| node(&format!("n{i}"), &format!("hcloud://{i}"), &[]))
            .collect();
        let p = desired_of(&svc, &[], &nodes);
        let mut lb = created(&desired_of(&svc, &[], &nodes[..1]));
        lb.load_balancer_type.max_targets = 3;
        lb.targets.push(LoadBalancerTarget {
            kind: TargetType::Ip,
            ip: Some(TargetIp {
                ip: "203.0.113.9".into(),
            }),
            ..LoadBalancerTarget::default()
        });
        lb.targets.push(LoadBalancerTarget {
            kind: TargetType::LabelSelector,
            ..LoadBalancerTarget::default()
        });
        assert_eq!(
            texts(&p.diff(&lb)),
            vec!["remove target ip 203.0.113.9", "add target server 2"]
        );
        let left_out = p.left_out(&lb);
        // 3 = server 1 + the label selector + server 2: n3 and n4 are left out.
        assert_eq!(left_out.len(), 2, "{left_out:?}");
        assert_eq!(left_out[0].reason, Some(reasons::MAX_TARGETS_REACHED));
        assert_eq!(left_out[0].subject, Subject::Node("n3".into()));
        assert_eq!(
            left_out[0].message,
            "Node could not be added to Load Balancer for service web because the max number of targets has been reached"
        );
    }

    #[test]
    fn notices_use_the_official_reasons() {
        let svc = service(&[(80, "TCP", Some(30080)), (53, "UDP", Some(30053))]);
        let nodes = [
            node("a", "hcloud://1", &[]),
            node("b", "aws:///i-1", &[]),
            node("c", "hrobot://5", &[]),
        ];
        let p = desired_of(&svc, &[], &nodes);
        let reasons: Vec<_> = p.notices.iter().filter_map(|n| n.reason).collect();
        assert_eq!(
            reasons,
            vec![
                reasons::LOAD_BALANCER_TYPE_UNCONFIGURED,
                reasons::UNSUPPORTED_PROTOCOL_CONFIGURED,
                reasons::UNKNOWN_PROVIDER_ID_PREFIX
            ]
        );
        assert_eq!(
            p.notices[1].message,
            "configured unsupported Hetzner Cloud load balancer protocol UDP for service with name web"
        );
        let typed = desired_of(&svc, &[(keys::TYPE, "lb21")], &nodes);
        assert!(
            !typed
                .notices
                .iter()
                .any(|n| n.reason == Some(reasons::LOAD_BALANCER_TYPE_UNCONFIGURED))
        );
    }

    /// The Warnings of `desired` with `reason`, by message.
    fn warnings_of(desired: &Desired, reason: &str) -> Vec<String> {
        desired
            .notices
            .iter()
            .filter(|n| n.reason == Some(reason))
            .map(|n| n.message.clone())
            .collect()
    }

    #[test]
    fn honest_warnings_table() {
        let with_ranges = |ranges: &[&str]| {
            let mut svc = tcp80();
            if let Some(spec) = svc.spec.as_mut() {
                spec.load_balancer_source_ranges =
                    Some(ranges.iter().map(|r| (*r).to_owned()).collect());
            }
            svc
        };
        let mixed = service(&[
            (80, "TCP", Some(30080)),
            (53, "UDP", Some(30053)),
            (3868, "SCTP", Some(31868)),
        ]);
        let legacy_ranges = {
            let mut svc = tcp80();
            svc.metadata.annotations = Some(
                [(
                    "service.beta.kubernetes.io/load-balancer-source-ranges".to_owned(),
                    "10.0.0.0/8".to_owned(),
                )]
                .into(),
            );
            svc
        };
        struct Row<'a> {
            name: &'a str,
            svc: Service,
            pairs: &'a [(&'a str, &'a str)],
            reason: &'static str,
            /// What each Warning of `reason` says (a part of it), in order.
            says: &'a [&'a str],
        }
        let cases = [
            Row {
                name: "source ranges in the spec",
                svc: with_ranges(&["203.0.113.0/24"]),
                pairs: &[],
                reason: reasons::SOURCE_RANGES_IGNORED,
                says: &[
                    "spec.loadBalancerSourceRanges is ignored: Hetzner Cloud load balancers have no access control list",
                ],
            },
            Row {
                name: "source ranges in the legacy annotation",
                svc: legacy_ranges,
                pairs: &[],
                reason: reasons::SOURCE_RANGES_IGNORED,
                says: &[
                    "the annotation service.beta.kubernetes.io/load-balancer-source-ranges is ignored",
                ],
            },
            Row {
                name: "the Warning says where to filter instead",
                svc: with_ranges(&["203.0.113.0/24"]),
                pairs: &[],
                reason: reasons::SOURCE_RANGES_IGNORED,
                says: &["Hetzner Cloud Firewall applied to the servers"],
            },
            Row {
                name: "empty source ranges: nothing to say",
                svc: with_ranges(&[]),
                pairs: &[],
                reason: reasons::SOURCE_RANGES_IGNORED,
                says: &[],
            },
            Row {
                name: "a typo names the closest key",
                svc: tcp80(),
                pairs: &[("load-balancer.hetzner.cloud/locaton", "fsn1")],
                reason: reasons::UNKNOWN_ANNOTATION,
                says: &[
                    "annotation load-balancer.hetzner.cloud/locaton is not one this CCM reads and is ignored; the closest known key is load-balancer.hetzner.cloud/location",
                ],
            },
            Row {
                name: "one Warning per unknown key",
                svc: tcp80(),
                pairs: &[
                    ("load-balancer.hetzner.cloud/health-check-intervall", "5s"),
                    ("load-balancer.hetzner.cloud/algorithm", "least_connections"),
                ],
                reason: reasons::UNKNOWN_ANNOTATION,
                says: &[
                    "algorithm is not one this CCM reads and is ignored; the closest known key is load-balancer.hetzner.cloud/algorithm-type",
                    "health-check-intervall is not one this CCM reads and is ignored; the closest known key is load-balancer.hetzner.cloud/health-check-interval",
                ],
            },
            Row {
                name: "known, legacy, per-port and foreign keys are not unknown",
                svc: tcp80(),
                pairs: &[
                    (keys::NAME, "web"),
                    ("load-balancer.hetzner.cloud/ipv4", "198.51.100.1"),
                    ("load-balancer.hetzner.cloud/id", "7"),
                    ("load-balancer.hetzner.cloud/port-80.protocol", "tcp"),
                    ("example.com/locaton", "x"),
                ],
                reason: reasons::UNKNOWN_ANNOTATION,
                says: &[],
            },
            Row {
                name: "a mixed Service: the official Warning for each non-TCP port",
                svc: mixed,
                pairs: &[],
                reason: reasons::UNSUPPORTED_PROTOCOL_CONFIGURED,
                says: &[
                    "configured unsupported Hetzner Cloud load balancer protocol UDP for service with name web",
                    "configured unsupported Hetzner Cloud load balancer protocol SCTP for service with name web",
                ],
            },
        ];
        for Row {
            name,
            svc,
            pairs,
            reason,
            says,
        } in cases
        {
            let got = warnings_of(&desired_of(&svc, pairs, &[]), reason);
            assert_eq!(got.len(), says.len(), "{name}: {got:?}");
            for (message, part) in got.iter().zip(says) {
                assert!(message.contains(part), "{name}: {message:?} lacks {part:?}");
            }
        }
    }

    #[test]
    fn a_load_balancer_is_not_moved_table() {
        let svc = tcp80();
        let at = |location: &str, zone: &str| {
            let mut lb = created(&desired_of(&svc, &[], &[]));
            lb.location.id = 1;
            lb.location.name = location.to_owned();
            lb.location.network_zone = zone.into();
            lb
        };
        let env_location = LoadBalancerSettings {
            location: Some("nbg1".into()),
            ..LoadBalancerSettings::default()
        };
        // (case, annotations, settings, the load balancer, what the Warning says; None: none)
        type Row<'a> = (
            &'a str,
            Vec<(&'a str, &'a str)>,
            &'a LoadBalancerSettings,
            LoadBalancer,
            Option<&'a str>,
        );
        let cases: [Row<'_>; 8] = [
            (
                "the location annotation differs",
                vec![(keys::LOCATION, "nbg1")],
                &LoadBalancerSettings::default(),
                at("fsn1", "eu-central"),
                Some(
                    "load-balancer.hetzner.cloud/location: load balancer \"a0f2f6c0e1b2a4c3d9e8f0123456789a\" stays in fsn1, not nbg1: Hetzner Cloud cannot move a load balancer",
                ),
            ),
            (
                "the network zone annotation differs",
                vec![(keys::NETWORK_ZONE, "us-east")],
                &LoadBalancerSettings::default(),
                at("fsn1", "eu-central"),
                Some(
                    "load-balancer.hetzner.cloud/network-zone: load balancer \"a0f2f6c0e1b2a4c3d9e8f0123456789a\" stays in eu-central, not us-east",
                ),
            ),
            (
                "the same location",
                vec![(keys::LOCATION, "fsn1")],
                &LoadBalancerSettings::default(),
                at("fsn1", "eu-central"),
                None,
            ),
            (
                "the location by ID",
                vec![(keys::LOCATION, "1")],
                &LoadBalancerSettings::default(),
                at("fsn1", "eu-central"),
                None,
            ),
            (
                "a network zone the location is in",
                vec![(keys::NETWORK_ZONE, "eu-central")],
                &LoadBalancerSettings::default(),
                at("nbg1", "eu-central"),
                None,
            ),
            (
                "only the settings say where: they are for new load balancers",
                vec![],
                &env_location,
                at("fsn1", "eu-central"),
                None,
            ),
            (
                "the location annotation beats the network zone annotation",
                vec![(keys::LOCATION, "fsn1"), (keys::NETWORK_ZONE, "us-east")],
                &LoadBalancerSettings::default(),
                at("fsn1", "eu-central"),
                None,
            ),
            (
                "the API did not say where it is",
                vec![(keys::LOCATION, "nbg1")],
                &LoadBalancerSettings::default(),
                at("", ""),
                None,
            ),
        ];
        for (name, pairs, settings, lb, want) in cases {
            let desired = desired_with(&svc, &pairs, settings, None, &[]);
            let got = desired.not_moved(&lb);
            match (got, want) {
                (None, None) => {}
                (Some(notice), Some(part)) => {
                    assert_eq!(
                        notice.reason,
                        Some(reasons::LOAD_BALANCER_NOT_MOVED),
                        "{name}"
                    );
                    assert!(notice.message.contains(part), "{name}: {}", notice.message);
                    assert!(
                        notice.message.contains("delete and re-create the Service"),
                        "{name}: {}",
                        notice.message
                    );
                }
                (got, want) => panic!("{name}: {got:?}, want {want:?}"),
            }
            // Nothing else changes because of it: no step moves a load balancer.
            assert!(
                desired.diff(&lb).is_empty(),
                "{name}: {:?}",
                desired.diff(&lb)
            );
        }
    }

    #[test]
    fn a_service_without_a_tcp_port_gets_one_warning_naming_every_port() {
        // (ports, the ports the Warning names; None: no Warning, the Service is served)
        type Ports<'a> = &'a [(i32, &'a str, Option<i32>)];
        let cases: [(Ports<'_>, Option<&str>); 6] = [
            (&[(53, "UDP", Some(30053))], Some("port 53 is UDP")),
            (
                &[(53, "UDP", Some(30053)), (3868, "SCTP", Some(31868))],
                Some("port 53 is UDP, port 3868 is SCTP"),
            ),
            // Without NodePorts (allocateLoadBalancerNodePorts: false) all the same.
            (&[(5353, "SCTP", None)], Some("port 5353 is SCTP")),
            // Mixed: served on the TCP port, with the official Warning for the UDP one.
            (&[(80, "TCP", Some(30080)), (53, "UDP", Some(30053))], None),
            (&[(80, "TCP", Some(30080))], None),
            // No ports at all: as before (the apiserver does not accept such a Service).
            (&[], None),
        ];
        for (ports, named) in cases {
            let notice = no_tcp_port(&service(ports));
            match named {
                None => assert_eq!(notice, None, "{ports:?}"),
                Some(named) => {
                    let notice = notice.unwrap_or_else(|| panic!("{ports:?}: no Warning"));
                    assert_eq!(
                        notice.reason,
                        Some(reasons::UNSUPPORTED_PROTOCOL_CONFIGURED)
                    );
                    assert_eq!(notice.subject, Subject::Service);
                    assert_eq!(
                        notice.message,
                        format!(
                            "no load balancer is made for service with name web: Hetzner Cloud load balancers carry TCP only (HTTP and HTTPS run over TCP) and none of its ports is TCP: {named}. Any load balancer it has is deleted; add a TCP port to get one"
                        )
                    );
                }
            }
        }

        // Named ports are named with their number; an unset protocol is TCP.
        let mut named = service(&[(53, "UDP", Some(30053)), (53, "TCP", Some(30054))]);
        let ports = named.spec.as_mut().unwrap().ports.as_mut().unwrap();
        ports[0].name = Some("dns".into());
        ports[1].protocol = None;
        assert_eq!(no_tcp_port(&named), None, "the unset protocol is TCP");
        named.spec.as_mut().unwrap().ports.as_mut().unwrap()[1].protocol = Some("SCTP".into());
        let message = no_tcp_port(&named).unwrap().message;
        assert!(
            message.contains(": port dns (53) is UDP, port 53 is SCTP. "),
            "{message}"
        );

        // The mixed Service keeps today's desired state: its TCP port, the official Warning.
        let mixed = service(&[(80, "TCP", Some(30080)), (53, "UDP", Some(30053))]);
        let p = desired_of(&mixed, &[(keys::TYPE, "lb11")], &[]);
        let listen: Vec<_> = p.services.iter().map(|s| s.listen_port).collect();
        assert_eq!(listen, [80]);
        let warned: Vec<_> = p
            .notices
            .iter()
            .filter(|n| n.reason == Some(reasons::UNSUPPORTED_PROTOCOL_CONFIGURED))
            .map(|n| n.message.as_str())
            .collect();
        assert_eq!(
            warned,
            [
                "configured unsupported Hetzner Cloud load balancer protocol UDP for service with name web"
            ]
        );
    }

    #[test]
    fn a_hetzner_providerid_without_a_valid_id_warns_on_its_node_and_spares_the_others() {
        let svc = service(&[(80, "TCP", Some(30080))]);
        let nodes = [
            node("good", "hcloud://1", &[]),
            node("bad", "hcloud://abc", &[]),
            node("empty-robot", "hrobot://", &[]),
        ];
        let p = desired_of(&svc, &[(keys::TYPE, "lb11")], &nodes);
        assert_eq!(p.targets.len(), 1, "{:?}", p.targets);
        assert_eq!(p.targets[0].node, "good");
        let warned: Vec<_> = p
            .notices
            .iter()
            .filter(|n| n.reason == Some(reasons::INVALID_PROVIDER_ID))
            .map(|n| (n.subject.clone(), n.message.as_str()))
            .collect();
        assert_eq!(warned.len(), 2, "{:?}", p.notices);
        assert_eq!(warned[0].0, Subject::Node("bad".into()));
        assert!(
            warned[0].1.starts_with(
                "Node could not be added to Load Balancer for service web: spec.providerID \"hcloud://abc\" is not a Hetzner providerID"
            ),
            "{}",
            warned[0].1
        );
        assert_eq!(warned[1].0, Subject::Node("empty-robot".into()));
    }

    #[test]
    fn managed_certificates_are_planned_with_the_official_default_name() {
        let svc = service(&[(443, "TCP", Some(30443))]);
        let p = desired_of(
            &svc,
            &[
                (keys::PROTOCOL, "https"),
                (keys::CERTIFICATE_TYPE, "Managed"),
                (
                    keys::HTTP_MANAGED_CERTIFICATE_DOMAINS,
                    "a.example.com, b.example.com",
                ),
            ],
            &[],
        );
        assert_eq!(
            p.certificates,
            Certificates::Managed(ManagedCertificate {
                name: "ccm-managed-certificate-0f2f6c0e-1b2a-4c3d-9e8f-0123456789ab".into(),
                domains: vec!["a.example.com".into(), "b.example.com".into()],
                acme_staging: false,
            })
        );
        let err = Desired::new(
            &svc,
            &ann(&[
                (keys::PROTOCOL, "https"),
                (keys::CERTIFICATE_TYPE, "managed"),
            ]),
            &LoadBalancerSettings::default(),
            None,
            &[],
        )
        .unwrap_err();
        assert!(err.contains("http-managed-certificate-domains"), "{err}");
    }

    #[test]
    fn type_deprecation_messages() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-06-01T00:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let mut t = LoadBalancerType {
            name: "lb11".into(),
            ..LoadBalancerType::default()
        };
        assert_eq!(deprecation(&t, now), Ok(None));
        t.deprecation = Some(Deprecation {
            announced: Some("2026-01-01T00:00:00Z".into()),
            unavailable_after: Some("2026-09-01T00:00:00Z".into()),
        });
        assert_eq!(
            deprecation(&t, now).unwrap().unwrap().message,
            "Load Balancer Type \"lb11\" is deprecated and will no longer be available for order as of 2026-09-01"
        );
        t.deprecation = Some(Deprecation {
            announced: None,
            unavailable_after: Some("2026-05-01T00:00:00Z".into()),
        });
        assert_eq!(
            deprecation(&t, now),
            Err("Load Balancer Type \"lb11\" is unavailable and can no longer be ordered".into())
        );
    }

    #[test]
    fn a_freshly_created_lb_needs_nothing() {
        let svc = service(&[(80, "TCP", Some(30080)), (443, "TCP", Some(30443))]);
        let nodes = [node("a", "hcloud://1", &[]), node("b", "hcloud://2", &[])];
        let p = desired_of(
            &svc,
            &[
                (keys::PROTOCOL, "http"),
                (keys::HEALTH_CHECK_HTTP_PATH, "/healthz"),
            ],
            &nodes,
        );
        assert_eq!(p.diff(&created(&p)), Vec::new());
    }

    #[test]
    fn status_variants() {
        let p = desired_of(&tcp80(), &[], &[]);
        let mut lb = created(&p);
        lb.private_net.push(LoadBalancerPrivateNet {
            network: 7,
            ip: "10.0.0.5".into(),
        });
        let ips = |opts: &StatusOptions, lb: &LoadBalancer| -> Vec<String> {
            status(lb, opts)
                .unwrap()
                .ingress
                .unwrap()
                .into_iter()
                .map(|i| {
                    format!(
                        "{}{}/{}",
                        i.ip.unwrap_or_default(),
                        i.hostname.unwrap_or_default(),
                        i.ip_mode.unwrap_or_default()
                    )
                })
                .collect()
        };
        let default = StatusOptions::default();
        assert_eq!(
            ips(&default, &lb),
            vec!["198.51.100.1/VIP", "2001:db8::1/VIP", "10.0.0.5/VIP"]
        );
        let limited = StatusOptions {
            disable_ipv6: true,
            disable_private_ingress: true,
            proxy_protocol: true,
            ..StatusOptions::default()
        };
        assert_eq!(ips(&limited, &lb), vec!["198.51.100.1/Proxy"]);
        let host = StatusOptions {
            hostname: Some("lb.example.com".into()),
            ..StatusOptions::default()
        };
        assert_eq!(ips(&host, &lb), vec!["lb.example.com/"]);
        lb.public_net.ipv4.ip = None;
        assert!(status(&lb, &default).is_err());
    }

    #[test]
    fn a_tcp_port_without_a_node_port_is_left_out_with_a_warning_naming_the_fields() {
        // allocateLoadBalancerNodePorts: false; only port 80 has an explicit nodePort. The
        // index counts every port of spec.ports (the UDP one too).
        let mut svc = service(&[
            (53, "UDP", None),
            (80, "TCP", Some(30080)),
            (443, "TCP", None),
        ]);
        let spec = svc.spec.as_mut().unwrap();
        spec.allocate_load_balancer_node_ports = Some(false);
        spec.ports.as_mut().unwrap()[2].name = Some("https".into());
        let p = desired_of(&svc, &[(keys::TYPE, "lb11")], &[]);
        let listen: Vec<_> = p.services.iter().map(|s| s.listen_port).collect();
        assert_eq!(listen, [80], "only the port with a NodePort gets a service");
        let warned: Vec<_> = p
            .notices
            .iter()
            .filter(|n| n.reason == Some(reasons::NODE_PORT_NOT_ALLOCATED))
            .collect();
        assert_eq!(warned.len(), 1, "{:?}", p.notices);
        assert_eq!(warned[0].subject, Subject::Service);
        assert_eq!(
            warned[0].message,
            "spec.ports[2].nodePort: port https (443) has no NodePort, so the load balancer has no service for it (Hetzner load balancers forward to NodePorts); set spec.allocateLoadBalancerNodePorts to true (or leave it unset), or give the port an explicit nodePort"
        );
        // A plan prints it as a Warning, not as a note.
        assert!(
            warned[0].to_string().starts_with("NodePortNotAllocated: "),
            "{}",
            warned[0]
        );

        // No TCP port with a NodePort at all: the sync fails naming both fields.
        let none = service(&[(80, "TCP", None), (443, "TCP", Some(0))]);
        let err = Desired::new(
            &none,
            &ann(&[]),
            &LoadBalancerSettings::default(),
            None,
            &[],
        )
        .unwrap_err();
        assert!(err.starts_with("spec.ports[].nodePort: "), "{err}");
        assert!(
            err.contains("set spec.allocateLoadBalancerNodePorts to true")
                && err.contains("explicit nodePorts"),
            "{err}"
        );
    }

    #[test]
    fn the_public_addresses_follow_the_first_ip_family() {
        let lb_of = |p: &Desired| {
            let mut lb = created(p);
            lb.private_net.push(LoadBalancerPrivateNet {
                network: 7,
                ip: "10.0.0.5".into(),
            });
            lb
        };
        let ips = |p: &Desired| -> Vec<String> {
            status(&lb_of(p), &p.status)
                .unwrap()
                .ingress
                .unwrap()
                .into_iter()
                .filter_map(|i| i.ip)
                .collect()
        };
        let with_families = |families: Option<&[&str]>| {
            let mut svc = tcp80();
            svc.spec.as_mut().unwrap().ip_families =
                families.map(|f| f.iter().map(|f| (*f).to_owned()).collect());
            svc
        };
        let v4_first = ["198.51.100.1", "2001:db8::1", "10.0.0.5"];
        let v6_first = ["2001:db8::1", "198.51.100.1", "10.0.0.5"];
        let cases: [(Option<&[&str]>, [&str; 3]); 5] = [
            // Official: no ipFamilies (an apiserver without them), or IPv4 first.
            (None, v4_first),
            (Some(&["IPv4"]), v4_first),
            (Some(&["IPv4", "IPv6"]), v4_first),
            // Beyond the official CCM: the first family decides; private IPs stay last.
            (Some(&["IPv6", "IPv4"]), v6_first),
            (Some(&["IPv6"]), v6_first),
        ];
        for (families, want) in cases {
            let p = desired_of(&with_families(families), &[], &[]);
            assert_eq!(p.status.ipv6_first, want == v6_first, "{families:?}");
            assert_eq!(ips(&p), want, "{families:?}");
        }
        // Without the IPv6 only the IPv4 is public, whatever the family.
        let v6 = with_families(Some(&["IPv6", "IPv4"]));
        let p = desired_of(&v6, &[(keys::IPV6_DISABLED, "true")], &[]);
        assert_eq!(ips(&p), ["198.51.100.1", "10.0.0.5"]);
        // Without its IPv4 yet the load balancer has no status, IPv6 first or not.
        let p = desired_of(&v6, &[], &[]);
        let mut lb = lb_of(&p);
        lb.public_net.ipv4.ip = None;
        assert!(status(&lb, &p.status).is_err());
        // The options without a Service (get_load_balancer's) keep the official order.
        assert!(!StatusOptions::new(&ann(&[]), &LoadBalancerSettings::default()).ipv6_first);
    }

    #[test]
    fn the_cluster_label_is_added_only_with_a_cluster_name() {
        let svc = tcp80();
        let unnamed = desired_of(&svc, &[], &[]);
        let named_settings = LoadBalancerSettings {
            cluster_name: Some("prod".into()),
            ..LoadBalancerSettings::default()
        };
        let named = desired_with(&svc, &[], &named_settings, None, &[]);
        let with = crate::test_support::labels;
        let uid = named.uid.clone();
        let create = named.create_request(&Placement::Location("fsn1".into()), usize::MAX);
        assert_eq!(
            create.labels,
            Some(with(&[
                (SERVICE_UID_LABEL, &uid),
                (CLUSTER_NAME_LABEL, "prod")
            ]))
        );
        let plain = unnamed.create_request(&Placement::Location("fsn1".into()), usize::MAX);
        assert_eq!(plain.labels, Some(with(&[(SERVICE_UID_LABEL, &uid)])));
        // (desired, labels the load balancer has, the labels an update sets; None: no step)
        let cases = [
            // No cluster name: a load balancer with the UID label is left alone, whatever else.
            (&unnamed, with(&[(SERVICE_UID_LABEL, &uid)]), None),
            (
                &unnamed,
                with(&[(SERVICE_UID_LABEL, &uid), (CLUSTER_NAME_LABEL, "other")]),
                None,
            ),
            // Named and labelled: nothing to do.
            (
                &named,
                with(&[(SERVICE_UID_LABEL, &uid), (CLUSTER_NAME_LABEL, "prod")]),
                None,
            ),
            // Made before the name was set: the cluster label is added, user labels kept.
            (
                &named,
                with(&[(SERVICE_UID_LABEL, &uid), ("team", "web")]),
                Some(with(&[
                    (SERVICE_UID_LABEL, &uid),
                    ("team", "web"),
                    (CLUSTER_NAME_LABEL, "prod"),
                ])),
            ),
            // Adopted by name: both labels at once.
            (
                &named,
                with(&[]),
                Some(with(&[
                    (SERVICE_UID_LABEL, &uid),
                    (CLUSTER_NAME_LABEL, "prod"),
                ])),
            ),
        ];
        for (desired, labels, want) in cases {
            let mut lb = created(desired);
            lb.labels = labels.clone();
            let updates: Vec<Option<Labels>> = desired
                .diff(&lb)
                .into_iter()
                .filter_map(|step| match step {
                    Step::Update { labels, .. } => Some(labels),
                    _ => None,
                })
                .collect();
            match &want {
                None => assert!(updates.is_empty(), "{labels:?}: {updates:?}"),
                Some(want) => assert_eq!(updates, [Some(want.clone())], "{labels:?}"),
            }
        }
    }
}
