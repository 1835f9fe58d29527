//! The Hetzner Robot webservice (dedicated root servers), as far as a cloud controller
//! manager reads it: the server list and a server's power state.
//!
//! Robot is a second API beside the Cloud API: its own base URL, HTTP Basic credentials and
//! error envelope (`{"error": {"status", "code", "message"}}`), upper-case error codes, and
//! only `GET` requests from this client. Its answers map into the lenient models below;
//! its error answers become [`crate::Error::Robot`].

//!
//! ```no_run
//! # async fn demo() -> Result<(), hcloud_api::Error> {
//! use hcloud_api::robot::{RobotClient, RobotConfig};
//! let robot = RobotClient::new(RobotConfig::new("#ws+user", "<password>"))?;
//! for server in robot.servers().await? {
//!     let powered_off = robot.reset(server.server_number).await?.is_shut_off();
//!     println!("{} {} off={powered_off}", server.server_number, server.server_name);
//! }
//! # Ok(()) }
//! ```

mod client;
mod config;
mod models;

pub use client::RobotClient;
pub use config::{DEFAULT_ROBOT_ENDPOINT, RobotConfig, RobotMetrics, RobotPassword};
pub use models::{RobotApiError, RobotErrorCode, RobotReset, RobotServer};
