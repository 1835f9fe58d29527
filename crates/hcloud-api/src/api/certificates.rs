//! `/certificates`.

use crate::Client;
use crate::api::params::ListCertificatesParams;
use crate::api::{ActionAnswer, decode_member, get_one, named};
use crate::error::Error;
use crate::models::{
    Action, Certificate, CreateCertificateRequest, CreateCertificateResponse, UpdateRequest,
};
use crate::pagination::{Page, get_all, get_page};

/// TLS certificates.
#[derive(Debug, Clone, Copy)]
pub struct CertificatesApi<'a> {
    pub(crate) client: &'a Client,
}

impl CertificatesApi<'_> {
    /// `GET /certificates/{id}`.
    pub async fn get(&self, id: i64) -> Result<Certificate, Error> {
        get_one(
            self.client.transport(),
            &format!("/certificates/{id}"),
            "certificate",
        )
        .await
    }

    /// The certificate with exactly this name, if any.
    pub async fn get_by_name(&self, name: &str) -> Result<Option<Certificate>, Error> {
        let items = self.list(&ListCertificatesParams::name(name)).await?.items;
        Ok(named(items, name, |c| &c.name))
    }

    /// One page of `GET /certificates`.
    pub async fn list(&self, params: &ListCertificatesParams) -> Result<Page<Certificate>, Error> {
        get_page(
            self.client.transport(),
            "/certificates",
            "certificates",
            &params.to_query(),
        )
        .await
    }

    /// All certificates matching `params`.
    pub async fn list_all(
        &self,
        params: &ListCertificatesParams,
    ) -> Result<Vec<Certificate>, Error> {
        get_all(
            self.client.transport(),
            "/certificates",
            "certificates",
            &params.to_query(),
        )
        .await
    }

    /// `POST /certificates` (uploaded: no action; managed: the issuance action).
    pub async fn create(
        &self,
        request: &CreateCertificateRequest,
    ) -> Result<CreateCertificateResponse, Error> {
        self.client.transport().post("/certificates", request).await
    }

    /// `PUT /certificates/{id}` (name and/or labels).
    pub async fn update(&self, id: i64, request: &UpdateRequest) -> Result<Certificate, Error> {
        let path = format!("/certificates/{id}");
        let (status, body) = self.client.transport().put_raw(&path, request).await?;
        decode_member("PUT", &path, status, &body, "certificate")
    }

    /// `DELETE /certificates/{id}`.
    pub async fn delete(&self, id: i64) -> Result<(), Error> {
        self.client
            .transport()
            .delete(&format!("/certificates/{id}"))
            .await
            .map(|_| ())
    }

    /// `POST /certificates/{id}/actions/retry`: retries a failed managed issuance.
    pub async fn retry(&self, id: i64) -> Result<Action, Error> {
        let path = format!("/certificates/{id}/actions/retry");
        let answer: ActionAnswer = self.client.transport().post_empty(&path).await?;
        Ok(answer.action)
    }
}
