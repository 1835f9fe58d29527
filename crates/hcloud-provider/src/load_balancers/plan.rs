//! The desired state of a Service's load balancer and the steps that take the current load
//! balancer there (pure: no API calls).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use hcloud_api::models::{
    Algorithm, AlgorithmType, AttachToNetworkRequest, ChangeDnsPtrRequest,
    CreateLoadBalancerRequest, HealthCheck, HealthCheckHttp, HealthCheckProtocol, Labels,
    LoadBalancer, LoadBalancerService, ServiceHttp, ServiceProtocol, ServiceSpec, ServiceUpdate,
    TargetSpec, TargetType,
};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};

use super::annotations::{Annotations, CertificateType, keys};
use super::naming::{SERVICE_UID_LABEL, load_balancer_name};
use super::settings::{DEFAULT_LB_TYPE, LoadBalancerSettings};
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
pub struct NetworkPlan {
    /// The provider's network (`HCLOUD_NETWORK`).
    pub id: i64,
    /// `private-ipv4`.
    pub ip: Option<String>,
    /// `private-subnet-ip-range` (annotation > env).
    pub ip_range: Option<String>,
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
}

impl StatusOptions {
    /// From the annotations over the settings.
    pub fn new(a: &Annotations, settings: &LoadBalancerSettings) -> Self {
        Self {
            hostname: a.hostname.clone(),
            disable_ipv6: a.ipv6_disabled.unwrap_or(settings.disable_ipv6),
            disable_private_ingress: a
                .disable_private_ingress
                .unwrap_or(settings.disable_private_ingress),
            proxy_protocol: a.uses_proxyprotocol.unwrap_or(settings.uses_proxyprotocol),
        }
    }
}

/// Everything the Service asks for.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Load balancer name.
    pub name: String,
    /// Service UID (the label value).
    pub uid: String,
    /// Placement for creation; `None` when neither annotation nor settings give one.
    pub placement: Option<Placement>,
    /// The `type` annotation: the only thing that changes the type of an existing LB.
    pub type_annotation: Option<String>,
    /// Type used on creation (annotation > settings > lb11).
    pub create_type: String,
    /// Balancing algorithm.
    pub algorithm: AlgorithmType,
    /// One service per TCP port, sorted by listen port.
    pub services: Vec<ServiceSpec>,
    /// Uploaded certificate IDs or names (https only); resolved before diffing.
    pub certificate_refs: Vec<String>,
    /// Server IDs of the target nodes, sorted.
    pub targets: Vec<i64>,
    /// Targets are reached over the private network.
    pub use_private_ip: bool,
    /// The network to attach to.
    pub network: Option<NetworkPlan>,
    /// Whether the public interface is on.
    pub public_interface: bool,
    /// Reverse DNS of the public IPv4.
    pub ipv4_rdns: Option<String>,
    /// Reverse DNS of the public IPv6.
    pub ipv6_rdns: Option<String>,
    /// Status reporting.
    pub status: StatusOptions,
    /// Human readable notes about ports and nodes that were left out.
    pub skipped: Vec<String>,
}

fn seconds(d: std::time::Duration) -> u32 {
    u32::try_from(d.as_secs()).unwrap_or(u32::MAX)
}

