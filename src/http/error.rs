//! REST error bodies: `{"error": {"code", "message", "details"?}}`, where
//! `code` is a stable snake_case string and `details` lists JSON pointers.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::domain::validate::FieldProblem;

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Vec<FieldProblem>,
    /// More members of the error object, merged in.
    pub extra: Option<Box<serde_json::Value>>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            details: Vec::new(),
            extra: None,
        }
    }

    pub fn invalid(
        code: &'static str,
        message: impl Into<String>,
        details: Vec<FieldProblem>,
    ) -> Self {
        ApiError {
            details,
            ..ApiError::new(StatusCode::BAD_REQUEST, code, message)
        }
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message)
    }

    pub fn internal() -> Self {
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error",
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut error = json!({ "code": self.code, "message": self.message });
        if !self.details.is_empty() {
            error["details"] = serde_json::to_value(&self.details).expect("details serialize");
        }
        if let Some(serde_json::Value::Object(extra)) = self.extra.map(|b| *b) {
            for (k, v) in extra {
                error[k] = v;
            }
        }
        let mut response = (self.status, Json(json!({ "error": error }))).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                "Bearer".parse().expect("static header"),
            );
        }
        response
    }
}

/// A principal's refusal (`access::reject`) over REST (ADR 0020 §3): 404
/// `not_found`, 403 `forbidden` with its `reason`, 400 naming the field.
impl From<crate::access::Refused> for ApiError {
    fn from(refused: crate::access::Refused) -> Self {
        use crate::access::{RefusalKind, Refused};
        let refusal = match refused {
            Refused::Denied(refusal) => refusal,
            Refused::Store(err) => {
                tracing::error!(error = %err, "store failure");
                return ApiError::internal();
            }
        };
        match refusal.kind {
            RefusalKind::NotFound => {
                ApiError::new(StatusCode::NOT_FOUND, "not_found", refusal.message)
            }
            RefusalKind::Forbidden => ApiError {
                extra: Some(Box::new(json!({ "reason": refusal.reason.as_str() }))),
                ..ApiError::new(StatusCode::FORBIDDEN, "forbidden", refusal.message)
            },
            RefusalKind::Conflict => ApiError {
                extra: Some(Box::new(json!({ "reason": refusal.reason.as_str() }))),
                ..ApiError::new(
                    StatusCode::CONFLICT,
                    crate::access::COMPONENT_USED,
                    refusal.message,
                )
            },
            RefusalKind::InvalidParams { field } => ApiError::invalid(
                "invalid_request",
                refusal.message.clone(),
                vec![FieldProblem {
                    pointer: format!("/{field}"),
                    message: refusal.message.clone(),
                }],
            ),
        }
    }
}

impl From<crate::identity::IdentityError> for ApiError {
    fn from(e: crate::identity::IdentityError) -> Self {
        use crate::identity::IdentityError as E;
        match e {
            E::BadKey => ApiError::unauthorized("invalid or revoked key"),
            E::Invalid(details) => {
                ApiError::invalid("invalid_request", "the request has invalid fields", details)
            }
            E::NotFound => ApiError::not_found("not found"),
            E::OwnerRefused => ApiError::invalid(
                "invalid_request",
                "the request has invalid fields",
                vec![FieldProblem {
                    pointer: "/ownerId".into(),
                    message: "names no active person".into(),
                }],
            ),
            E::IdempotencyTaken => ApiError::new(
                axum::http::StatusCode::CONFLICT,
                "idempotency_conflict",
                "the Idempotency-Key was used by another request",
            ),
            E::Store(err) => {
                tracing::error!(error = %err, "store failure");
                ApiError::internal()
            }
        }
    }
}
