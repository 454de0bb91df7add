//! Issue 15's installations against a real hub on both backends (ADR
//! 0023): what registration installs, and the lifecycle.

mod registration;
