//! The cloud node lifecycle controller: deletes Nodes whose instance is gone and marks Nodes
//! whose instance is shut down. Deletions go through a brake ([`brake`]): a cloud that
//! reports many Nodes gone at once deletes none.

pub mod brake;
mod controller;
pub mod decisions;

pub use controller::{
    COMPONENT, CONTROLLER, LifecycleDecision, LifecycleError, NodeLifecycleController,
    NodeLifecycleControllerConfig, REASON_DELETION_HELD, decide,
};
