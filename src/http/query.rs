//! Query strings, read by our own rules so that every mistake is answered
//! in our error shape, naming the parameter (axum's typed `Query` answers
//! with its own text).

use std::collections::HashMap;

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;

use super::error::ApiError;
use crate::domain::validate::FieldProblem;

/// The parameters of a request's query string.
pub struct QueryParams(pub HashMap<String, String>);

pub(super) fn invalid(name: &str, message: String) -> ApiError {
    ApiError::invalid(
        "invalid_query",
        format!("query parameter {name} {message}"),
        vec![FieldProblem {
            pointer: format!("/{name}"),
            message,
        }],
    )
}

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        QueryParams::parse(&parts.uri)
    }
}

impl QueryParams {
    /// The query of `uri`, for routes that must check the caller first (a
    /// hidden route answers nothing about its parameters).
    pub fn parse(uri: &axum::http::Uri) -> Result<QueryParams, ApiError> {
        let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(uri).map_err(|_| {
            ApiError::invalid(
                "invalid_query",
                "the query string is not form-encoded name=value pairs",
                Vec::new(),
            )
        })?;
        QueryParams::from_pairs(pairs)
    }

    /// Refuses a parameter given twice (`?after=5&after=0`): taking either
    /// value would be a guess, as it would be for a repeated JSON key.
    fn from_pairs(pairs: Vec<(String, String)>) -> Result<QueryParams, ApiError> {
        let mut map = HashMap::with_capacity(pairs.len());
        for (name, value) in pairs {
            if map.contains_key(&name) {
                return Err(invalid(&name, "is given more than once".into()));
            }
            map.insert(name, value);
        }
        Ok(QueryParams(map))
    }

    /// Refuses any parameter not in `known`.
    pub fn only(&self, known: &[&str]) -> Result<(), ApiError> {
        match self.0.keys().find(|k| !known.contains(&k.as_str())) {
            Some(unknown) if known.is_empty() => Err(invalid(
                unknown,
                "is not known here (this route takes no query parameters)".into(),
            )),
            Some(unknown) => Err(invalid(
                unknown,
                format!("is not known here (known: {})", known.join(", ")),
            )),
            None => Ok(()),
        }
    }

    /// A UUID parameter (`actorId`, `after`).
    pub fn uuid(&self, name: &str) -> Result<Option<uuid::Uuid>, ApiError> {
        self.0
            .get(name)
            .map(|v| uuid::Uuid::parse_str(v).map_err(|_| invalid(name, "must be a UUID".into())))
            .transpose()
    }

    /// A parameter from a closed set of names (an action, a reason); a
    /// value outside it is refused without being echoed.
    pub fn one_of<T>(
        &self,
        name: &str,
        what: &str,
        parse: impl FnOnce(&str) -> Option<T>,
    ) -> Result<Option<T>, ApiError> {
        self.0
            .get(name)
            .map(|v| parse(v).ok_or_else(|| invalid(name, format!("must name {what}"))))
            .transpose()
    }

    pub fn number(&self, name: &str) -> Result<Option<u64>, ApiError> {
        self.0
            .get(name)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| invalid(name, "must be a non-negative integer".into()))
            })
            .transpose()
    }

    /// A seq cursor: [`Self::number`] bounded by the gateway's
    /// `MAX_CURSOR` (the store binds seqs as signed 64-bit integers, so a
    /// larger one would wrap).
    pub fn cursor(&self, name: &str) -> Result<Option<u64>, ApiError> {
        use crate::protocol::params::MAX_CURSOR;
        match self.number(name)? {
            Some(n) if n > MAX_CURSOR => Err(invalid(
                name,
                format!("must be an integer from 0 to {MAX_CURSOR}"),
            )),
            other => Ok(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parameter_given_twice_is_refused_by_name() {
        let pair = |n: &str, v: &str| (n.to_string(), v.to_string());
        let e = QueryParams::from_pairs(vec![pair("after", "5"), pair("after", "0")])
            .err()
            .expect("refused");
        let e = format!("{e:?}");
        assert!(e.contains("/after") && e.contains("more than once"), "{e}");
        let q = QueryParams::from_pairs(vec![pair("after", "5"), pair("limit", "2")]).unwrap();
        assert_eq!(q.number("after").unwrap(), Some(5));
    }
}