impl Plan {
    /// The desired state for `service` with `nodes` as candidate targets.
    ///
    /// Errors are user errors (e.g. an unsupported certificate type), as text.
    pub fn new(
        service: &Service,
        a: &Annotations,
        settings: &LoadBalancerSettings,
        network_id: Option<i64>,
        nodes: &[Arc<Node>],
    ) -> Result<Self, String> {
        let uid = service.metadata.uid.clone().unwrap_or_default();
        let placement = match (
            &a.location,
            &a.network_zone,
            &settings.location,
            &settings.network_zone,
        ) {
            (Some(l), _, _, _) => Some(Placement::Location(l.clone())),
            (None, Some(z), _, _) => Some(Placement::NetworkZone(z.clone())),
            (None, None, Some(l), _) => Some(Placement::Location(l.clone())),
            (None, None, None, Some(z)) => Some(Placement::NetworkZone(z.clone())),
            (None, None, None, None) => None,
        };
        let protocol = a.protocol.clone().unwrap_or(ServiceProtocol::Tcp);
        let proxyprotocol = a.uses_proxyprotocol.unwrap_or(settings.uses_proxyprotocol);
        let mut certificate_refs = Vec::new();
        if protocol == ServiceProtocol::Https {
            if a.certificate_type == Some(CertificateType::Managed) {
                return Err(format!(
                    "{}: managed certificates are not supported yet; upload the certificate and name it in {}",
                    keys::CERTIFICATE_TYPE,
                    keys::HTTP_CERTIFICATES
                ));
            }
            certificate_refs = a.http_certificates.clone();
        }
        let hc_protocol = a
            .health_check_protocol
            .clone()
            .unwrap_or(HealthCheckProtocol::Tcp);
        let hc_http = (hc_protocol != HealthCheckProtocol::Tcp).then(|| HealthCheckHttp {
            domain: a.health_check_http_domain.clone(),
            path: Some(
                a.health_check_http_path
                    .clone()
                    .unwrap_or_else(|| "/".to_owned()),
            ),
            response: None,
            status_codes: if a.health_check_http_status_codes.is_empty() {
                vec!["2??".to_owned(), "3??".to_owned()]
            } else {
                a.health_check_http_status_codes.clone()
            },
            tls: a.health_check_http_validate_certificate.unwrap_or(false),
        });
        let http = (protocol != ServiceProtocol::Tcp).then(|| ServiceHttp {
            cookie_name: a.http_cookie_name.clone(),
            cookie_lifetime: a.http_cookie_lifetime,
            certificates: Vec::new(),
            redirect_http: a.http_redirect_http.unwrap_or(false),
            sticky_sessions: a.http_sticky_sessions.unwrap_or(false),
            timeout_idle: a.http_timeout_idle,
        });

        let mut skipped = Vec::new();
        let mut services: BTreeMap<u16, ServiceSpec> = BTreeMap::new();
        let mut tcp_ports = 0usize;
        let ports = service
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .map(Vec::as_slice)
            .unwrap_or_default();
        for port in ports {
            let proto = port.protocol.as_deref().unwrap_or("TCP");
            let label = port
                .name
                .as_deref()
                .filter(|n| !n.is_empty())
                .map_or_else(|| port.port.to_string(), |n| format!("{n} ({})", port.port));
            if proto != "TCP" {
                skipped.push(format!(
                    "port {label}: protocol {proto} is not supported (only TCP)"
                ));
                continue;
            }
            tcp_ports += 1;
            let (Ok(listen_port), Some(node_port)) = (
                u16::try_from(port.port),
                port.node_port.and_then(|p| u16::try_from(p).ok()),
            ) else {
                skipped.push(format!("port {label}: no NodePort allocated"));
                continue;
            };
            if node_port == 0 {
                skipped.push(format!("port {label}: no NodePort allocated"));
                continue;
            }
            services.insert(
                listen_port,
                ServiceSpec {
                    protocol: protocol.clone(),
                    listen_port,
                    destination_port: node_port,
                    proxyprotocol,
                    http: http.clone(),
                    health_check: Some(HealthCheck {
                        protocol: hc_protocol.clone(),
                        port: a.health_check_port.unwrap_or(node_port),
                        interval: a
                            .health_check_interval
                            .unwrap_or_else(|| seconds(settings.health_check_interval)),
                        timeout: a
                            .health_check_timeout
                            .unwrap_or_else(|| seconds(settings.health_check_timeout)),
                        retries: a
                            .health_check_retries
                            .unwrap_or(settings.health_check_retries),
                        http: hc_http.clone(),
                    }),
                },
            );
        }

        // TCP ports without NodePorts (e.g. allocateLoadBalancerNodePorts: false) would leave
        // the load balancer with no service: refuse instead of deleting every service it has.
        if services.is_empty() && tcp_ports > 0 {
            return Err(
                "spec.ports[].nodePort: none of the Service's TCP ports has a NodePort; Hetzner load balancers forward to NodePorts, so set allocateLoadBalancerNodePorts to true (or leave it unset)"
                    .to_owned(),
            );
        }

        let mut targets = BTreeSet::new();
        for node in nodes {
            let node_name = node.metadata.name.as_deref().unwrap_or_default();
            if let Some(selector) = &a.node_selector {
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
                    targets.insert(id);
                }
                Ok(ProviderId::Robot(_)) => skipped.push(format!(
                    "node {node_name}: Robot servers are not supported as targets yet"
                )),
                Err(_) if provider_id.is_empty() => {
                    skipped.push(format!("node {node_name}: no providerID yet"));
                }
                Err(_) => skipped.push(format!(
                    "node {node_name}: providerID {provider_id:?} is not a Hetzner Cloud server"
                )),
            }
        }

