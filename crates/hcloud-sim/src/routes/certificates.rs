//! Certificates: uploaded (immediate) and managed (issued by an action).

use axum::response::Response;
use chrono::{Duration, Utc};
use serde_json::{Value, json};

use super::servers::is_hostname;
use super::{check_name, list_reply, not_unique, rename_and_relabel, selector_param};
use crate::app::{Req, no_content, reply};
use crate::error::{ApiError, ApiResult};
use crate::input::{parse_body, parse_body_or_empty};
use crate::model::{CertStatus, Certificate, Res};
use crate::render;
use crate::world::{Effect, Outcome, World};

/// A stable, fake SHA-256 style fingerprint of some text.
pub fn fingerprint(text: &str) -> String {
    let mut out = Vec::with_capacity(32);
    for seed in 0u64..4 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        out.extend_from_slice(&h.to_be_bytes());
    }
    out.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A fake PEM certificate for `domains`.
pub fn fake_pem(domains: &[String]) -> String {
    format!(
        "-----BEGIN CERTIFICATE-----\nc2ltdWxhdGVkIGNlcnRpZmljYXRlIGZvcjog{}\n-----END CERTIFICATE-----\n",
        domains.join(",").len()
    )
}

/// `GET /certificates` (`name`, `label_selector`, `type`, `sort`, pages).
pub fn list(w: &mut World, req: &Req) -> ApiResult<Response> {
    let sel = selector_param(req)?;
    let types = req.query.all("type");
    if let Some(bad) = types.iter().find(|t| !["uploaded", "managed"].contains(t)) {
        return Err(ApiError::field(
            "type",
            format!("invalid certificate type {bad:?}"),
        ));
    }
    list_reply(
        req,
        "certificates",
        sel.as_ref(),
        w.certificates.values(),
        |c| types.is_empty() || types.contains(&c.kind.as_str()),
        |c| render::certificate(w, c),
    )
}

fn cert(w: &World, id: i64) -> ApiResult<&Certificate> {
    w.certificates
        .get(&id)
        .ok_or_else(|| ApiError::not_found("certificate"))
}

/// `GET /certificates/{id}`.
pub fn get(w: &mut World, req: &Req) -> ApiResult<Response> {
    let c = cert(w, req.id(0)?)?;
    reply(200, json!({"certificate": render::certificate(w, c)}))
}

fn issue(w: &mut World, id: i64, command: &str, fail: Option<&str>) -> i64 {
    let on_success: Effect = Box::new(move |w: &mut World| {
        if let Some(c) = w.certificates.get_mut(&id) {
            let now = Utc::now();
            let pem = fake_pem(&c.domain_names);
            c.fingerprint = Some(fingerprint(&format!("{pem}{id}")));
            c.certificate = Some(pem);
            c.not_valid_before = Some(now);
            c.not_valid_after = Some(now + Duration::days(90));
            c.status = Some(CertStatus {
                issuance: "completed".to_string(),
                renewal: "scheduled".to_string(),
                error: None,
            });
        }
    });
    let on_error: Effect = Box::new(move |w: &mut World| {
        if let Some(c) = w.certificates.get_mut(&id) {
            c.status = Some(CertStatus {
                issuance: "failed".to_string(),
                renewal: "unavailable".to_string(),
                error: Some((ISSUANCE_ERROR.0.to_string(), ISSUANCE_ERROR.1.to_string())),
            });
        }
    });
    // Issuance takes the configured time and fails as configured (admin API), unless a
    // fault injection already decided.
    let domains = w
        .certificates
        .get(&id)
        .map(|c| c.domain_names.clone())
        .unwrap_or_default();
    let mut outcome = Outcome::injected(fail);
    outcome.delay = w.cert_issuance.delay;
    if outcome.fail.is_none() && w.cert_issuance.fails(&domains) {
        outcome.fail = Some((ISSUANCE_ERROR.0.to_string(), ISSUANCE_ERROR.1.to_string()));
    }
    w.start_action_with(
        command,
        vec![Res::Certificate(id)],
        outcome,
        Some(on_success),
        Some(on_error),
    )
}

/// Code and message of a failed issuance.
const ISSUANCE_ERROR: (&str, &str) = (
    "ca_dns_validation_failed",
    "Certificate Authority: DNS validation failed",
);

