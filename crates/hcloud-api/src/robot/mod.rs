//! The Hetzner Robot webservice (dedicated root servers), as far as a cloud controller
//! manager reads it: the server list and a server's power state.
//!
//! Robot is a second API beside the Cloud API: its own base URL, HTTP Basic credentials and
//! error envelope (`{"error": {"status", "code", "message"}}`), upper-case error codes, and
//! only `GET` requests from this client. Its answers map into the lenient models below;
//! its error answers become [`crate::Error::Robot`].

mod models;

pub use models::{RobotApiError, RobotErrorCode, RobotReset, RobotServer};
