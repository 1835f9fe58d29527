//! The cloud node controller: initializes Nodes registered with the uninitialized taint,
//! refreshes their addresses periodically and mirrors beta topology labels to GA ones.

pub mod addresses;
mod controller;
pub mod decisions;

pub use controller::{
    ADDRESS_CONTROLLER, COMPONENT, CONTROLLER, NodeController, NodeControllerConfig, NodeSyncError,
};

#[cfg(test)]
pub(crate) mod test_support {
    use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeSpec, NodeStatus, Taint};

    use crate::well_known::{ANNOTATION_PROVIDED_NODE_IP, TAINT_UNINITIALIZED};

    pub fn addr(type_: &str, address: &str) -> NodeAddress {
        NodeAddress {
            type_: type_.to_owned(),
            address: address.to_owned(),
        }
    }

    pub fn taint(key: &str, effect: &str) -> Taint {
        Taint {
            key: key.to_owned(),
            effect: effect.to_owned(),
            ..Taint::default()
        }
    }

    pub fn tainted_node(name: &str) -> Node {
        let mut node = Node::default();
        node.metadata.name = Some(name.to_owned());
        node.spec = Some(NodeSpec {
            taints: Some(vec![taint(TAINT_UNINITIALIZED, "NoSchedule")]),
            ..NodeSpec::default()
        });
        node
    }

    pub fn node_with(addresses: &[NodeAddress], annotation: Option<&str>) -> Node {
        let mut node = tainted_node("n");
        node.status = Some(NodeStatus {
            addresses: Some(addresses.to_vec()),
            ..NodeStatus::default()
        });
        if let Some(value) = annotation {
            node.metadata.annotations = Some(
                [(ANNOTATION_PROVIDED_NODE_IP.to_owned(), value.to_owned())]
                    .into_iter()
                    .collect(),
            );
        }
        node
    }
}
