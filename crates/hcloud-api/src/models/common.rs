//! Types shared by several resources.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

use crate::macros::string_enum;

/// Labels of a resource (a string map; a PUT replaces it as a whole).
pub type Labels = BTreeMap<String, String>;

/// Decodes a field that may be absent or `null` into its default value.
pub(crate) fn null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

string_enum! {
    /// A network zone, the region a location belongs to.
    pub enum NetworkZone {
        EuCentral = "eu-central",
        UsEast = "us-east",
        UsWest = "us-west",
        ApSoutheast = "ap-southeast",
    }
}

string_enum! {
    /// CPU architecture of a server type.
    pub enum Architecture {
        X86 = "x86",
        Arm = "arm",
    }
}

/// Delete protection of a resource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Protection {
    /// The resource cannot be deleted while set.
    #[serde(default, deserialize_with = "null_default")]
    pub delete: bool,
}

/// A reference to another resource by ID (`{"id": 42}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceId {
    /// ID of the referenced resource.
    pub id: i64,
}

/// A reference to another resource by ID and type (`{"id": 42, "type": "server"}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceRef {
    /// ID of the referenced resource.
    pub id: i64,
    /// Type of the referenced resource, e.g. `server` or `load_balancer`.
    #[serde(rename = "type", default, deserialize_with = "null_default")]
    pub kind: String,
}

/// Deprecation of a type or image.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deprecation {
    /// When the deprecation was announced (RFC 3339).
    #[serde(default)]
    pub announced: Option<String>,
    /// After this point in time the resource can no longer be created (RFC 3339).
    #[serde(default)]
    pub unavailable_after: Option<String>,
}