        let network = network_id.map(|id| NetworkPlan {
            id,
            ip: a.private_ipv4.map(|ip| ip.to_string()),
            ip_range: a
                .private_subnet_ip_range
                .or(settings.private_subnet_ip_range)
                .map(|r| r.to_string()),
        });
        let disable_public = a
            .disable_public_network
            .unwrap_or(settings.disable_public_network);
        if disable_public && network_id.is_none() {
            skipped.push(
                "the public interface stays enabled: disabling it needs a network (HCLOUD_NETWORK)"
                    .to_owned(),
            );
        }
        Ok(Self {
            name: load_balancer_name(service, a),
            uid,
            placement,
            type_annotation: a.lb_type.clone(),
            create_type: a
                .lb_type
                .clone()
                .or_else(|| settings.lb_type.clone())
                .unwrap_or_else(|| DEFAULT_LB_TYPE.to_owned()),
            algorithm: a.algorithm.clone().unwrap_or(settings.algorithm.clone()),
            services: services.into_values().collect(),
            certificate_refs,
            targets: targets.into_iter().collect(),
            use_private_ip: a.use_private_ip.unwrap_or(settings.use_private_ip),
            network,
            // Without a network the public interface cannot be turned off.
            public_interface: !disable_public || network_id.is_none(),
            ipv4_rdns: a.ipv4_rdns.clone(),
            ipv6_rdns: a.ipv6_rdns.clone(),
            status: StatusOptions::new(a, settings),
            skipped,
        })
    }

    /// Put resolved certificate IDs into every https service.
    pub fn set_certificates(&mut self, ids: &[i64]) {
        for service in &mut self.services {
            if let Some(http) = &mut service.http {
                http.certificates = ids.to_vec();
            }
        }
    }

    fn labels(&self, current: &Labels) -> Labels {
        let mut labels = current.clone();
        labels.insert(SERVICE_UID_LABEL.to_owned(), self.uid.clone());
        labels
    }

    fn target(&self, id: i64) -> TargetSpec {
        TargetSpec::server(id, self.use_private_ip)
    }

    /// Whether the create request can attach the network itself (no fixed IP or subnet).
    fn network_on_create(&self) -> Option<i64> {
        self.network
            .as_ref()
            .filter(|n| n.ip.is_none() && n.ip_range.is_none())
            .map(|n| n.id)
    }

    /// `POST /load_balancers` for this plan; `max_targets` is the type's limit.
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
                .take(max_targets)
                .map(|id| self.target(*id))
                .collect()
        };
        CreateLoadBalancerRequest {
            name: self.name.clone(),
            load_balancer_type: self.create_type.clone(),
            location,
            network_zone,
            algorithm: Some(Algorithm::new(self.algorithm.clone())),
            services: self.services.clone(),
            targets,
            labels: Some(self.labels(&Labels::new())),
            public_interface: Some(self.public_interface || network.is_none()),
            network,
            public_net: None,
        }
    }

    /// The steps from `lb` to this plan, in a safe order. Target additions stop at the load
    /// balancer type's `max_targets` (a type change shows up in the next round).
    pub fn diff(&self, lb: &LoadBalancer) -> Vec<Step> {
        let mut steps = Vec::new();

        // Name and label (PUT, never locked).
        let name = (lb.name != self.name).then(|| self.name.clone());
        let labels =
            (lb.labels.get(SERVICE_UID_LABEL) != Some(&self.uid)).then(|| self.labels(&lb.labels));
        if name.is_some() || labels.is_some() {
            steps.push(Step::Update { name, labels });
        }

        // Network: detach from others, attach to ours.
        if let Some(network) = &self.network {
            for other in lb.private_net.iter().filter(|p| p.network != network.id) {
                steps.push(Step::DetachNetwork(other.network));
            }
            if !lb.private_net.iter().any(|p| p.network == network.id) {
                steps.push(Step::AttachNetwork(AttachToNetworkRequest {
                    network: network.id,
                    ip: network.ip.clone(),
                    ip_range: network.ip_range.clone(),
                }));
            }
        }

        // Targets to remove (not desired, other kinds, or a flipped use_private_ip).
        let desired: BTreeSet<i64> = self.targets.iter().copied().collect();
        let mut kept = Vec::new();
        for target in &lb.targets {
            let server = target.server.as_ref().map(|s| s.id);
            match (&target.kind, server) {
                (TargetType::Server, Some(id))
                    if desired.contains(&id) && target.use_private_ip == self.use_private_ip =>
                {
                    kept.push(id);
                }
                (TargetType::Server, Some(id)) => {
                    steps.push(Step::RemoveTarget(TargetSpec::server(id, false)));
                }
                // Label-selector and IP targets are never created by this CCM (IP targets are
                // how Robot nodes are reached, which it does not manage yet): they are left as
                // they are rather than removed, so taking over from a CCM that manages Robot
                // targets cuts no traffic.
                _ => {}
            }
        }

        // Services to delete.
        let wanted_ports: BTreeSet<u16> = self.services.iter().map(|s| s.listen_port).collect();
        for current in &lb.services {
            if !wanted_ports.contains(&current.listen_port) {
                steps.push(Step::DeleteService(current.listen_port));
            }
        }

        if let Some(t) = &self.type_annotation
            && *t != lb.load_balancer_type.name
            && t.parse::<i64>().ok() != Some(lb.load_balancer_type.id)
        {
            steps.push(Step::ChangeType(t.clone()));
        }
        if lb.algorithm.kind != self.algorithm {
            steps.push(Step::ChangeAlgorithm(self.algorithm.clone()));
        }

        for wanted in &self.services {
            match lb
                .services
                .iter()
                .find(|s| s.listen_port == wanted.listen_port)
            {
                None => steps.push(Step::AddService(wanted.clone())),
                Some(current) if service_differs(current, wanted) => {
                    steps.push(Step::UpdateService(ServiceUpdate {
                        listen_port: wanted.listen_port,
                        protocol: Some(wanted.protocol.clone()),
                        destination_port: Some(wanted.destination_port),
                        proxyprotocol: Some(wanted.proxyprotocol),
                        http: wanted.http.clone(),
                        health_check: wanted.health_check.clone(),
                    }));
                }
                Some(_) => {}
            }
        }

        // Targets to add, within the type's limit (0 = unknown: no limit).
        let max = match lb.load_balancer_type.max_targets {
            0 => usize::MAX,
            n => n as usize,
        };
        let room = max.saturating_sub(kept.len());
        let missing: Vec<i64> = self
            .targets
            .iter()
            .copied()
            .filter(|id| !kept.contains(id))
            .collect();
        for id in missing.iter().take(room) {
            steps.push(Step::AddTarget(self.target(*id)));
        }

        if lb.public_net.enabled != self.public_interface {
            steps.push(if self.public_interface {
                Step::EnablePublicInterface
            } else {
                Step::DisablePublicInterface
            });
        }
        if self.public_interface {
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
        }
        steps
    }

    /// Server targets beyond the type's limit that [`Plan::diff`] leaves out.
    pub fn targets_over_limit(&self, lb: &LoadBalancer) -> usize {
        match lb.load_balancer_type.max_targets {
            0 => 0,
            n => self.targets.len().saturating_sub(n as usize),
        }
    }
}

