//! `wattio probe | record | measure | export | workload`.

use anyhow::{bail, Result};
use clap::Args;
use std::process::ExitCode;

#[derive(Args)]
pub struct ProbeArgs {
    #[arg(long)]
    json: bool,
}
#[derive(Args)]
pub struct RecordArgs {}
#[derive(Args)]
pub struct MeasureArgs {}
#[derive(Args)]
pub struct ExportArgs {}
#[derive(Args)]
pub struct WorkloadArgs {}

pub fn probe(_a: ProbeArgs) -> Result<ExitCode> {
    bail!("in progress")
}
pub fn record(_a: RecordArgs) -> Result<ExitCode> {
    bail!("in progress")
}
pub fn measure(_a: MeasureArgs) -> Result<ExitCode> {
    bail!("in progress")
}
pub fn export(_a: ExportArgs) -> Result<ExitCode> {
    bail!("in progress")
}
pub fn workload(_a: WorkloadArgs) -> Result<ExitCode> {
    bail!("in progress")
}
