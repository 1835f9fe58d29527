//! Actions: the API's handles on asynchronous work.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::common::{ResourceRef, null_default};
use crate::macros::string_enum;

string_enum! {
    /// Status of an action.
    pub enum ActionStatus {
        Running = "running",
        Success = "success",
        Error = "error",
    }
}

/// An action.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    /// ID of the action.
    pub id: i64,
    /// Command the action executes, e.g. `add_route`.
    #[serde(default, deserialize_with = "null_default")]
    pub command: String,
    /// Current status.
    pub status: ActionStatus,
    /// Progress in percent.
    #[serde(default, deserialize_with = "null_default")]
    pub progress: i32,
    /// Point in time the action started.
    #[serde(default)]
    pub started: DateTime<Utc>,
    /// Point in time the action finished; `None` while it runs.
    #[serde(default)]
    pub finished: Option<DateTime<Utc>>,
    /// Resources the action relates to.
    #[serde(default, deserialize_with = "null_default")]
    pub resources: Vec<ResourceRef>,
    /// Why the action failed; only set when `status` is `error`.
    #[serde(default)]
    pub error: Option<ActionErrorInfo>,
}

impl Action {
    /// True once the action no longer runs (success, error or an unknown final state).
    pub fn is_finished(&self) -> bool {
        !matches!(self.status, ActionStatus::Running)
    }
}

/// The error of a failed action (or a failed certificate issuance).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActionErrorInfo {
    /// Machine readable code, e.g. `action_failed`.
    #[serde(default, deserialize_with = "null_default")]
    pub code: String,
    /// Human readable message.
    #[serde(default, deserialize_with = "null_default")]
    pub message: String,
}