/// Whether `current` must be updated to become `wanted`. Optional HTTP settings the plan
/// leaves unset are not compared (the API fills in its defaults).
pub fn service_differs(current: &LoadBalancerService, wanted: &ServiceSpec) -> bool {
    if current.protocol != wanted.protocol
        || current.destination_port != wanted.destination_port
        || current.proxyprotocol != wanted.proxyprotocol
    {
        return true;
    }
    let hc_differs = match (&current.health_check, &wanted.health_check) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(c), Some(w)) => {
            c.protocol != w.protocol
                || c.port != w.port
                || c.interval != w.interval
                || c.timeout != w.timeout
                || c.retries != w.retries
                || match (&c.http, &w.http) {
                    (_, None) => false,
                    (None, Some(_)) => true,
                    (Some(ch), Some(wh)) => {
                        ch.domain != wh.domain
                            || (wh.path.is_some() && ch.path != wh.path)
                            || ch.status_codes != wh.status_codes
                            || ch.tls != wh.tls
                    }
                }
        }
    };
    if hc_differs {
        return true;
    }
    match (&current.http, &wanted.http) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(c), Some(w)) => {
            let mut certs = c.certificates.clone();
            certs.sort_unstable();
            let mut wanted_certs = w.certificates.clone();
            wanted_certs.sort_unstable();
            certs != wanted_certs
                || c.redirect_http != w.redirect_http
                || c.sticky_sessions != w.sticky_sessions
                || (w.cookie_name.is_some() && c.cookie_name != w.cookie_name)
                || (w.cookie_lifetime.is_some() && c.cookie_lifetime != w.cookie_lifetime)
                || (w.timeout_idle.is_some() && c.timeout_idle != w.timeout_idle)
        }
    }
}

