//! The Rust SDK stops a gate handler at the manifest's deadline: the hub has
//! failed the gate closed by then, so the handler's work and its answer
//! would be wasted.

use std::sync::Mutex;

use tokio::sync::oneshot;

use super::*;

/// Says when the handler's future is dropped (cancelled).
struct Dropped(Option<oneshot::Sender<()>>);

impl Drop for Dropped {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

#[tokio::test]
async fn the_sdk_cancels_a_gate_handler_at_its_deadline_and_sends_no_answer() {
    let w = world(TestHub::fast_options(), hooked(300), 2).await;
    let c0 = w.client(0).await;
    let (dropped_tx, dropped) = oneshot::channel();
    let dropped_tx = Arc::new(Mutex::new(Some(dropped_tx)));
    let app = AppClient::builder(&w.hub.base, &w.app_key)
        .handle::<AppTaskCreate, _, _>(|_| async {
            Ok(TaskCreateAnswer {
                verdict: TaskVerdict::Accept {},
            })
        })
        .handle::<AppMessageAuthorize, _, _>(move |_| {
            let guard = Dropped(dropped_tx.lock().unwrap().take());
            async move {
                let _guard = guard;
                std::future::pending::<Result<MessageAuthorizeAnswer, RpcError>>().await
            }
        })
        .connect()
        .await
        .unwrap();
    let task = w.request(&c0, &[1]).await.unwrap();
    let town = task.conversations[0].id;

    let r = send(&c0, town, "never decided").await;
    assert_eq!(
        r.delivery.reason.as_deref(),
        Some("infrastructure: timeout")
    );
    tokio::time::timeout(Duration::from_secs(10), dropped)
        .await
        .expect("the handler is cancelled at its deadline")
        .expect("the guard reports its drop");
    assert_eq!(app.connection.late_answers(), 1);
}
