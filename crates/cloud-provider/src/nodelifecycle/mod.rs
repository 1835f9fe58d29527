//! The cloud node lifecycle controller: deletes Nodes whose instance is gone and marks Nodes
//! whose instance is shut down.

mod controller;
pub mod decisions;

pub use controller::{
    COMPONENT, CONTROLLER, LifecycleAction, LifecycleError, NodeLifecycleController,
    NodeLifecycleControllerConfig, decide,
};