/// One change of a load balancer.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// `PUT` name and/or labels.
    Update {
        /// New name.
        name: Option<String>,
        /// New labels (the whole map).
        labels: Option<Labels>,
    },
    /// `detach_from_network`.
    DetachNetwork(i64),
    /// `attach_to_network`.
    AttachNetwork(AttachToNetworkRequest),
    /// `remove_target`.
    RemoveTarget(TargetSpec),
    /// `delete_service`.
    DeleteService(u16),
    /// `change_type`.
    ChangeType(String),
    /// `change_algorithm`.
    ChangeAlgorithm(AlgorithmType),
    /// `update_service`.
    UpdateService(ServiceUpdate),
    /// `add_service`.
    AddService(ServiceSpec),
    /// `add_target`.
    AddTarget(TargetSpec),
    /// `enable_public_interface`.
    EnablePublicInterface,
    /// `disable_public_interface`.
    DisablePublicInterface,
    /// `change_dns_ptr`.
    ChangeDnsPtr(ChangeDnsPtrRequest),
}

impl Step {
    /// Whether the step only touches targets (what `update_load_balancer` may do).
    pub fn is_target_step(&self) -> bool {
        matches!(self, Self::AddTarget(_) | Self::RemoveTarget(_))
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
        ingresses.push(ingress(Some(ipv4), None));
        if !opts.disable_ipv6
            && let Some(ipv6) = lb.public_net.ipv6.ip.clone()
        {
            ingresses.push(ingress(Some(ipv6), None));
        }
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
        LoadBalancerIp, LoadBalancerPrivateNet, LoadBalancerPublicNet, LoadBalancerTarget,
        LoadBalancerType, ResourceId,
    };
    use k8s_openapi::api::core::v1::{NodeSpec, ServicePort, ServiceSpec as K8sServiceSpec};
    use std::collections::BTreeMap;

    fn service(ports: &[(i32, &str, Option<i32>)]) -> Service {
        let mut svc = Service::default();
        svc.metadata.uid = Some("0f2f6c0e-1b2a-4c3d-9e8f-0123456789ab".into());
        svc.spec = Some(K8sServiceSpec {
            ports: Some(
                ports
                    .iter()
                    .map(|(port, proto, node_port)| ServicePort {
                        port: *port,
                        protocol: Some((*proto).to_owned()),
                        node_port: *node_port,
                        ..ServicePort::default()
                    })
                    .collect(),
            ),
            ..K8sServiceSpec::default()
        });
        svc
    }

