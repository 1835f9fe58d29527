//! `/certificates`.

use crate::Client;
use crate::api::params::ListCertificatesParams;
use crate::api::{Collection, named};
use crate::error::Error;
use crate::models::{
    Action, Certificate, CreateCertificateRequest, CreateCertificateResponse, UpdateRequest,
};
use crate::pagination::Page;

const CERTIFICATES: Collection = Collection {
    path: "/certificates",
    one: "certificate",
    many: "certificates",
};

/// TLS certificates.
#[derive(Debug, Clone, Copy)]
pub struct CertificatesApi<'a> {
    pub(crate) client: &'a Client,
}

impl CertificatesApi<'_> {
    /// `GET /certificates/{id}`.
    pub async fn get(&self, id: i64) -> Result<Certificate, Error> {
        CERTIFICATES.get(self.client, id).await
    }

    /// The certificate with exactly this name, if any.
    pub async fn get_by_name(&self, name: &str) -> Result<Option<Certificate>, Error> {
        let page = self.list(&ListCertificatesParams::name(name)).await?;
        Ok(named(page.items, name, |c| &c.name))
    }

    /// One page of `GET /certificates`.
    pub async fn list(&self, params: &ListCertificatesParams) -> Result<Page<Certificate>, Error> {
        CERTIFICATES.page(self.client, &params.to_query()).await
    }

    /// All certificates matching `params`.
    pub async fn list_all(
        &self,
        params: &ListCertificatesParams,
    ) -> Result<Vec<Certificate>, Error> {
        CERTIFICATES.all(self.client, &params.to_query()).await
    }

    /// `POST /certificates` (uploaded: no action; managed: the issuance action).
    pub async fn create(
        &self,
        request: &CreateCertificateRequest,
    ) -> Result<CreateCertificateResponse, Error> {
        self.client
            .transport()
            .post(CERTIFICATES.path, request)
            .await
    }

    /// `PUT /certificates/{id}` (name and/or labels).
    pub async fn update(&self, id: i64, request: &UpdateRequest) -> Result<Certificate, Error> {
        CERTIFICATES.update(self.client, id, request).await
    }

    /// `DELETE /certificates/{id}`.
    pub async fn delete(&self, id: i64) -> Result<(), Error> {
        let path = CERTIFICATES.item_path(id);
        self.client.transport().delete(&path).await.map(|_| ())
    }

    /// `POST /certificates/{id}/actions/retry`: retries a failed managed issuance.
    pub async fn retry(&self, id: i64) -> Result<Action, Error> {
        CERTIFICATES.empty_action(self.client, id, "retry").await
    }
}
