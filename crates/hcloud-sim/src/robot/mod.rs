//! The Hetzner Robot webservice (dedicated root servers), as far as a cloud controller
//! manager reads it, served by the same simulator under `/robot`:
//!
//! - `GET /robot/server`, `GET /robot/server/{number}`, `GET /robot/reset/{number}` with
//!   Robot's JSON shapes and its error envelope `{"error": {"status", "code", "message"}}`;
//! - HTTP Basic auth with the simulator's own Robot credentials (401 `UNAUTHORIZED`);
//! - 404 `SERVER_NOT_FOUND` for an unknown number and for the list of an empty account;
//! - a request limit per endpoint (403 `RATE_LIMIT_EXCEEDED` with `max_request` and
//!   `interval`; by default 200 per hour, the documented limit of `GET /server`);
//! - request counters and fault rules of their own, and an admin API under `/_admin/robot`.
//!
//! The servers live in the world beside the Cloud resources ([`crate::world::World::robot`]),
//! so seeds and `/_admin/state` cover them too.

pub mod admin;
pub mod http;
pub mod model;

pub use http::{ROBOT_PREFIX, RobotLimiter, RobotRateLimit, RobotSide, robot_routes};
pub use model::{OPERATING_STATUSES, RobotServer, RobotServerSeed, RobotWorld};