    fn node(name: &str, provider_id: &str, labels: &[(&str, &str)]) -> Arc<Node> {
        let mut node = Node::default();
        node.metadata.name = Some(name.to_owned());
        node.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        node.spec = Some(NodeSpec {
            provider_id: Some(provider_id.to_owned()).filter(|p| !p.is_empty()),
            ..NodeSpec::default()
        });
        Arc::new(node)
    }

    fn annotations(pairs: &[(&str, &str)]) -> Annotations {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Annotations::parse(&map).unwrap()
    }

    fn plan(svc: &Service, a: &Annotations, nodes: &[Arc<Node>]) -> Plan {
        Plan::new(svc, a, &LoadBalancerSettings::default(), None, nodes).unwrap()
    }

    /// The LB as the API would show it right after creating `plan`.
    fn created(plan: &Plan) -> LoadBalancer {
        let mut lb = LoadBalancer {
            id: 1,
            name: plan.name.clone(),
            labels: plan.labels(&Labels::new()),
            load_balancer_type: LoadBalancerType {
                name: plan.create_type.clone(),
                max_targets: 25,
                ..LoadBalancerType::default()
            },
            algorithm: Algorithm::new(plan.algorithm.clone()),
            public_net: LoadBalancerPublicNet {
                enabled: true,
                ipv4: LoadBalancerIp {
                    id: None,
                    ip: Some("198.51.100.1".into()),
                    dns_ptr: None,
                },
                ipv6: LoadBalancerIp {
                    id: None,
                    ip: Some("2001:db8::1".into()),
                    dns_ptr: None,
                },
            },
            ..LoadBalancer::default()
        };
        for s in &plan.services {
            lb.services.push(LoadBalancerService {
                protocol: s.protocol.clone(),
                listen_port: s.listen_port,
                destination_port: s.destination_port,
                proxyprotocol: s.proxyprotocol,
                http: s.http.clone(),
                health_check: s.health_check.clone(),
            });
        }
        for id in &plan.targets {
            lb.targets.push(LoadBalancerTarget {
                kind: TargetType::Server,
                server: Some(ResourceId { id: *id }),
                use_private_ip: plan.use_private_ip,
                ..LoadBalancerTarget::default()
            });
        }
        lb
    }

    #[test]
    fn services_per_tcp_port_with_the_node_port() {
        let svc = service(&[
            (80, "TCP", Some(30080)),
            (53, "UDP", Some(30053)),
            (443, "TCP", Some(30443)),
            (8080, "TCP", None),
        ]);
        let p = plan(&svc, &Annotations::default(), &[]);
        let ports: Vec<(u16, u16, u16)> = p
            .services
            .iter()
            .map(|s| {
                (
                    s.listen_port,
                    s.destination_port,
                    s.health_check.as_ref().unwrap().port,
                )
            })
            .collect();
        assert_eq!(ports, vec![(80, 30080, 30080), (443, 30443, 30443)]);
        assert_eq!(p.skipped.len(), 2, "{:?}", p.skipped);
        let hc = p.services[0].health_check.as_ref().unwrap();
        assert_eq!(hc.protocol, HealthCheckProtocol::Tcp);
        assert_eq!((hc.interval, hc.timeout, hc.retries), (15, 10, 3));
        assert_eq!(p.services[0].protocol, ServiceProtocol::Tcp);
        assert!(p.services[0].http.is_none());
    }

