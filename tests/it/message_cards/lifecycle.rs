//! The lifecycle's effects on cards (ADR 0027 §7).
