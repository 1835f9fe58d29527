//! What a load balancer looks like after a creation or a [`Step`], as far as that is known
//! without asking the API.
//!
//! Ensure works in rounds: the difference to the wanted state gives steps, the steps run, the
//! difference of the result gives the next round (a type change makes room for more targets,
//! a network attached at last lets private targets in). `plan` has no API answers to diff
//! against, so it diffs against these predictions instead and shows every round. What the API
//! alone decides (addresses, defaults it fills in) stays unknown: an address the plan cannot
//! know is simply not shown.

use hcloud_api::models::{
    Algorithm, CreateLoadBalancerRequest, LoadBalancer, LoadBalancerPrivateNet,
    LoadBalancerService, LoadBalancerTarget, LoadBalancerType, ServiceSpec, TargetSpec,
};

use super::desired::Step;

/// The load balancer as `request` creates it, of type `lb_type`, before the API has given it
/// addresses.
pub fn created(request: &CreateLoadBalancerRequest, lb_type: &LoadBalancerType) -> LoadBalancer {
    let mut lb = LoadBalancer {
        name: request.name.clone(),
        labels: request.labels.clone().unwrap_or_default(),
        load_balancer_type: lb_type.clone(),
        algorithm: request
            .algorithm
            .clone()
            .unwrap_or_else(|| Algorithm::new(hcloud_api::models::AlgorithmType::RoundRobin)),
        services: request.services.iter().map(service).collect(),
        targets: request.targets.iter().map(target).collect(),
        ..LoadBalancer::default()
    };
    lb.public_net.enabled = request.public_interface.unwrap_or(true);
    if let Some(network) = request.network {
        lb.private_net.push(LoadBalancerPrivateNet {
            network,
            ip: String::new(),
        });
    }
    lb
}

/// `lb` after `step`; `new_type` is the type a [`Step::ChangeType`] changes to.
pub fn after(step: &Step, lb: &mut LoadBalancer, new_type: Option<&LoadBalancerType>) {
    match step {
        Step::Update { name, labels } => {
            if let Some(name) = name {
                lb.name.clone_from(name);
            }
            if let Some(labels) = labels {
                lb.labels.clone_from(labels);
            }
        }
        Step::ChangeLabels { labels, .. } => lb.labels.clone_from(labels),
        Step::ChangeProtection(delete) => lb.protection.delete = *delete,
        Step::DetachNetwork(network) => lb.private_net.retain(|p| p.network != *network),
        Step::AttachNetwork(request) => lb.private_net.push(LoadBalancerPrivateNet {
            network: request.network,
            ip: request.ip.clone().unwrap_or_default(),
        }),
        Step::ChangeType { .. } => {
            if let Some(new_type) = new_type {
                lb.load_balancer_type = new_type.clone();
            }
        }
        Step::ChangeAlgorithm { to, .. } => lb.algorithm.kind = to.clone(),
        Step::DeleteService(port) => lb.services.retain(|s| s.listen_port != *port),
        Step::AddService(spec) => lb.services.push(service(spec)),
        Step::UpdateService { update, .. } => {
            if let Some(current) = lb
                .services
                .iter_mut()
                .find(|s| s.listen_port == update.listen_port)
            {
                if let Some(protocol) = &update.protocol {
                    current.protocol = protocol.clone();
                }
                if let Some(port) = update.destination_port {
                    current.destination_port = port;
                }
                if let Some(proxyprotocol) = update.proxyprotocol {
                    current.proxyprotocol = proxyprotocol;
                }
                if update.http.is_some() {
                    current.http.clone_from(&update.http);
                }
                if update.health_check.is_some() {
                    current.health_check.clone_from(&update.health_check);
                }
            }
        }
        Step::AddTarget(_) | Step::RemoveTarget(_) => {
            step.apply_to(lb);
        }
        Step::EnablePublicInterface => lb.public_net.enabled = true,
        Step::DisablePublicInterface => lb.public_net.enabled = false,
        Step::ChangeDnsPtr(request) => {
            for ip in [&mut lb.public_net.ipv4, &mut lb.public_net.ipv6] {
                if ip.ip.as_deref() == Some(request.ip.as_str()) {
                    ip.dns_ptr.clone_from(&request.dns_ptr);
                }
            }
        }
    }
}

/// The service as the load balancer holds it once `spec` was sent.
pub(super) fn service(spec: &ServiceSpec) -> LoadBalancerService {
    LoadBalancerService {
        protocol: spec.protocol.clone(),
        listen_port: spec.listen_port,
        destination_port: spec.destination_port,
        proxyprotocol: spec.proxyprotocol,
        http: spec.http.clone(),
        health_check: spec.health_check.clone(),
    }
}

fn target(spec: &TargetSpec) -> LoadBalancerTarget {
    let mut lb = LoadBalancer::default();
    Step::AddTarget(spec.clone()).apply_to(&mut lb);
    lb.targets.pop().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hcloud_api::models::{AlgorithmType, ServiceProtocol};

    #[test]
    fn a_created_load_balancer_has_what_its_request_asked_for() {
        let request = CreateLoadBalancerRequest {
            name: "web".into(),
            load_balancer_type: "lb11".into(),
            services: vec![ServiceSpec {
                protocol: ServiceProtocol::Tcp,
                listen_port: 80,
                destination_port: 30080,
                ..ServiceSpec::default()
            }],
            targets: vec![TargetSpec::server(7, false)],
            network: Some(3),
            public_interface: Some(false),
            ..CreateLoadBalancerRequest::default()
        };
        let lb_type = LoadBalancerType {
            name: "lb11".into(),
            max_targets: 25,
            ..LoadBalancerType::default()
        };
        let lb = created(&request, &lb_type);
        assert_eq!(lb.name, "web");
        assert_eq!(lb.load_balancer_type.max_targets, 25);
        assert_eq!(lb.algorithm.kind, AlgorithmType::RoundRobin);
        assert_eq!(lb.services[0].destination_port, 30080);
        assert_eq!(lb.targets[0].server.as_ref().map(|s| s.id), Some(7));
        assert_eq!(lb.private_net[0].network, 3);
        assert!(!lb.public_net.enabled);
    }

    #[test]
    fn steps_change_what_they_name() {
        let mut lb = LoadBalancer::default();
        let bigger = LoadBalancerType {
            name: "lb21".into(),
            max_targets: 75,
            ..LoadBalancerType::default()
        };
        after(
            &Step::ChangeType {
                from: "lb11".into(),
                to: "lb21".into(),
            },
            &mut lb,
            Some(&bigger),
        );
        assert_eq!(lb.load_balancer_type.max_targets, 75);
        after(
            &Step::ChangeAlgorithm {
                from: AlgorithmType::RoundRobin,
                to: AlgorithmType::LeastConnections,
            },
            &mut lb,
            None,
        );
        assert_eq!(lb.algorithm.kind, AlgorithmType::LeastConnections);
        after(&Step::DisablePublicInterface, &mut lb, None);
        assert!(!lb.public_net.enabled);
        after(
            &Step::AttachNetwork(hcloud_api::models::AttachToNetworkRequest {
                network: 4,
                ip: Some("10.0.0.9".into()),
                ip_range: None,
            }),
            &mut lb,
            None,
        );
        assert_eq!(lb.private_net[0].ip, "10.0.0.9");
        after(&Step::DetachNetwork(4), &mut lb, None);
        assert!(lb.private_net.is_empty());
    }
}
