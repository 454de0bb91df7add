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

fn invalid(name: &str, message: String) -> ApiError {
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
        Query::<HashMap<String, String>>::try_from_uri(&parts.uri)
            .map(|Query(map)| QueryParams(map))
            .map_err(|_| {
                ApiError::invalid(
                    "invalid_query",
                    "the query string is not form-encoded name=value pairs",
                    Vec::new(),
                )
            })
    }
}

impl QueryParams {
    /// Refuses any parameter not in `known`.
    pub fn only(&self, known: &[&str]) -> Result<(), ApiError> {
        match self.0.keys().find(|k| !known.contains(&k.as_str())) {
            Some(unknown) => Err(invalid(
                unknown,
                format!("is not known here (known: {})", known.join(", ")),
            )),
            None => Ok(()),
        }
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
}
