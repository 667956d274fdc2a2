//! What a package installs beside the binary, generated from the one definition of the command
//! line (so they cannot drift from it): shell completions (`clap_complete`) and man pages
//! (`clap_mangen`), one per command and subcommand, as `git` and `cargo` ship theirs.

use anyhow::{Context, Result};
use clap::{Args, Command};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell. Install e.g. with
    /// `wattio completions bash > /usr/share/bash-completion/completions/wattio`.
    shell: clap_complete::Shell,
}

#[derive(Args)]
pub struct ManArgs {
    /// Directory to write the pages into (created if missing): wattio.1, wattio-export.1, …
    dir: PathBuf,
}

/// Prints the completion script of `cli` for the asked shell.
pub fn completions(a: CompletionsArgs, mut cli: Command) -> Result<ExitCode> {
    clap_complete::generate(a.shell, &mut cli, "wattio", &mut std::io::stdout());
    Ok(ExitCode::SUCCESS)
}

/// Writes a man page for `cli` and each of its subcommands, and prints how many.
pub fn man_pages(a: ManArgs, cli: Command) -> Result<ExitCode> {
    std::fs::create_dir_all(&a.dir).with_context(|| {
        format!(
            "cannot create {}: give a writable directory",
            a.dir.display()
        )
    })?;
    let n = write_pages(&a.dir, cli.clone().name("wattio"), "wattio")?;
    println!("{n} man pages in {}", a.dir.display());
    Ok(ExitCode::SUCCESS)
}

/// The page of `cmd` (named `name`, e.g. `wattio-vm-publish`) and of every subcommand below.
fn write_pages(dir: &Path, cmd: Command, name: &str) -> Result<usize> {
    let cmd = cmd.name(name.to_string()).bin_name(name.replace('-', " "));
    let path = dir.join(format!("{name}.1"));
    let man = clap_mangen::Man::new(cmd.clone());
    wattio_files::write_atomically(&path, |w| man.render(w))
        .with_context(|| format!("cannot write {}", path.display()))?;
    let mut n = 1;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let sub_name = format!("{name}-{}", sub.get_name());
        n += write_pages(dir, sub.clone(), &sub_name)?;
    }
    Ok(n)
}
