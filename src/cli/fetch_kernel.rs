//! `bootlink fetch-kernel`

use std::process::ExitCode;

use bootlink::{Error, fetch};

use super::emit;

#[derive(clap::Args)]
pub struct Args {
    /// Kernel series (newest package of it), e.g. 6.1 or 6.12
    #[arg(long, conflicts_with = "package")]
    version: Option<String>,
    /// Exact package, e.g. linux-image-6.1.0-56-amd64[=6.1.192-2]
    #[arg(long)]
    package: Option<String>,
    /// Debian architecture of the package (arm64: downloaded as a foreign
    /// package, which needs `dpkg --add-architecture arm64`)
    #[arg(long, value_enum, default_value = "amd64")]
    arch: super::values::Arch,
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> Result<ExitCode, Error> {
    let req = match (a.version, a.package) {
        (_, Some(p)) => fetch::Request::Package(p),
        (Some(v), None) => fetch::Request::Series(v),
        (None, None) => fetch::Request::Reference,
    };
    let f = fetch::fetch_for(&req, a.arch.into())?;
    if let Some(why) = &f.fallback {
        eprintln!("bootlink: note: {why}");
    }
    emit(&f, a.json);
    Ok(ExitCode::SUCCESS)
}
