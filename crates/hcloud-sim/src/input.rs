//! Reading request bodies field by field, collecting `invalid_input` details instead of failing
//! on the first problem.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::{ApiError, ApiResult};
use crate::label_selector::{is_label_key, is_label_value};

const MISSING: &str = "Missing data for required field.";

/// An ID or a name, as many request fields accept either.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdOrName {
    /// Numeric ID.
    Id(i64),
    /// Name.
    Name(String),
}

impl IdOrName {
    /// A whole number reads as an ID, anything else as a name.
    pub fn parse(s: &str) -> IdOrName {
        match s.parse::<i64>() {
            Ok(id) => IdOrName::Id(id),
            Err(_) => IdOrName::Name(s.to_string()),
        }
    }
}

/// Sets `field` to `value` when one was given (a field a request or seed may leave out).
pub fn overwrite<T>(field: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *field = v;
    }
}

/// A JSON object being read; errors accumulate in a shared list.
#[derive(Debug)]
pub struct Input {
    obj: Map<String, Value>,
    prefix: String,
    errors: Vec<(String, String)>,
}

/// Parses a request body that must be a JSON object.
pub fn parse_body(body: &[u8]) -> ApiResult<Input> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::new("json_error", format!("invalid JSON in request body: {e}")))?;
    match value {
        Value::Object(obj) => Ok(Input::over(obj, String::new())),
        _ => Err(ApiError::new(
            "json_error",
            "request body must be a JSON object",
        )),
    }
}

/// Like [`parse_body`], but an empty body reads as `{}`.
pub fn parse_body_or_empty(body: &[u8]) -> ApiResult<Input> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Input::over(Map::new(), String::new()));
    }
    parse_body(body)
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

impl Input {
    fn over(obj: Map<String, Value>, prefix: String) -> Input {
        Input {
            obj,
            prefix,
            errors: Vec::new(),
        }
    }

    /// An input over an object value (used for nested objects and array items).
    pub fn from_value(value: &Value, prefix: String) -> Result<Input, (String, String)> {
        match value {
            Value::Object(obj) => Ok(Input::over(obj.clone(), prefix)),
            other => Err((
                prefix,
                format!("Not a valid object, got {}.", type_name(other)),
            )),
        }
    }

