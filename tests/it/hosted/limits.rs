//! Time, memory and output limits each end a run with their own reason
//! (ADR 0031 §3), and the log keeps what came before the cap.

use super::{card, install, run};

const SPIN: &str = "print('spinning', flush=True)\nwhile True:\n    pass\n";
const GROW: &str = r#"
print("growing", flush=True)
chunks = []
while True:
    chunks.append(b"x" * (1 << 20))
"#;
const CHATTER: &str = r#"
import sys
sys.stdout.write("first line\n")
sys.stdout.flush()
while True:
    sys.stdout.write("y" * 1000 + "\n")
"#;

async fn ended(id: &str, main: &str, env: &[(&str, &str)]) -> super::Ran {
    let c = card(id, &["whoami"], main, &[]);
    install(&c, &c.data());
    let ran = run(id, &c.data(), env).await;
    assert!(!ran.ok, "a limited run does not exit 0");
    ran
}

#[tokio::test]
async fn the_wall_time_limit_ends_a_run_time_limit() {
    let ran = ended(
        "spin",
        SPIN,
        &[("SWITCHBOARD_HOSTED__WALL_TIME_MS", "1500")],
    )
    .await;
    assert!(
        ran.end().contains(" failed ") && ran.end().contains("reason=time_limit"),
        "{}",
        ran.end()
    );
    assert!(ran.stdout.contains("spinning"));
}

#[tokio::test]
async fn the_memory_limit_ends_a_run_memory_limit() {
    let ran = ended(
        "grow",
        GROW,
        &[(
            "SWITCHBOARD_HOSTED__MEMORY_BYTES",
            &(64u64 << 20).to_string(),
        )],
    )
    .await;
    assert!(
        ran.end().contains(" failed ") && ran.end().contains("reason=memory_limit"),
        "{}",
        ran.end()
    );
}

#[tokio::test]
async fn the_output_limit_ends_a_run_output_limit_and_caps_its_log() {
    let ran = ended(
        "chatter",
        CHATTER,
        &[
            ("SWITCHBOARD_HOSTED__OUTPUT_MAX_BYTES", "20000"),
            // The live copy is at most the whole log.
            ("SWITCHBOARD_HOSTED__LIVE_LOG_MAX_BYTES", "20000"),
        ],
    )
    .await;
    assert!(
        ran.end().contains(" failed ") && ran.end().contains("reason=output_limit"),
        "{}",
        ran.end()
    );
    assert!(
        ran.stdout.starts_with("first line\n"),
        "{}",
        &ran.stdout[..40.min(ran.stdout.len())]
    );
    assert_eq!(ran.stdout.len(), 20000, "the log holds exactly the cap");
}
