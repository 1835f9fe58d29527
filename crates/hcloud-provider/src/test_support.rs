//! Small helpers shared by the unit tests of this crate.

use hcloud_api::models::Labels;

use crate::load_balancers::annotations::Annotations;
use k8s_openapi::api::core::v1::{NodeAddress, Service, ServicePort, ServiceSpec};

/// A label map from `(key, value)` pairs.
pub(crate) fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// A Service's annotations from `(key, value)` pairs (full keys).
pub(crate) fn annotations(pairs: &[(&str, &str)]) -> Annotations {
    Annotations::new(&labels(pairs))
}

/// A Service named `web` with the UID `uid` and these ports.
pub(crate) fn web_service(uid: &str, ports: impl IntoIterator<Item = ServicePort>) -> Service {
    let mut svc = Service::default();
    svc.metadata.name = Some("web".into());
    svc.metadata.uid = Some(uid.into());
    svc.spec = Some(ServiceSpec {
        ports: Some(ports.into_iter().collect()),
        ..ServiceSpec::default()
    });
    svc
}

/// Node addresses as `(type, address)` pairs, in their order, for comparing in asserts.
pub(crate) fn address_pairs(addresses: &[NodeAddress]) -> Vec<(&str, &str)> {
    addresses
        .iter()
        .map(|a| (a.type_.as_str(), a.address.as_str()))
        .collect()
}
