//! What the commands print: lines that end the process quietly when stdout
//! is closed (`| head`), and JSON printed for people to read.

/// `println!` that ends the process quietly when stdout is closed (`| head`)
/// instead of panicking.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        if let Err(error) = writeln!(std::io::stdout().lock(), $($arg)*) {
            if error.kind() == std::io::ErrorKind::BrokenPipe {
                std::process::exit(0);
            }
        }
    }};
}
pub(crate) use say;

/// Prints `value` as indented JSON.
///
/// # Errors
/// When `value` does not serialize.
pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    say!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}
