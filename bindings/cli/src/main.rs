//! `txvfs`: a command-line front end to a txvfs store (see the README's "Command line" section).
//!
//! Every command opens the store named by `--store URI` (or `$TXVFS_STORE`). Only `init`
//! creates a store; the other commands refuse a RocksDB path that holds no store. Errors
//! print one line, `txvfs: <message>`, and exit with the error's errno (1 for txvfs's own
//! codes); bad arguments exit 2 with clap's usage message.
#![warn(missing_docs)]

mod args;
mod cmds;
mod copy;
mod dirs;
mod error;
mod fsck;
mod pack;
mod progress;
mod quota;
mod transfer;
mod watch;

use args::Cli;
use clap::Parser;
use error::CliError;

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli) {
        eprintln!("txvfs: {}", e.msg);
        std::process::exit(e.exit_code());
    }
}

fn run(cli: Cli) -> Result<(), CliError> {
    if let args::Command::Clone { lower, upper } = &cli.command {
        return cmds::clone(lower, upper);
    }
    if let args::Command::Pack { source, image, host, block_size, inline_limit } = cli.command {
        return pack::run(&source, &image, host, block_size, inline_limit);
    }
    let uri = cli
        .store
        .ok_or_else(|| CliError::msg("no store given: use --store URI or set TXVFS_STORE"))?;
    cmds::dispatch(&uri, cli.command)
}
