//! Locations.

use serde::{Deserialize, Serialize};

use super::common::{NetworkZone, null_default};

/// A location (e.g. `fsn1`): a site with one or more data centres.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Location {
    /// ID of the location.
    pub id: i64,
    /// Unique name, e.g. `fsn1`; used as the region of a node.
    pub name: String,
    /// Human readable description.
    #[serde(default, deserialize_with = "null_default")]
    pub description: String,
    /// ISO 3166-1 alpha-2 country code.
    #[serde(default, deserialize_with = "null_default")]
    pub country: String,
    /// City the location is closest to.
    #[serde(default, deserialize_with = "null_default")]
    pub city: String,
    /// Latitude of the city.
    #[serde(default)]
    pub latitude: Option<f64>,
    /// Longitude of the city.
    #[serde(default)]
    pub longitude: Option<f64>,
    /// Network zone the location belongs to.
    pub network_zone: NetworkZone,
}
