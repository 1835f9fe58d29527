//! The cloud node lifecycle controller: deletes Nodes whose instance is gone and marks Nodes
//! whose instance is shut down. Deletions go through a brake ([`brake`]): a cloud that
//! reports many Nodes gone at once deletes none.

pub mod brake;
mod controller;
pub mod decisions;

pub use controller::{
    COMPONENT, CONTROLLER, LifecycleError, NodeLifecycleController, NodeLifecycleControllerConfig,
    read,
};
pub use decisions::{LifecycleDecision, REASON_DELETION_HELD, Reading, decide};
