//! What the catalogue tells about the app audience beyond its entries: the
//! name a gate is called by under a manifest's `callbackNames` (ADR 0023
//! §8), and the event types a manifest's `eventSubscriptions` may name.

use super::{catalogue, Caller, Direction, Method, SpecKind};
use crate::domain::manifest::CallbackNames;

/// The name the hub calls an app's method by under its manifest's
/// `callbackNames`: the seed-002 alias where the method has one, the
/// catalogue's name otherwise. Metrics and logs keep `M::NAME`.
pub fn callback_name<M: Method>(names: CallbackNames) -> &'static str {
    match names {
        CallbackNames::Current => M::NAME,
        CallbackNames::MoltzapV1 => M::MOLTZAP_V1_NAME.unwrap_or(M::NAME),
    }
}

/// The event types the app audience receives: the catalogue's hub-to-app
/// notifications, what a manifest's `eventSubscriptions` may name.
pub fn app_event_types() -> Vec<&'static str> {
    catalogue()
        .into_iter()
        .filter(|s| {
            matches!(s.kind, SpecKind::Notification { .. })
                && s.direction == Direction::FromHub
                && s.caller == Caller::App
        })
        .map(|s| s.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::{find, tasks};
    use super::*;

    /// ADR 0023 §8: only the message and dispatch gates have a seed-002
    /// name; task_create keeps its own under both; no alias collides with
    /// a catalogue name.
    #[test]
    fn moltzap_v1_names_are_set_on_the_two_gates_only() {
        let aliased: Vec<(&str, &str)> = catalogue()
            .iter()
            .filter_map(|s| s.moltzap_v1_name.map(|a| (s.name, a)))
            .collect();
        assert_eq!(
            aliased,
            vec![
                ("app/message/authorize", "apps/onBeforeMessageDelivery"),
                ("app/dispatch/authorize", "apps/onBeforeDispatch"),
            ]
        );
        for (_, alias) in aliased {
            assert!(find(alias).is_none(), "{alias} shadows a method");
        }
        use tasks::{AppDispatchAuthorize, AppMessageAuthorize, AppTaskCreate};
        let v1 = CallbackNames::MoltzapV1;
        assert_eq!(
            callback_name::<AppMessageAuthorize>(v1),
            "apps/onBeforeMessageDelivery"
        );
        assert_eq!(
            callback_name::<AppDispatchAuthorize>(v1),
            "apps/onBeforeDispatch"
        );
        assert_eq!(callback_name::<AppTaskCreate>(v1), "app/task/create");
        let current = CallbackNames::Current;
        assert_eq!(
            callback_name::<AppMessageAuthorize>(current),
            "app/message/authorize"
        );
        assert_eq!(
            callback_name::<AppDispatchAuthorize>(current),
            "app/dispatch/authorize"
        );
    }

    #[test]
    fn app_event_types_are_the_app_audiences_notifications() {
        let types = app_event_types();
        assert!(types.contains(&"app/task/activated"), "{types:?}");
        for t in &types {
            let s = find(t).unwrap();
            assert_eq!((s.caller, s.direction), (Caller::App, Direction::FromHub));
        }
        assert!(!types.contains(&"agent/message/received"));
        assert!(!types.contains(&"app/task/create"), "a call is no event");
    }
}
