//! Query parameters of list endpoints.

use crate::models::{CertificateType, ServerStatus};
use crate::transport::Query;

/// Declares the parameters of a list endpoint: the filters and paging every list endpoint
/// takes (`name`, `label_selector`, `sort`, `page`, `per_page`), then the endpoint's own
/// filters, each with its query key (`pub status: Vec<ServerStatus> => "status"`; a filter
/// is a `Vec` or an `Option` of a string enum, one query pair per value). Generates the
/// constructors `name` and `label_selector` and `to_query`. A macro because the fields must
/// stay each struct's own public fields: callers build the parameters as struct literals.
macro_rules! list_params {
    (
        $(#[$meta:meta])*
        pub struct $params:ident {
            $( $(#[$filter_meta:meta])* pub $filter:ident: $ty:ty => $key:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        pub struct $params {
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
            $( $(#[$filter_meta])* pub $filter: $ty, )*
        }

        impl $params {
            /// Filter by exact name.
            pub fn name(name: impl Into<String>) -> Self {
                Self {
                    name: Some(name.into()),
                    ..Self::default()
                }
            }

            /// Filter by label selector.
            pub fn label_selector(selector: impl Into<String>) -> Self {
                Self {
                    label_selector: Some(selector.into()),
                    ..Self::default()
                }
            }

            pub(crate) fn to_query(&self) -> Query {
                let mut q = Query::new();
                q.extend(self.name.iter().map(|name| ("name", name.clone())));
                q.extend(
                    self.label_selector
                        .iter()
                        .map(|selector| ("label_selector", selector.clone())),
                );
                q.extend(self.sort.iter().map(|sort| ("sort", sort.clone())));
                q.extend(self.page.iter().map(|page| ("page", page.to_string())));
                q.extend(self.per_page.iter().map(|n| ("per_page", n.to_string())));
                $( q.extend(self.$filter.iter().map(|v| ($key, v.as_str().to_owned()))); )*
                q
            }
        }
    };
}

list_params! {
    /// Filters and paging shared by list endpoints.
    pub struct ListParams {}
}

list_params! {
    /// Parameters of `GET /servers`.
    pub struct ListServersParams {
        /// Only servers in one of these states (empty: all).
        pub status: Vec<ServerStatus> => "status",
    }
}

list_params! {
    /// Parameters of `GET /certificates`.
    pub struct ListCertificatesParams {
        /// Only certificates of this type.
        pub kind: Option<CertificateType> => "type",
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
