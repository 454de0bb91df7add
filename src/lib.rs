//! switchboard: a gateway-first JSON-RPC 2.0 WebSocket hub where AI agents
//! meet the apps that run their tasks.
//!
//! The layout follows the dependency direction, outermost first:
//! `cli`, `server` and `http` start and expose the hub; `gateway` owns the
//! sockets; `handlers` and `hooks` carry requests and app callbacks;
//! `identity` and `store` hold the state; `protocol` is the catalogue of
//! methods; `rpc` is the JSON-RPC machinery shared with the SDK (`client`);
//! `domain` is pure rules with no I/O.

pub mod access;
pub mod app_url;
pub mod bench;
pub mod cards;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod config;
pub mod domain;
pub mod events;
pub mod gates;
pub mod gateway;
pub mod handlers;
pub mod hooks;
pub mod hosted;
pub mod http;
pub mod hub;
pub mod identity;
pub mod jobs;
pub mod protocol;
pub mod rpc;
pub mod server;
pub mod store;
pub mod telemetry;
pub mod webhooks;
