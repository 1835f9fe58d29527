//! `/servers`.

use crate::Client;
use crate::api::params::ListServersParams;
use crate::api::{Collection, named};
use crate::error::Error;
use crate::models::Server;
use crate::pagination::Page;

const SERVERS: Collection = Collection {
    path: "/servers",
    one: "server",
    many: "servers",
};

/// Servers.
#[derive(Debug, Clone, Copy)]
pub struct ServersApi<'a> {
    pub(crate) client: &'a Client,
}

impl ServersApi<'_> {
    /// `GET /servers/{id}`; a missing server is an error with `is_not_found()`.
    pub async fn get(&self, id: i64) -> Result<Server, Error> {
        SERVERS.get(self.client, id).await
    }

    /// The server with exactly this name, if any (one request).
    pub async fn get_by_name(&self, name: &str) -> Result<Option<Server>, Error> {
        let page = self.list(&ListServersParams::name(name)).await?;
        Ok(named(page.items, name, |s| &s.name))
    }

    /// One page of `GET /servers`.
    pub async fn list(&self, params: &ListServersParams) -> Result<Page<Server>, Error> {
        SERVERS.page(self.client, &params.to_query()).await
    }

    /// All servers matching `params`, 50 per request.
    pub async fn list_all(&self, params: &ListServersParams) -> Result<Vec<Server>, Error> {
        self.list_all_map(params, |server| server).await
    }

    /// All servers matching `params`, 50 per request, each passed through `map` as its page
    /// arrives (e.g. to keep only some fields of a large listing).
    pub async fn list_all_map<U>(
        &self,
        params: &ListServersParams,
        map: impl FnMut(Server) -> U + Send,
    ) -> Result<Vec<U>, Error> {
        SERVERS.all_map(self.client, &params.to_query(), map).await
    }
}
