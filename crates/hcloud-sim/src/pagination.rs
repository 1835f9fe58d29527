//! Query strings, sorting and pagination of list endpoints.

use std::cmp::Ordering;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};

/// Default and maximum page size.
pub const DEFAULT_PER_PAGE: usize = 25;
/// Largest page size the API serves; larger requests are clamped.
pub const MAX_PER_PAGE: usize = 50;

/// The decoded query string, keeping repeated keys.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Decodes a raw query string.
    pub fn parse(raw: Option<&str>) -> Query {
        let pairs = raw
            .map(|q| {
                url::form_urlencoded::parse(q.as_bytes())
                    .map(|(k, v)| (k.into_owned(), v.into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        Query { pairs }
    }

    /// First value of a key.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// All values of a key.
    pub fn all(&self, key: &str) -> Vec<&str> {
        self.pairs
            .iter()
            .filter(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .collect()
    }

    /// The query re-encoded with `page` (and `per_page`) replaced.
    pub fn with_page(&self, page: usize, per_page: usize) -> String {
        let mut ser = url::form_urlencoded::Serializer::new(String::new());
        for (k, v) in &self.pairs {
            if k != "page" && k != "per_page" {
                ser.append_pair(k, v);
            }
        }
        ser.append_pair("page", &page.to_string());
        ser.append_pair("per_page", &per_page.to_string());
        ser.finish()
    }
}

/// A page request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    /// 1-based page.
    pub page: usize,
    /// Items per page.
    pub per_page: usize,
}

/// Reads `page` / `per_page` from a query.
pub fn page_request(q: &Query) -> ApiResult<PageRequest> {
    let mut errors = Vec::new();
    let mut read = |key: &str, default: usize| match q.get(key) {
        None => default,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n >= 1 => n,
            _ => {
                errors.push((key.to_string(), "Must be a positive integer.".to_string()));
                default
            }
        },
    };
    let page = read("page", 1);
    let per_page = read("per_page", DEFAULT_PER_PAGE).min(MAX_PER_PAGE);
    if errors.is_empty() {
        Ok(PageRequest { page, per_page })
    } else {
        Err(ApiError::invalid_input(&errors))
    }
}

/// The pagination metadata of one page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageInfo {
    /// Current page.
    pub page: usize,
    /// Page size.
    pub per_page: usize,
    /// Previous page, if any.
    pub previous_page: Option<usize>,
    /// Next page, if any.
    pub next_page: Option<usize>,
    /// Last page (at least 1).
    pub last_page: usize,
    /// Total number of entries.
    pub total_entries: usize,
}

impl PageInfo {
    /// `meta` object of a list answer.
    pub fn meta(&self) -> Value {
        json!({"pagination": {
            "page": self.page,
            "per_page": self.per_page,
            "previous_page": self.previous_page,
            "next_page": self.next_page,
            "last_page": self.last_page,
            "total_entries": self.total_entries,
        }})
    }

    /// The `Link` header value, or `None` when there is a single page.
    pub fn link_header(&self, url_without_query: &str, q: &Query) -> Option<String> {
        let link = |page: usize, rel: &str| {
            format!(
                "<{url_without_query}?{}>; rel=\"{rel}\"",
                q.with_page(page, self.per_page)
            )
        };
        let mut parts = Vec::new();
        if let Some(p) = self.previous_page {
            parts.push(link(p, "prev"));
        }
        if let Some(n) = self.next_page {
            parts.push(link(n, "next"));
        }
        if self.last_page > 1 {
            parts.push(link(self.last_page, "last"));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

/// Cuts one page out of `items`.
pub fn paginate<T>(items: Vec<T>, req: PageRequest) -> (Vec<T>, PageInfo) {
    let total = items.len();
    let last_page = total.div_ceil(req.per_page).max(1);
    let start = (req.page - 1).saturating_mul(req.per_page);
    let page_items: Vec<T> = items.into_iter().skip(start).take(req.per_page).collect();
    let info = PageInfo {
        page: req.page,
        per_page: req.per_page,
        previous_page: (req.page > 1).then(|| (req.page - 1).min(last_page)),
        next_page: (req.page < last_page).then(|| req.page + 1),
        last_page,
        total_entries: total,
    };
    (page_items, info)
}

/// A sort key: `id`, `name` or `created`, ascending unless `:desc`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SortKey {
    field: SortField,
    desc: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SortField {
    Id,
    Name,
    Created,
}

/// What can be sorted.
pub trait Sortable {
    /// ID.
    fn sort_id(&self) -> i64;
    /// Name.
    fn sort_name(&self) -> &str;
    /// Creation time.
    fn sort_created(&self) -> DateTime<Utc>;
}

/// Reads the repeatable `sort` parameter.
pub fn sort_keys(q: &Query) -> ApiResult<Vec<SortKey>> {
    parse_sort(q, |field| match field {
        "id" => Some(SortField::Id),
        "name" => Some(SortField::Name),
        "created" => Some(SortField::Created),
        _ => None,
    })
    .map(|keys| {
        keys.into_iter()
            .map(|(field, desc)| SortKey { field, desc })
            .collect()
    })
}

/// Reads the repeatable `sort` parameter, `field` or `field:asc|desc`, with `field` naming the
/// collection's sort fields: (field, descending) in the order given. An unknown field or order
/// is an `invalid_input` naming `sort`.
pub fn parse_sort<F>(q: &Query, field: impl Fn(&str) -> Option<F>) -> ApiResult<Vec<(F, bool)>> {
    q.all("sort")
        .into_iter()
        .map(|s| {
            let (name, dir) = s.split_once(':').unwrap_or((s, "asc"));
            let Some(field) = field(name) else {
                return Err(ApiError::field("sort", format!("invalid sort field {s:?}")));
            };
            let desc = match dir {
                "asc" => false,
                "desc" => true,
                _ => return Err(ApiError::field("sort", format!("invalid sort order {s:?}"))),
            };
            Ok((field, desc))
        })
        .collect()
}

/// Sorts by the keys, then by ID.
pub fn sort_items<T: Sortable>(items: &mut [&T], keys: &[SortKey]) {
    items.sort_by(|a, b| {
        for key in keys {
            let ord = match key.field {
                SortField::Id => a.sort_id().cmp(&b.sort_id()),
                SortField::Name => a.sort_name().cmp(b.sort_name()),
                SortField::Created => a.sort_created().cmp(&b.sort_created()),
            };
            let ord = if key.desc { ord.reverse() } else { ord };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        a.sort_id().cmp(&b.sort_id())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages() {
        let items: Vec<u32> = (1..=60).collect();
        let (p, info) = paginate(
            items.clone(),
            PageRequest {
                page: 2,
                per_page: 25,
            },
        );
        assert_eq!(p.first(), Some(&26));
        assert_eq!(p.len(), 25);
        assert_eq!(info.previous_page, Some(1));
        assert_eq!(info.next_page, Some(3));
        assert_eq!(info.last_page, 3);
        assert_eq!(info.total_entries, 60);
        let (p, info) = paginate(
            items,
            PageRequest {
                page: 3,
                per_page: 25,
            },
        );
        assert_eq!(p.len(), 10);
        assert_eq!(info.next_page, None);
        let (p, info) = paginate(
            Vec::<u32>::new(),
            PageRequest {
                page: 1,
                per_page: 25,
            },
        );
        assert!(p.is_empty());
        assert_eq!(info.last_page, 1);
        assert_eq!(info.previous_page, None);
    }

    /// Found by fuzzing (`crates/hcloud-sim/tests/fuzz.rs`): `?page=<usize::MAX>` computed
    /// a next page past the last one and overflowed (a panic in debug builds).
    #[test]
    fn the_largest_page_number_is_an_empty_page() {
        let q = Query::parse(Some(&format!("page={}", usize::MAX)));
        let (items, info) = paginate(vec![1, 2, 3], page_request(&q).unwrap());
        assert!(items.is_empty());
        assert_eq!(info.next_page, None);
        assert_eq!(info.previous_page, Some(1));
    }

    #[test]
    fn per_page_is_clamped_and_validated() {
        let q = Query::parse(Some("per_page=500"));
        assert_eq!(page_request(&q).unwrap().per_page, 50);
        let q = Query::parse(Some("page=0"));
        assert_eq!(page_request(&q).unwrap_err().code, "invalid_input");
    }

    #[test]
    fn link_header_keeps_filters() {
        let q = Query::parse(Some("label_selector=a%3Db&page=1"));
        let (_, info) = paginate(
            (0..30).collect::<Vec<_>>(),
            PageRequest {
                page: 1,
                per_page: 25,
            },
        );
        let link = info.link_header("http://h/v1/servers", &q).unwrap();
        assert_eq!(
            link,
            "<http://h/v1/servers?label_selector=a%3Db&page=2&per_page=25>; rel=\"next\", \
             <http://h/v1/servers?label_selector=a%3Db&page=2&per_page=25>; rel=\"last\""
        );
    }
}
