//! The command line's own rules, checked on clap's tree of every command
//! so a new option cannot slip in without them.

use clap::CommandFactory;

use super::Cli;

/// Every command and its path (`switchboard app check`).
fn every_command() -> Vec<(String, clap::Command)> {
    let mut found = Vec::new();
    let mut stack = vec![("switchboard".to_string(), Cli::command())];
    while let Some((path, command)) = stack.pop() {
        for sub in command.get_subcommands() {
            stack.push((format!("{path} {}", sub.get_name()), sub.clone()));
        }
        found.push((path, command));
    }
    found
}

#[test]
fn every_option_and_argument_says_what_it_is() {
    let mut silent = Vec::new();
    for (path, command) in every_command() {
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                silent.push(format!("{path} {id}"));
            }
        }
    }
    assert!(silent.is_empty(), "without help text: {silent:#?}");
}

#[test]
fn only_serve_takes_listen() {
    for (path, command) in every_command() {
        let listens = command
            .get_arguments()
            .any(|a| a.get_long() == Some("listen"));
        assert_eq!(listens, path == "switchboard serve", "{path}");
    }
}
