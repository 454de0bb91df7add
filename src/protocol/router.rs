//! Dispatch from the catalogue: a method name finds its catalogue entry and
//! its typed handler. Params are decoded (and refused with the field named)
//! before a handler runs; handlers see only typed values.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::{catalogue, params, Direction, Method, MethodSpec, SpecKind};
use crate::rpc::RpcError;

type Handler<C> =
    Arc<dyn Fn(C, Option<Value>) -> BoxFuture<'static, Result<Value, RpcError>> + Send + Sync>;

pub struct Route<C> {
    pub spec: MethodSpec,
    handler: Handler<C>,
}

impl<C> Route<C> {
    pub fn call(
        &self,
        ctx: C,
        params: Option<Value>,
    ) -> BoxFuture<'static, Result<Value, RpcError>> {
        (self.handler)(ctx, params)
    }
}

pub struct Router<C> {
    routes: HashMap<&'static str, Route<C>>,
}

impl<C: Send + 'static> Default for Router<C> {
    fn default() -> Self {
        Self::new()
    }
}

impl<C: Send + 'static> Router<C> {
    pub fn new() -> Self {
        Router {
            routes: HashMap::new(),
        }
    }

    /// Registers the handler of a peer-to-hub method of the catalogue.
    pub fn register<M, F, Fut>(mut self, handler: F) -> Self
    where
        M: Method,
        F: Fn(C, M::Params) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<M::Result, RpcError>> + Send + 'static,
    {
        let spec = super::find(M::NAME)
            .unwrap_or_else(|| panic!("{} is not in the protocol catalogue", M::NAME));
        assert_eq!(
            spec.direction,
            Direction::ToHub,
            "{} is not peer-to-hub",
            M::NAME
        );
        let handler = Arc::new(handler);
        let erased: Handler<C> = Arc::new(move |ctx: C, raw: Option<Value>| {
            let handler = handler.clone();
            Box::pin(async move {
                let params: M::Params = params::decode(raw)?;
                let result = handler(ctx, params).await?;
                serde_json::to_value(result).map_err(|_| RpcError::internal())
            })
        });
        let previous = self.routes.insert(
            M::NAME,
            Route {
                spec,
                handler: erased,
            },
        );
        assert!(previous.is_none(), "{} registered twice", M::NAME);
        self
    }

    /// Registers one handler under an agent method and its `person/...`
    /// twin (ADR 0020 §1): the twin has the same params and result by
    /// type, so one body serves both audiences.
    pub fn register_twins<A, P, F, Fut>(self, handler: F) -> Self
    where
        A: Method,
        P: Method<Params = A::Params, Result = A::Result>,
        F: Fn(C, A::Params) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<A::Result, RpcError>> + Send + 'static,
    {
        let handler = Arc::new(handler);
        let twin = handler.clone();
        self.register::<A, _, _>(move |c, p| handler(c, p))
            .register::<P, _, _>(move |c, p| twin(c, p))
    }

    /// Fails when a peer-to-hub request of the catalogue has no handler, so a
    /// method cannot be declared and forgotten.
    pub fn check_complete(&self) -> Result<(), String> {
        let missing: Vec<&str> = catalogue()
            .into_iter()
            .filter(|s| s.direction == Direction::ToHub && s.kind == SpecKind::Request)
            .filter(|s| !self.routes.contains_key(s.name))
            .map(|s| s.name)
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("methods without a handler: {}", missing.join(", ")))
        }
    }

    pub fn route(&self, method: &str) -> Option<&Route<C>> {
        self.routes.get(method)
    }
}
