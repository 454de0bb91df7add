//! Several hub nodes on one PostgreSQL with NATS between them (issue 19,
//! docs/adr/0034-cluster-mode.md): real `switchboard serve` processes, a
//! throwaway `nats-server` and a throwaway PostgreSQL.

pub mod harness;
mod hook_nodes;

mod claims;
mod control;
mod delivery;
mod drain;
mod hooks;
mod identity;
mod nats_security;
mod node_loss;
mod retention;
mod startup;
