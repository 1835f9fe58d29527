//! Query parameters of list endpoints.

use crate::models::{CertificateType, ServerStatus};
use crate::transport::Query;

/// Filters and paging shared by list endpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListParams {
    /// Exact name.
    pub name: Option<String>,
    /// Label selector, e.g. `env=prod,!legacy`.
    pub label_selector: Option<String>,
    /// Sort keys, e.g. `id:asc` (repeatable).
    pub sort: Vec<String>,
    /// Page (1-based); ignored by `list_all`.
    pub page: Option<u32>,
    /// Entries per page (max 50); ignored by `list_all`.
    pub per_page: Option<u32>,
}

impl ListParams {
    /// Filter by exact name.
    pub fn name(name: impl Into<String>) -> Self {
        ListParams {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// Filter by label selector.
    pub fn label_selector(selector: impl Into<String>) -> Self {
        ListParams {
            label_selector: Some(selector.into()),
            ..Self::default()
        }
    }

    pub(crate) fn to_query(&self) -> Query {
        let mut q = Query::new();
        if let Some(name) = &self.name {
            q.push(("name", name.clone()));
        }
        if let Some(selector) = &self.label_selector {
            q.push(("label_selector", selector.clone()));
        }
        for sort in &self.sort {
            q.push(("sort", sort.clone()));
        }
        if let Some(page) = self.page {
            q.push(("page", page.to_string()));
        }
        if let Some(per_page) = self.per_page {
            q.push(("per_page", per_page.to_string()));
        }
        q
    }
}

/// Parameters of `GET /servers`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListServersParams {
    /// Exact name.
    pub name: Option<String>,
    /// Label selector.
    pub label_selector: Option<String>,
    /// Only servers in one of these states (empty: all).
    pub status: Vec<ServerStatus>,
    /// Sort keys (repeatable).
    pub sort: Vec<String>,
    /// Page (1-based); ignored by `list_all`.
    pub page: Option<u32>,
    /// Entries per page (max 50); ignored by `list_all`.
    pub per_page: Option<u32>,
}

impl ListServersParams {
    /// Filter by exact name.
    pub fn name(name: impl Into<String>) -> Self {
        ListServersParams {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// Filter by label selector.
    pub fn label_selector(selector: impl Into<String>) -> Self {
        ListServersParams {
            label_selector: Some(selector.into()),
            ..Self::default()
        }
    }

    pub(crate) fn to_query(&self) -> Query {
        let mut q = ListParams {
            name: self.name.clone(),
            label_selector: self.label_selector.clone(),
            sort: self.sort.clone(),
            page: self.page,
            per_page: self.per_page,
        }
        .to_query();
        for status in &self.status {
            q.push(("status", status.as_str().to_owned()));
        }
        q
    }
}

/// Parameters of `GET /certificates`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListCertificatesParams {
    /// Exact name.
    pub name: Option<String>,
    /// Label selector.
    pub label_selector: Option<String>,
    /// Only certificates of this type.
    pub kind: Option<CertificateType>,
    /// Sort keys (repeatable).
    pub sort: Vec<String>,
    /// Page (1-based); ignored by `list_all`.
    pub page: Option<u32>,
    /// Entries per page (max 50); ignored by `list_all`.
    pub per_page: Option<u32>,
}

impl ListCertificatesParams {
    /// Filter by exact name.
    pub fn name(name: impl Into<String>) -> Self {
        ListCertificatesParams {
            name: Some(name.into()),
            ..Self::default()
        }
    }

    /// Filter by label selector.
    pub fn label_selector(selector: impl Into<String>) -> Self {
        ListCertificatesParams {
            label_selector: Some(selector.into()),
            ..Self::default()
        }
    }

    pub(crate) fn to_query(&self) -> Query {
        let mut q = ListParams {
            name: self.name.clone(),
            label_selector: self.label_selector.clone(),
            sort: self.sort.clone(),
            page: self.page,
            per_page: self.per_page,
        }
        .to_query();
        if let Some(kind) = &self.kind {
            q.push(("type", kind.as_str().to_owned()));
        }
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_queries() {
        let q = ListServersParams {
            name: Some("n".into()),
            label_selector: Some("a=b".into()),
            status: vec![ServerStatus::Running, ServerStatus::Off],
            page: Some(2),
            per_page: Some(50),
            ..Default::default()
        }
        .to_query();
        assert_eq!(
            q,
            vec![
                ("name", "n".to_owned()),
                ("label_selector", "a=b".to_owned()),
                ("page", "2".to_owned()),
                ("per_page", "50".to_owned()),
                ("status", "running".to_owned()),
                ("status", "off".to_owned()),
            ]
        );
        let c = ListCertificatesParams {
            kind: Some(CertificateType::Managed),
            ..Default::default()
        }
        .to_query();
        assert_eq!(c, vec![("type", "managed".to_owned())]);
    }
}