    fn name(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.prefix)
        }
    }

    /// Records an error for a field.
    pub fn error(&mut self, key: &str, message: impl Into<String>) {
        let name = self.name(key);
        self.errors.push((name, message.into()));
    }

    /// Whether a key is present and not null.
    pub fn has(&self, key: &str) -> bool {
        self.obj.get(key).is_some_and(|v| !v.is_null())
    }

    /// Raw value.
    pub fn raw(&self, key: &str) -> Option<&Value> {
        self.obj.get(key).filter(|v| !v.is_null())
    }

    fn wrong(&mut self, key: &str, expected: &str) {
        let got = self.obj.get(key).map(type_name).unwrap_or("nothing");
        self.error(key, format!("Not a valid {expected}, got {got}."));
    }

    /// An optional field, read with `pick`; a value `pick` does not take is an error saying
    /// that `expected` was wanted.
    fn typed<T>(
        &mut self,
        key: &str,
        expected: &str,
        pick: impl FnOnce(&Value) -> Option<T>,
    ) -> Option<T> {
        let got = pick(self.raw(key)?);
        if got.is_none() {
            self.wrong(key, expected);
        }
        got
    }

    /// An optional list whose items are read with `item`; an item it does not take is an
    /// error saying that a list of `what` was wanted.
    fn list_of<T>(
        &mut self,
        key: &str,
        what: &str,
        item: impl Fn(&Value) -> Option<T>,
    ) -> Option<Vec<T>> {
        let list: Option<Vec<T>> = self.typed(key, "list", |v| {
            v.as_array().map(|items| items.iter().map(&item).collect())
        })?;
        if list.is_none() {
            self.error(key, format!("Not a valid list of {what}."));
        }
        list
    }

    /// A field that must be present and not null, then read with `read`.
    fn required<T>(
        &mut self,
        key: &str,
        read: impl FnOnce(&mut Self, &str) -> Option<T>,
    ) -> Option<T> {
        if !self.has(key) {
            self.error(key, MISSING);
            return None;
        }
        read(self, key)
    }

    /// Required string.
    pub fn req_str(&mut self, key: &str) -> Option<String> {
        self.required(key, Self::opt_str)
    }

    /// Optional string.
    pub fn opt_str(&mut self, key: &str) -> Option<String> {
        self.typed(key, "string", |v| v.as_str().map(str::to_string))
    }

    /// Optional nullable string: `Some(None)` for an explicit null.
    pub fn opt_nullable_str(&mut self, key: &str) -> Option<Option<String>> {
        match self.obj.get(key) {
            None => None,
            Some(Value::Null) => Some(None),
            Some(Value::String(s)) => Some(Some(s.clone())),
            Some(_) => {
                self.wrong(key, "string");
                None
            }
        }
    }

    /// Optional boolean.
    pub fn opt_bool(&mut self, key: &str) -> Option<bool> {
        self.typed(key, "boolean", Value::as_bool)
    }

    /// Required boolean.
    pub fn req_bool(&mut self, key: &str) -> Option<bool> {
        self.required(key, Self::opt_bool)
    }

    /// Optional integer.
    pub fn opt_i64(&mut self, key: &str) -> Option<i64> {
        self.typed(key, "integer", Value::as_i64)
    }

    /// Required integer.
    pub fn req_i64(&mut self, key: &str) -> Option<i64> {
        self.required(key, Self::opt_i64)
    }

    /// Optional integer within a range.
    pub fn opt_int_in(&mut self, key: &str, min: i64, max: i64) -> Option<i64> {
        let v = self.opt_i64(key)?;
        if v < min || v > max {
            self.error(key, format!("Must be between {min} and {max}."));
            return None;
        }
        Some(v)
    }

    /// Required port number (1..=65535).
    pub fn req_port(&mut self, key: &str) -> Option<u16> {
        self.required(key, Self::opt_port)
    }

    /// Optional port number (1..=65535).
    pub fn opt_port(&mut self, key: &str) -> Option<u16> {
        self.opt_int_in(key, 1, 65535)
            .and_then(|v| u16::try_from(v).ok())
    }

    /// Optional ID or name.
    pub fn opt_id_or_name(&mut self, key: &str) -> Option<IdOrName> {
        self.typed(key, "ID or name", |v| match v {
            Value::String(s) => Some(IdOrName::parse(s)),
            _ => v.as_i64().map(IdOrName::Id),
        })
    }

    /// Required ID or name.
    pub fn req_id_or_name(&mut self, key: &str) -> Option<IdOrName> {
        self.required(key, Self::opt_id_or_name)
    }

    /// Optional array of integers.
    pub fn opt_i64_list(&mut self, key: &str) -> Option<Vec<i64>> {
        self.list_of(key, "integers", Value::as_i64)
    }

    /// Length of an optional array of anything (0 when absent).
    pub fn opt_raw_list_len(&mut self, key: &str) -> usize {
        match self.raw(key) {
            None => 0,
            Some(Value::Array(items)) => items.len(),
            Some(_) => {
                self.wrong(key, "list");
                0
            }
        }
    }

    /// Optional array of strings.
    pub fn opt_str_list(&mut self, key: &str) -> Option<Vec<String>> {
        self.list_of(key, "strings", |v| v.as_str().map(str::to_string))
    }

    /// Optional label map, validated.
    pub fn opt_labels(&mut self, key: &str) -> Option<BTreeMap<String, String>> {
        let raw = self.raw(key).cloned()?;
        let Value::Object(map) = raw else {
            self.wrong(key, "object");
            return None;
        };
        let mut labels = BTreeMap::new();
        let mut ok = true;
        for (k, v) in map {
            let Some(v) = v.as_str() else {
                self.error(key, format!("label {k:?}: value must be a string"));
                ok = false;
                continue;
            };
            if !is_label_key(&k) {
                self.error(key, format!("invalid label key {k:?}"));
                ok = false;
            } else if !is_label_value(v) {
                self.error(key, format!("invalid label value {v:?} for key {k:?}"));
                ok = false;
            }
            labels.insert(k, v.to_string());
        }
        ok.then_some(labels)
    }

    /// Optional nested object.
    pub fn opt_obj(&mut self, key: &str) -> Option<Input> {
        let raw = self.raw(key)?.clone();
        match Input::from_value(&raw, self.name(key)) {
            Ok(i) => Some(i),
            Err((n, m)) => {
                self.errors.push((n, m));
                None
            }
        }
    }

    /// Optional array of objects.
    pub fn opt_obj_list(&mut self, key: &str) -> Option<Vec<Input>> {
        let raw = self.raw(key)?.clone();
        let Value::Array(items) = raw else {
            self.wrong(key, "list");
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            match Input::from_value(item, format!("{}[{i}]", self.name(key))) {
                Ok(input) => out.push(input),
                Err((n, m)) => self.errors.push((n, m)),
            }
        }
        Some(out)
    }

    /// Takes over the errors of a nested input.
    pub fn absorb(&mut self, nested: Input) {
        self.errors.extend(nested.errors);
    }

    /// Whether errors were recorded so far.
    pub fn has_errors(&self) -> bool {
        !self.errors.is_empty()
    }

    /// `Err(invalid_input)` if any field was wrong.
    pub fn finish(&self) -> ApiResult<()> {
        if self.errors.is_empty() {
            Ok(())
        } else {
            Err(ApiError::invalid_input(&self.errors))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collects_field_errors() {
        let mut i =
            parse_body(br#"{"name": 5, "labels": {"bad key": "x"}, "n": {"a": "x"}}"#).unwrap();
        assert_eq!(i.req_str("name"), None);
        assert_eq!(i.req_str("server_type"), None);
        assert_eq!(i.opt_labels("labels"), None);
        let mut n = i.opt_obj("n").unwrap();
        assert_eq!(n.opt_bool("a"), None);
        i.absorb(n);
        let err = i.finish().unwrap_err();
        assert_eq!(err.code, "invalid_input");
        let names: Vec<&str> = err.details["fields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["name", "server_type", "labels", "n.a"]);
    }

    #[test]
    fn json_errors() {
        assert_eq!(parse_body(b"{").unwrap_err().code, "json_error");
        assert_eq!(parse_body(b"[]").unwrap_err().code, "json_error");
        assert!(parse_body_or_empty(b"").is_ok());
    }
}
