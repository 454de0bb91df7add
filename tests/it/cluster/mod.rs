//! Several hub nodes on one PostgreSQL with NATS between them (issue 19,
//! docs/adr/0034-cluster-mode.md): real `switchboard serve` processes, a
//! throwaway `nats-server` and a throwaway PostgreSQL.

pub mod harness;
mod hook_nodes;

mod claims;
mod console;
mod control;
mod delivery;
mod drain;
mod hooks;
mod identity;
mod nats_security;
mod nats_tls;
mod node_loss;
mod retention;
mod startup;
mod typing;
