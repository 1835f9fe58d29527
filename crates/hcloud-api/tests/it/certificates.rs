//! Certificates against the simulator.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

use crate::common;

use std::collections::BTreeMap;

use hcloud_api::{
    CertificateType, CreateCertificateRequest, Error, ErrorCode, IssuanceStatus,
    ListCertificatesParams, UpdateRequest,
};
use hcloud_sim::Fault;

use common::setup;

fn self_signed(domain: &str) -> (String, String) {
    let key = rcgen::generate_simple_self_signed(vec![domain.to_owned()]).expect("certificate");
    (key.cert.pem(), key.signing_key.serialize_pem())
}

#[tokio::test]
async fn uploaded_certificate_lifecycle() {
    let (_sim, client) = setup().await;
    let (cert, key) = self_signed("example.com");
    let request = CreateCertificateRequest::uploaded("web", cert.clone(), key.clone())
        .with_labels(BTreeMap::from([("svc".to_owned(), "a".to_owned())]));
    let created = client
        .certificates()
        .create(&request)
        .await
        .expect("create");
    assert!(
        created.action.is_none(),
        "uploaded certificates have no action"
    );
    let c = created.certificate;
    assert_eq!(c.name, "web");
    assert_eq!(c.kind, Some(CertificateType::Uploaded));
    assert!(
        c.certificate
            .as_deref()
            .is_some_and(|p| p.contains("BEGIN CERTIFICATE"))
    );
    assert!(c.status.is_none());

    let got = client.certificates().get(c.id).await.expect("get");
    assert_eq!(got.id, c.id);
    assert_eq!(
        client
            .certificates()
            .get_by_name("web")
            .await
            .expect("name")
            .map(|c| c.id),
        Some(c.id)
    );
    let by_label = client
        .certificates()
        .list_all(&ListCertificatesParams::label_selector("svc=a"))
        .await
        .expect("label");
    assert_eq!(by_label.len(), 1);
    let by_type = client
        .certificates()
        .list(&ListCertificatesParams {
            kind: Some(CertificateType::Managed),
            ..Default::default()
        })
        .await
        .expect("type");
    assert!(by_type.items.is_empty());

    let updated = client
        .certificates()
        .update(
            c.id,
            &UpdateRequest {
                name: Some("web-2".to_owned()),
                labels: Some(BTreeMap::new()),
            },
        )
        .await
        .expect("update");
    assert_eq!(updated.name, "web-2");
    assert!(updated.labels.is_empty());

    let dup = client
        .certificates()
        .create(&CreateCertificateRequest::uploaded("web-2", cert, key))
        .await
        .expect_err("duplicate name");
    assert_eq!(dup.code(), Some(&ErrorCode::UniquenessError));

    client.certificates().delete(c.id).await.expect("delete");
    assert!(
        client
            .certificates()
            .get(c.id)
            .await
            .expect_err("gone")
            .is_not_found()
    );
}

#[tokio::test]
async fn managed_certificate_is_issued_by_an_action() {
    let (_sim, client) = setup().await;
    let created = client
        .certificates()
        .create(&CreateCertificateRequest::managed(
            "managed",
            vec!["example.com".to_owned(), "www.example.com".to_owned()],
        ))
        .await
        .expect("create");
    let action = created.action.expect("managed certificates have an action");
    assert_eq!(created.certificate.kind, Some(CertificateType::Managed));
    assert_eq!(
        created
            .certificate
            .status
            .as_ref()
            .and_then(|s| s.issuance.clone()),
        Some(IssuanceStatus::Pending)
    );
    client.actions().wait(&action).await.expect("issued");
    let issued = client
        .certificates()
        .get(created.certificate.id)
        .await
        .expect("get");
    assert_eq!(
        issued.status.as_ref().and_then(|s| s.issuance.clone()),
        Some(IssuanceStatus::Completed)
    );
    assert!(issued.certificate.is_some());
    assert_eq!(issued.domain_names.len(), 2);
}

#[tokio::test]
async fn failed_issuance_can_be_retried() {
    let (sim, client) = setup().await;
    sim.admin()
        .inject_fault(Fault::new("/certificates").method("POST").fail_action())
        .await
        .expect("fault");
    let created = client
        .certificates()
        .create(&CreateCertificateRequest::managed(
            "flaky",
            vec!["example.org".to_owned()],
        ))
        .await
        .expect("create");
    let action = created.action.expect("action");
    let err = client
        .actions()
        .wait(&action)
        .await
        .expect_err("issuance fails");
    assert!(
        matches!(err, Error::Action(ref a) if a.id == action.id),
        "{err:?}"
    );
    let failed = client
        .certificates()
        .get(created.certificate.id)
        .await
        .expect("get");
    assert_eq!(
        failed.status.as_ref().and_then(|s| s.issuance.clone()),
        Some(IssuanceStatus::Failed)
    );

    let retry = client.certificates().retry(failed.id).await.expect("retry");
    client
        .actions()
        .wait(&retry)
        .await
        .expect("issued on retry");
    let issued = client.certificates().get(failed.id).await.expect("get");
    assert_eq!(
        issued.status.as_ref().and_then(|s| s.issuance.clone()),
        Some(IssuanceStatus::Completed)
    );
}

#[tokio::test]
async fn invalid_upload_is_rejected() {
    let (_sim, client) = setup().await;
    let err = client
        .certificates()
        .create(&CreateCertificateRequest::uploaded(
            "bad",
            "not a pem",
            "not a key",
        ))
        .await
        .expect_err("invalid");
    assert_eq!(err.code(), Some(&ErrorCode::InvalidInput));
    assert!(!err.is_not_found());
}
