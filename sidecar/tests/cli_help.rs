//! Every subcommand's `--help` shows an example (issue 33.3).

use std::process::Command;

#[test]
fn every_subcommand_help_has_an_example() {
    for sub in ["run", "relay", "analyze", "watch", "export", "dump"] {
        let o = Command::new(env!("CARGO_BIN_EXE_sidecar")).args([sub, "--help"]).output().unwrap();
        assert!(o.status.success(), "sidecar {sub} --help");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("Example") && text.contains(&format!("sidecar {sub} ")), "sidecar {sub} --help:\n{text}");
    }
    let o = Command::new(env!("CARGO_BIN_EXE_sidecar")).args(["watch", "--help"]).output().unwrap();
    assert!(String::from_utf8_lossy(&o.stdout).contains("--http <ADDR>"));
}
