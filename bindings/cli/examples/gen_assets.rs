//! Writes the CLI's shell completions and man pages from its clap definitions (`src/args.rs`),
//! so they never drift from the real arguments. Used by `make install`; run by hand with
//!   cargo run --release -p txvfs-cli --example gen_assets -- OUT_DIR
//! which writes OUT_DIR/completions/{txvfs.bash,_txvfs,txvfs.fish} and OUT_DIR/man/txvfs*.1.
//! An example rather than a subcommand: a build step, not something users of the tool run.

#[allow(dead_code)] // the generator only needs the definitions, not every field's reader
#[path = "../src/args.rs"]
mod args;

use clap::CommandFactory;
use clap_complete::Shell;
use std::path::PathBuf;

fn main() {
    let Some(out) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: gen_assets OUT_DIR");
        std::process::exit(2);
    };
    if let Err(e) = generate(&out) {
        eprintln!("gen_assets: {}: {e}", out.display());
        std::process::exit(1);
    }
}

/// Writes the completion scripts (bash, zsh, fish) and the man pages (one per subcommand) under `out`.
fn generate(out: &std::path::Path) -> std::io::Result<()> {
    let completions = out.join("completions");
    let man = out.join("man");
    std::fs::create_dir_all(&completions)?;
    std::fs::create_dir_all(&man)?;
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let path =
            clap_complete::generate_to(shell, &mut args::Cli::command(), "txvfs", &completions)?;
        println!("{}", path.display());
    }
    clap_mangen::generate_to(args::Cli::command(), &man)?;
    println!("{}", man.display());
    Ok(())
}
