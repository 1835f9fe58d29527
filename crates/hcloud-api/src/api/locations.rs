//! `/locations`.

use crate::Client;
use crate::api::params::ListParams;
use crate::api::{Collection, named};
use crate::error::Error;
use crate::models::Location;

const LOCATIONS: Collection = Collection {
    path: "/locations",
    one: "location",
    many: "locations",
};

/// Locations. Listing them is a cheap way to check the token at start-up.
#[derive(Debug, Clone, Copy)]
pub struct LocationsApi<'a> {
    pub(crate) client: &'a Client,
}

impl LocationsApi<'_> {
    /// `GET /locations/{id}`.
    pub async fn get(&self, id: i64) -> Result<Location, Error> {
        LOCATIONS.get(self.client, id).await
    }

    /// The location with exactly this name (e.g. `fsn1`), if any.
    pub async fn get_by_name(&self, name: &str) -> Result<Option<Location>, Error> {
        let query = ListParams::name(name).to_query();
        let all = LOCATIONS.all(self.client, &query).await?;
        Ok(named(all, name, |l| &l.name))
    }

    /// All locations.
    pub async fn list(&self) -> Result<Vec<Location>, Error> {
        LOCATIONS.all(self.client, &Vec::new()).await
    }
}