/// `POST /certificates`: uploaded ones answer `action: null`, managed ones an issuance action.
pub fn create(w: &mut World, req: &Req) -> ApiResult<Response> {
    let mut input = parse_body(&req.body)?;
    let name = input.req_str("name");
    check_name(&mut input, &name);
    let kind = input
        .opt_str("type")
        .unwrap_or_else(|| "uploaded".to_string());
    let labels = input.opt_labels("labels").unwrap_or_default();
    let mut certificate = None;
    let mut domains = Vec::new();
    match kind.as_str() {
        "uploaded" => {
            let c = input.req_str("certificate");
            let k = input.req_str("private_key");
            if let Some(c) = &c
                && !c.contains("-----BEGIN CERTIFICATE-----")
            {
                input.error("certificate", "Not a PEM encoded certificate.");
            }
            if let Some(k) = &k
                && !(k.contains("-----BEGIN") && k.contains("PRIVATE KEY-----"))
            {
                input.error("private_key", "Not a PEM encoded private key.");
            }
            certificate = c;
            domains = input.opt_str_list("domain_names").unwrap_or_default();
        }
        "managed" => {
            match input.opt_str_list("domain_names") {
                Some(d) if !d.is_empty() => domains = d,
                Some(_) => input.error("domain_names", "At least one domain name is required."),
                None => input.error("domain_names", "Missing data for required field."),
            }
            if let Some(bad) = domains
                .iter()
                .find(|d| !is_hostname(d.strip_prefix("*.").unwrap_or(d)))
            {
                let msg = format!("{bad} is not a valid domain name");
                input.error("domain_names", msg);
            }
        }
        _ => input.error("type", "Must be one of: uploaded, managed."),
    }
    input.finish()?;
    let name = name.ok_or_else(|| ApiError::field("name", "Missing data."))?;
    if w.certificates.values().any(|c| c.name == name) {
        return Err(not_unique("name"));
    }
    let id = w.cert_ids.take();
    let now = Utc::now();
    let managed = kind == "managed";
    let c = Certificate {
        id,
        name,
        labels,
        kind,
        fingerprint: certificate.as_deref().map(fingerprint),
        not_valid_before: certificate.as_ref().map(|_| now),
        not_valid_after: certificate.as_ref().map(|_| now + Duration::days(365)),
        certificate,
        domain_names: domains,
        created: now,
        status: managed.then(|| CertStatus {
            issuance: "pending".to_string(),
            renewal: "unavailable".to_string(),
            error: None,
        }),
    };
    w.certificates.insert(id, c);
    let action = if managed {
        let a = issue(w, id, "create_certificate", req.fail());
        render::action_by_id(w, a)
    } else {
        Value::Null
    };
    let c = cert(w, id)?;
    reply(
        201,
        json!({"certificate": render::certificate(w, c), "action": action}),
    )
}

/// `PUT /certificates/{id}`: name and labels.
pub fn update(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    cert(w, id)?;
    rename_and_relabel(&mut w.certificates, id, &req.body, check_name, |_| ())?;
    let c = cert(w, id)?;
    reply(200, json!({"certificate": render::certificate(w, c)}))
}

/// `DELETE /certificates/{id}` (204); services that used it drop it.
pub fn delete(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    cert(w, id)?;
    w.ensure_unlocked(Res::Certificate(id))?;
    w.certificates.remove(&id);
    for lb in w.load_balancers.values_mut() {
        for svc in &mut lb.services {
            if let Some(http) = svc.http.as_mut() {
                http.certificates.retain(|c| *c != id);
            }
        }
    }
    no_content()
}

/// `POST /certificates/{id}/actions/retry`.
pub fn action(w: &mut World, req: &Req) -> ApiResult<Response> {
    let id = req.id(0)?;
    let c = cert(w, id)?;
    let name = req.params.get(1).cloned().unwrap_or_default();
    if name != "retry" {
        return Err(ApiError::not_found("action"));
    }
    parse_body_or_empty(&req.body)?;
    let failed = c
        .status
        .as_ref()
        .is_some_and(|s| s.issuance == "failed" || s.renewal == "failed");
    if c.kind != "managed" || !failed {
        return Err(ApiError::new(
            "unsupported_error",
            "retry is only possible for managed certificates whose issuance failed",
        ));
    }
    w.ensure_unlocked(Res::Certificate(id))?;
    if let Some(c) = w.certificates.get_mut(&id) {
        c.status = Some(CertStatus {
            issuance: "pending".to_string(),
            renewal: "unavailable".to_string(),
            error: None,
        });
    }
    let a = issue(w, id, "issue_certificate", req.fail());
    reply(201, json!({"action": render::action_by_id(w, a)}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_stable_and_shaped() {
        let f = fingerprint("abc");
        assert_eq!(f, fingerprint("abc"));
        assert_ne!(f, fingerprint("abd"));
        assert_eq!(f.split(':').count(), 32);
    }
}
