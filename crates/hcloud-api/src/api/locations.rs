//! `/locations`.

use crate::Client;
use crate::api::params::ListParams;
use crate::api::{get_one, named};
use crate::error::Error;
use crate::models::Location;
use crate::pagination::get_all;

/// Locations. Listing them is a cheap way to check the token at start-up.
#[derive(Debug, Clone, Copy)]
pub struct LocationsApi<'a> {
    pub(crate) client: &'a Client,
}

impl LocationsApi<'_> {
    /// `GET /locations/{id}`.
    pub async fn get(&self, id: i64) -> Result<Location, Error> {
        get_one(
            self.client.transport(),
            &format!("/locations/{id}"),
            "location",
        )
        .await
    }

    /// The location with exactly this name (e.g. `fsn1`), if any.
    pub async fn get_by_name(&self, name: &str) -> Result<Option<Location>, Error> {
        let query = ListParams::name(name).to_query();
        let all = get_all(self.client.transport(), "/locations", "locations", &query).await?;
        Ok(named(all, name, |i| &i.name))
    }

    /// All locations.
    pub async fn list(&self) -> Result<Vec<Location>, Error> {
        get_all(
            self.client.transport(),
            "/locations",
            "locations",
            &Vec::new(),
        )
        .await
    }
}
