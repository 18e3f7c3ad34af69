//! Prints plantstore's shell completions, generated from its flags as argh
//! describes them (the same `Args` the server parses), for the Debian
//! packages (`scripts/release/package-deb.sh`):
//!
//!     cargo run --example completions -- bash|zsh|fish
//!
//! The flags are those of the build's features, so run it with the
//! features of the binary the completions go with.

use argh::ArgsInfo;
use argh_complete::Generator;
use plantstore::config::Args;

fn main() {
    let shell = std::env::args().nth(1).unwrap_or_default();
    let info = Args::get_args_info();
    let script = match shell.as_str() {
        "bash" => argh_complete::bash::Bash::generate("plantstore", &info),
        "zsh" => argh_complete::zsh::Zsh::generate("plantstore", &info),
        "fish" => argh_complete::fish::Fish::generate("plantstore", &info),
        _ => {
            eprintln!("usage: completions bash|zsh|fish");
            std::process::exit(2);
        }
    };
    print!("{script}");
}
