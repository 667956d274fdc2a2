//! What a package installs beside the binary, generated from the command-line definition:
//! man pages for every command and completions for every shell.

mod common;

use common::wattio;

#[test]
fn man_pages_cover_every_command_and_render() {
    let d = tempfile::tempdir().unwrap();
    let o = wattio(None, &["man-pages", d.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Every command that `wattio --help` lists has its page, and so does every subcommand of
    // those that have some (vm publish, testbed up, …).
    let help = String::from_utf8(wattio(None, &["--help"]).stdout).unwrap();
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|c| *c != "help")
        .collect();
    assert!(commands.len() >= 15, "{help}");
    for c in commands {
        let page = d.path().join(format!("wattio-{c}.1"));
        assert!(page.exists(), "no page for {c}");
    }
    for page in ["wattio.1", "wattio-vm-publish.1", "wattio-testbed-up.1"] {
        assert!(d.path().join(page).exists(), "no {page}");
    }
    // man itself renders one, with the options the command has.
    let man = std::process::Command::new("man")
        .arg("-l")
        .arg(d.path().join("wattio-export.1"))
        .env("MANWIDTH", "100")
        .output()
        .expect("man");
    let text = String::from_utf8_lossy(&man.stdout);
    assert!(
        text.contains("--web-config") && text.contains("--interval"),
        "{text}"
    );

    let o = wattio(None, &["man-pages", "/proc/no/such/dir"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cannot create /proc/no/such/dir"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}

#[test]
fn completions_are_printed_for_each_shell() {
    for (shell, marker) in [
        ("bash", "complete -F _wattio"),
        ("zsh", "#compdef wattio"),
        ("fish", "complete -c wattio"),
    ] {
        let o = wattio(None, &["completions", shell]);
        assert!(o.status.success());
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains(marker), "{shell}: {text}");
        assert!(text.contains("export"), "{shell}");
    }
    let o = wattio(None, &["completions", "tcsh"]);
    assert!(!o.status.success());
}
