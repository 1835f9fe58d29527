//! Data types of the API, decoded leniently: unknown fields are ignored, unknown enum
//! values are kept as `Unknown(String)`, and nullable fields are `Option`s or default to
//! empty.

pub mod action;
pub mod certificate;
pub mod common;
pub mod load_balancer;
pub mod location;
pub mod network;
pub mod server;

pub use action::{Action, ActionErrorInfo, ActionStatus};
pub use certificate::{
    Certificate, CertificateStatus, CertificateType, CreateCertificateRequest,
    CreateCertificateResponse, IssuanceStatus, RenewalStatus,
};
pub use common::{
    Architecture, Deprecation, Labels, NetworkZone, Protection, ResourceId, ResourceRef,
};
pub use load_balancer::{
    Algorithm, AlgorithmType, AttachToNetworkRequest, ChangeDnsPtrRequest,
    CreateLoadBalancerPublicNet, CreateLoadBalancerRequest, CreateLoadBalancerResponse,
    HealthCheck, HealthCheckHttp, HealthCheckProtocol, HealthStatus, HealthStatusValue,
    LabelSelector, LoadBalancer, LoadBalancerIp, LoadBalancerPrivateNet, LoadBalancerPublicNet,
    LoadBalancerService, LoadBalancerTarget, LoadBalancerType, ServiceHttp, ServiceProtocol,
    ServiceSpec, ServiceUpdate, TargetIp, TargetSpec, TargetType, UpdateRequest,
};
pub use location::Location;
pub use network::{Network, Route, Subnet, SubnetType};
pub use server::{
    DnsPtr, Ipv4, Ipv6, Server, ServerFirewall, ServerPrivateNet, ServerProtection,
    ServerPublicNet, ServerStatus, ServerType, ServerTypeLocation,
};
