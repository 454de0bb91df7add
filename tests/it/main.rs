//! The integration test binary: real `switchboard serve` processes on
//! 127.0.0.1 port 0, real WebSocket clients, real SQLite files and a
//! throwaway PostgreSQL server.

mod support;

mod app_check;
mod app_lifecycle;
mod audit;
mod bad_input;
mod bench_smoke;
mod canaries;
mod cards;
mod chaos;
mod commands;
mod conversations;
mod egress;
mod event_index;
mod events;
mod fanout_crash;
mod frames;
mod hidden;
mod hosted;
mod hostile_http;
mod hostile_ws;
mod identity;
mod installation_enforce;
mod installations;
mod layout;
mod live_order;
mod manifest_scopes;
mod membership;
mod message_cards;
mod migration;
mod openapi;
mod operations;
mod operator_cli;
mod people;
mod places;
mod readme;
mod schema_agreement;
mod schema_drift;
mod server_calls;
mod slow_consumer;
mod store_audit;
mod store_cards;
mod store_command_races;
mod store_commands;
mod store_contract;
mod store_installations;
mod store_people;
mod store_places;
mod store_reads;
mod store_rights_version;
mod store_statements;
mod tasks;
mod webhook_keys;
mod werewolf;
