//! Many task hooks at once, and a restart between a message's persist and its verdict.

use super::*;

#[tokio::test]
async fn hundred_concurrent_task_hooks_run_at_once_against_one_app() {
    let w = world(
        TestHub::fast_options(),
        manifest(
            json!({"kind": "hook", "timeoutMs": 20000}),
            json!({"kind": "forwardAllExceptSender"}),
            json!({"kind": "grant"}),
        ),
        5,
    )
    .await;
    let in_flight = Arc::new(AtomicUsize::new(0));
    let all_there = Arc::new(Notify::new());
    let (f, n) = (in_flight.clone(), all_there.clone());
    let _app = AppClient::builder(&w.hub.base, &w.app_key)
        .handle::<AppTaskCreate, _, _>(move |_| {
            let (f, n) = (f.clone(), n.clone());
            async move {
                // Every call waits until all 100 are in flight together: if
                // the hub serialized them, none would ever be accepted.
                let waiter = n.notified();
                tokio::pin!(waiter);
                waiter.as_mut().enable();
                if f.fetch_add(1, Ordering::SeqCst) + 1 == 100 {
                    n.notify_waiters();
                } else {
                    waiter.await;
                }
                Ok(TaskCreateAnswer {
                    verdict: TaskVerdict::Accept {},
                })
            }
        })
        .connect()
        .await
        .unwrap();
    let mut clients = Vec::new();
    for i in 0..4 {
        clients.push(w.client(i).await);
    }
    let w = &w;
    let calls = (0..100).map(|i| {
        let c = &clients[i % 4];
        // Each of the four initiators invites the fifth agent.
        async move { w.request(c, &[4]).await }
    });
    let results = futures_util::future::join_all(calls).await;
    assert!(
        results.iter().all(|r| r.is_ok()),
        "{:?}",
        results.iter().find(|r| r.is_err())
    );
    assert_eq!(in_flight.load(Ordering::SeqCst), 100);
}

#[tokio::test]
async fn a_restart_between_persist_and_verdict_still_decides_the_message() {
    let dir = tempfile::tempdir().unwrap();
    let options = || {
        let mut o = TestHub::fast_options().env("SWITCHBOARD_JOBS__INLINE_GRACE_MS", 100);
        o.dir = Some(dir.path().to_path_buf());
        o
    };
    let m = manifest(
        json!({"kind": "accept"}),
        json!({"kind": "hook", "timeoutMs": 3000}),
        json!({"kind": "grant"}),
    );
    let mut hub = TestHub::start_with(options()).await;
    let (app_id, app_key) = hub.register_app(&m).await;
    let a = agent(&hub, "speaker").await;
    let b = agent(&hub, "listener").await;
    let c0 = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let task = c0
        .call::<AgentTaskRequest>(TaskRequestParams {
            app_id: app_id.parse().unwrap(),
            invited_agent_ids: vec![b.id],
            initial_conversation: None,
        })
        .await
        .unwrap();
    let town = task.conversations[0].id;
    // The app receives the authorize call (so the message is stored) and
    // the hub dies before any verdict.
    let mut raw = RawSocket::connect_app(&hub.ws_url(), &app_key).await;
    let sending = tokio::spawn(async move { send_result(&c0, town, "survive this").await });
    let call = loop {
        let frame = raw.recv_request().await;
        if frame.get("id").is_some() {
            break frame;
        }
    };
    assert_eq!(call["method"], json!("app/message/authorize"));
    let message_id = call["params"]["message"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    hub.signal(libc::SIGKILL);
    hub.wait_exit(Duration::from_secs(30)).await;
    assert!(
        sending.await.unwrap().is_err(),
        "the send was never acknowledged"
    );

    // After the restart the durable job runs the gate again.
    let hub = TestHub::start_with(options()).await;
    let _app = AppClient::builder(&hub.base, &app_key)
        .handle::<AppMessageAuthorize, _, _>(|p| async move {
            Ok(MessageAuthorizeAnswer {
                verdict: MessageVerdict::Forward {
                    recipients: p.conversation.participants.clone(),
                },
            })
        })
        .connect()
        .await
        .unwrap();
    let sender = AgentClient::connect(&hub.base, &a.key).await.unwrap();
    let mut rx = sender.connection.notifications().unwrap();
    let delivery = next_of(&mut rx, "agent/message/delivery").await;
    assert_eq!(delivery["payload"]["messageId"], json!(message_id));
    let state = delivery["payload"]["delivery"]["state"]
        .as_str()
        .unwrap()
        .to_string();
    let listener = AgentClient::connect(&hub.base, &b.key).await.unwrap();
    let mut rx = listener.connection.notifications().unwrap();
    if state == "forwarded" {
        let got = next_of(&mut rx, "agent/message/received").await;
        assert_eq!(got["payload"]["message"]["id"], json!(message_id));
    } else {
        // The app may not have been back in time: then the gate failed closed.
        assert_eq!(state, "blocked");
        assert_eq!(
            delivery["payload"]["delivery"]["reason"],
            json!("infrastructure: app_unavailable")
        );
    }
}