    #[test]
    fn annotations_beat_settings() {
        let settings = LoadBalancerSettings {
            location: Some("fsn1".into()),
            lb_type: Some("lb21".into()),
            uses_proxyprotocol: true,
            health_check_retries: 5,
            ..LoadBalancerSettings::default()
        };
        let svc = service(&[(80, "TCP", Some(30080))]);
        let p = Plan::new(&svc, &Annotations::default(), &settings, None, &[]).unwrap();
        assert_eq!(p.placement, Some(Placement::Location("fsn1".into())));
        assert_eq!(p.create_type, "lb21");
        assert_eq!(p.type_annotation, None);
        assert!(p.services[0].proxyprotocol);
        assert_eq!(p.services[0].health_check.as_ref().unwrap().retries, 5);

        let a = annotations(&[
            (keys::NETWORK_ZONE, "eu-central"),
            (keys::TYPE, "lb31"),
            (keys::USES_PROXYPROTOCOL, "false"),
            (keys::HEALTH_CHECK_RETRIES, "1"),
            (keys::HEALTH_CHECK_PORT, "10254"),
        ]);
        let p = Plan::new(&svc, &a, &settings, None, &[]).unwrap();
        assert_eq!(
            p.placement,
            Some(Placement::NetworkZone("eu-central".into()))
        );
        assert_eq!(p.create_type, "lb31");
        assert!(!p.services[0].proxyprotocol);
        let hc = p.services[0].health_check.as_ref().unwrap();
        assert_eq!((hc.retries, hc.port), (1, 10254));

        let none = Plan::new(
            &svc,
            &Annotations::default(),
            &LoadBalancerSettings::default(),
            None,
            &[],
        )
        .unwrap();
        assert_eq!(none.placement, None);
        assert_eq!(none.create_type, "lb11");
    }

    #[test]
    fn targets_from_cloud_nodes_filtered_by_selector() {
        let nodes = [
            node("a", "hcloud://11", &[("role", "worker")]),
            node("b", "hcloud://12", &[("role", "master")]),
            node("c", "hrobot://5", &[("role", "worker")]),
            node("d", "aws:///i-1", &[("role", "worker")]),
            node("e", "", &[("role", "worker")]),
            node("f", "hcloud://10", &[("role", "worker")]),
        ];
        let svc = service(&[(80, "TCP", Some(30080))]);
        let all = plan(&svc, &Annotations::default(), &nodes);
        assert_eq!(all.targets, vec![10, 11, 12]);
        assert_eq!(all.skipped.len(), 3, "{:?}", all.skipped);
        let workers = plan(
            &svc,
            &annotations(&[(keys::NODE_SELECTOR, "role=worker")]),
            &nodes,
        );
        assert_eq!(workers.targets, vec![10, 11]);
    }

    #[test]
    fn a_freshly_created_lb_needs_nothing() {
        let svc = service(&[(80, "TCP", Some(30080)), (443, "TCP", Some(30443))]);
        let nodes = [node("a", "hcloud://1", &[]), node("b", "hcloud://2", &[])];
        let p = plan(&svc, &annotations(&[(keys::PROTOCOL, "http")]), &nodes);
        assert_eq!(p.diff(&created(&p)), Vec::new());
    }

    #[test]
    fn diff_adds_updates_and_removes() {
        let svc = service(&[(80, "TCP", Some(30080)), (443, "TCP", Some(30443))]);
        let nodes = [node("a", "hcloud://1", &[]), node("b", "hcloud://2", &[])];
        let old = plan(&svc, &Annotations::default(), &nodes);
        let lb = created(&old);

        let svc2 = service(&[(80, "TCP", Some(30081)), (8443, "TCP", Some(30843))]);
        let nodes2 = [node("b", "hcloud://2", &[]), node("c", "hcloud://3", &[])];
        let new = plan(
            &svc2,
            &annotations(&[(keys::ALGORITHM_TYPE, "least_connections")]),
            &nodes2,
        );
        let steps = new.diff(&lb);
        let kinds: Vec<String> = steps
            .iter()
            .map(|s| match s {
                Step::RemoveTarget(t) => format!("remove_target {:?}", t.server),
                Step::DeleteService(p) => format!("delete_service {p}"),
                Step::ChangeAlgorithm(a) => format!("change_algorithm {a}"),
                Step::UpdateService(u) => {
                    format!(
                        "update_service {} -> {:?}",
                        u.listen_port, u.destination_port
                    )
                }
                Step::AddService(s) => format!("add_service {}", s.listen_port),
                Step::AddTarget(t) => format!("add_target {:?}", t.server),
                other => format!("{other:?}"),
            })
            .collect();
        assert_eq!(
            kinds,
            vec![
                "remove_target Some(ResourceId { id: 1 })",
                "delete_service 443",
                "change_algorithm least_connections",
                "update_service 80 -> Some(30081)",
                "add_service 8443",
                "add_target Some(ResourceId { id: 3 })",
            ]
        );
    }

