//! The living spec: `clawvisor eval evals/` runs every scenario against the scripted model.

#[test]
fn every_scenario_in_evals_passes_against_the_scripted_model() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_clawvisor"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["eval", "evals"])
        .output()
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let count = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/evals"))
        .unwrap()
        .filter(|entry| {
            entry
                .as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|ext| ext == "toml")
        })
        .count();
    assert!(count >= 5);
    assert!(
        stdout.contains(&format!("{count}/{count} scenarios passed")),
        "{stdout}"
    );
}

#[test]
fn a_broken_scenario_fails_the_run_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("wrong.toml"),
        "name = \"wrong expectation\"\n[[script.rules]]\ntext = \"Lyon\"\n[[turns]]\nuser = \"capital of France?\"\nexpect = { reply_contains = [\"Paris\"] }\n",
    )
    .unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_clawvisor"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["eval", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success());
    assert!(
        stdout.contains("does not contain `Paris`") && stdout.contains("0/1 scenarios passed"),
        "{stdout}"
    );
}