    #[test]
    fn type_changes_only_by_annotation_and_name_label_are_fixed() {
        let svc = service(&[(80, "TCP", Some(30080))]);
        let p = plan(&svc, &Annotations::default(), &[]);
        let mut lb = created(&p);
        lb.load_balancer_type.name = "lb21".into();
        // No annotation: an lb21 stays lb21 even though the default is lb11.
        assert_eq!(p.diff(&lb), Vec::new());
        let p = plan(
            &svc,
            &annotations(&[(keys::TYPE, "lb31"), (keys::NAME, "web")]),
            &[],
        );
        lb.labels.clear();
        lb.labels.insert("keep".into(), "me".into());
        let steps = p.diff(&lb);
        let mut want_labels = Labels::new();
        want_labels.insert("keep".into(), "me".into());
        want_labels.insert(SERVICE_UID_LABEL.into(), p.uid.clone());
        assert_eq!(
            steps,
            vec![
                Step::Update {
                    name: Some("web".into()),
                    labels: Some(want_labels)
                },
                Step::ChangeType("lb31".into()),
            ]
        );
    }

    #[test]
    fn private_ip_flip_recreates_targets_and_network_is_attached() {
        let svc = service(&[(80, "TCP", Some(30080))]);
        let nodes = [node("a", "hcloud://1", &[])];
        let p = plan(&svc, &Annotations::default(), &nodes);
        let lb = created(&p);
        let a = annotations(&[
            (keys::USE_PRIVATE_IP, "true"),
            (keys::PRIVATE_IPV4, "10.0.0.50"),
            (keys::DISABLE_PUBLIC_NETWORK, "true"),
        ]);
        let p = Plan::new(&svc, &a, &LoadBalancerSettings::default(), Some(7), &nodes).unwrap();
        assert_eq!(
            p.diff(&lb),
            vec![
                Step::AttachNetwork(AttachToNetworkRequest {
                    network: 7,
                    ip: Some("10.0.0.50".into()),
                    ip_range: None
                }),
                Step::RemoveTarget(TargetSpec::server(1, false)),
                Step::AddTarget(TargetSpec::server(1, true)),
                Step::DisablePublicInterface,
            ]
        );
    }

    #[test]
    fn max_targets_is_respected_keeping_existing_targets() {
        let svc = service(&[(80, "TCP", Some(30080))]);
        let nodes: Vec<_> = (1..=4)
            .map(|i| node(&format!("n{i}"), &format!("hcloud://{i}"), &[]))
            .collect();
        let p = plan(&svc, &Annotations::default(), &nodes[2..]);
        let mut lb = created(&p);
        lb.load_balancer_type.max_targets = 3;
        let p = plan(&svc, &Annotations::default(), &nodes);
        assert_eq!(
            p.diff(&lb),
            vec![Step::AddTarget(TargetSpec::server(1, false))]
        );
        assert_eq!(p.targets_over_limit(&lb), 1);
    }

    #[test]
    fn status_variants() {
        let svc = service(&[(80, "TCP", Some(30080))]);
        let p = plan(&svc, &Annotations::default(), &[]);
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
        let mut private_only = lb.clone();
        private_only.public_net.enabled = false;
        assert_eq!(ips(&default, &private_only), vec!["10.0.0.5/VIP"]);
        lb.public_net.ipv4.ip = None;
        assert!(status(&lb, &default).is_err());
        assert!(status(&lb, &host).is_ok());
    }

    #[test]
    fn managed_certificates_are_rejected_clearly() {
        let svc = service(&[(443, "TCP", Some(30443))]);
        let a = annotations(&[
            (keys::PROTOCOL, "https"),
            (keys::CERTIFICATE_TYPE, "managed"),
        ]);
        let err = Plan::new(&svc, &a, &LoadBalancerSettings::default(), None, &[]).unwrap_err();
        assert!(err.contains("certificate-type"), "{err}");
    }
}
