//! The command-line contract: what both `vcpulab` commands (the native one in
//! crates/vcpulab-cli and the Python CLI in python/vcpulab/cli, through the bindings)
//! promise a user, defined once so that they agree by construction.
//!
//! - Exit statuses, and the line on stderr of each way a command can fail ([`Failure`]).
//! - Seed texts (`--seed N`): which are valid and their values ([`parse_seed`]), and what
//!   an invalid one's error says ([`SeedError`]).
//! - Scenario files: how one is read (UTF-8, line ends, TOML or JSON by its name:
//!   [`read_scenario_file`], [`ScenarioFormat`]) and what a failed read says ([`ReadError`],
//!   [`OsError`], which words an OS error as Python's `OSError` does).
//!
//! Argument parsing itself stays with Python's argparse: the native command runs only
//! the command lines it can recognise exactly and hands every other one to Python, so no
//! usage message is written twice.

use std::fmt;
use std::path::Path;

use crate::{Error, Scenario, ScenarioError};

/// `vcpulab --version` prints this line.
pub const VERSION_LINE: &str = concat!("vcpulab ", env!("CARGO_PKG_VERSION"));

/// The exit statuses, as `vcpulab --help` lists them (its closing paragraph).
pub const EXIT_STATUS_HELP: &str = "\
exit status: 0 ok, 1 a simulation failed, 2 bad input (scenario, name, file, usage),
130 interrupted (Ctrl-C stops a run within milliseconds).
";

pub const EXIT_OK: u8 = 0;
/// A simulation failed; also the status of a command whose reader went away (`| head`).
pub const EXIT_SIM_FAILED: u8 = 1;
/// Bad input: a scenario, a name, a file, the command line (argparse uses 2 as well).
pub const EXIT_BAD_INPUT: u8 = 2;
/// 128 + SIGINT, as a shell reports a program that Ctrl-C ended.
pub const EXIT_INTERRUPTED: u8 = 130;

/// How a command that did not succeed ends: its exit status and its line on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// The input is wrong (scenario, name, file, option value, an unreadable file, an
    /// output that cannot be written).
    BadInput,
    /// A valid scenario's simulation failed.
    SimFailed,
    /// Ctrl-C.
    Interrupted,
    /// The reader of stdout went away (`vcpulab ... | head`): not worth a message.
    ClosedOutput,
}

impl Failure {
    /// Every failure, with the name the Python CLI gives it (`_native.cli_failure`).
    pub const ALL: [(Failure, &'static str); 4] = [
        (Failure::BadInput, "bad-input"),
        (Failure::SimFailed, "sim-failed"),
        (Failure::Interrupted, "interrupted"),
        (Failure::ClosedOutput, "closed-output"),
    ];

    pub fn named(name: &str) -> Option<Failure> {
        Failure::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(f, _)| *f)
    }

    /// The failure an error of the core ends a command with.
    pub fn of(e: &Error) -> Failure {
        match e {
            Error::Scenario(_) | Error::Io { .. } | Error::NotFound(_) => Failure::BadInput,
            Error::Sim(_) => Failure::SimFailed,
            Error::Interrupted => Failure::Interrupted,
        }
    }

    pub const fn exit_status(self) -> u8 {
        match self {
            Failure::BadInput => EXIT_BAD_INPUT,
            Failure::SimFailed | Failure::ClosedOutput => EXIT_SIM_FAILED,
            Failure::Interrupted => EXIT_INTERRUPTED,
        }
    }

    /// The line written to stderr (without its `\n`), if any; `detail` is the error's
    /// own text (unused by the failures that print a fixed line or none).
    pub fn stderr_line(self, detail: &str) -> Option<String> {
        match self {
            Failure::BadInput | Failure::SimFailed => Some(format!("vcpulab: error: {detail}")),
            Failure::Interrupted => Some("vcpulab: interrupted".to_string()),
            Failure::ClosedOutput => None,
        }
    }
}

// ------------------------------------------------------------------------------ seeds

/// The largest seed a command line (and a scenario) takes: seeds are 0 ..= 2^63-1.
pub const SEED_MAX: u64 = (1 << 63) - 1;

/// A seed text that is not a seed. Its text is Python's `repr` of the text given, so the
/// message reads as it always has.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SeedError {
    NotAnInteger { shown: String },
    OutOfRange { shown: String },
}

impl SeedError {
    /// For a text the caller could not hand over as UTF-8 (Python's surrogate-escaped
    /// bytes of a command line): `shown` is how it is quoted in the message.
    pub fn not_an_integer(shown: String) -> SeedError {
        SeedError::NotAnInteger { shown }
    }
}

impl fmt::Display for SeedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SeedError::NotAnInteger { shown } => {
                write!(f, "invalid seed {shown}: expected a non-negative integer")
            }
            SeedError::OutOfRange { shown } => {
                write!(f, "invalid seed {shown}: must be in 0..2^63-1")
            }
        }
    }
}

impl std::error::Error for SeedError {}

/// The seed a command-line text names. The syntax is Python's integer literal as
/// `int(text, 0)` reads it, which the CLI always took: decimal without leading zeros,
/// `0x`/`0o`/`0b` prefixes, single underscores between digits, a sign, surrounding
/// white space, and the decimal digits of other scripts (Unicode 14, Python 3.11's).
/// The value must be in 0 ..= [`SEED_MAX`] (`-0` is 0).
pub fn parse_seed(text: &str) -> Result<u64, SeedError> {
    match python_int(text) {
        Some((negative, magnitude)) => match u64::try_from(magnitude) {
            Ok(v) if v <= SEED_MAX && (!negative || v == 0) => Ok(v),
            _ => Err(SeedError::OutOfRange {
                shown: python_repr(text),
            }),
        },
        None => Err(SeedError::NotAnInteger {
            shown: python_repr(text),
        }),
    }
}

/// The first code point of each run of ten Unicode decimal digits (category Nd, 0 to 9)
/// outside ASCII, as Python 3.11's `int()` reads them (Unicode 14.0).
const DECIMAL_ZEROS: [u32; 65] = [
    0x660, 0x6f0, 0x7c0, 0x966, 0x9e6, 0xa66, 0xae6, 0xb66, 0xbe6, 0xc66, 0xce6, 0xd66, 0xde6,
    0xe50, 0xed0, 0xf20, 0x1040, 0x1090, 0x17e0, 0x1810, 0x1946, 0x19d0, 0x1a80, 0x1a90, 0x1b50,
    0x1bb0, 0x1c40, 0x1c50, 0xa620, 0xa8d0, 0xa900, 0xa9d0, 0xa9f0, 0xaa50, 0xabf0, 0xff10,
    0x104a0, 0x10d30, 0x11066, 0x110f0, 0x11136, 0x111d0, 0x112f0, 0x11450, 0x114d0, 0x11650,
    0x116c0, 0x11730, 0x118e0, 0x11950, 0x11c50, 0x11d50, 0x11da0, 0x16a60, 0x16ac0, 0x16b50,
    0x1d7ce, 0x1d7d8, 0x1d7e2, 0x1d7ec, 0x1d7f6, 0x1e140, 0x1e2f0, 0x1e950, 0x1fbf0,
];

fn unicode_decimal(c: char) -> Option<u8> {
    let cp = c as u32;
    let i = DECIMAL_ZEROS.partition_point(|&zero| zero <= cp);
    let zero = DECIMAL_ZEROS[i.checked_sub(1)?];
    (cp - zero < 10).then(|| (cp - zero) as u8)
}

/// Python's `int(text, 0)`: (negative, magnitude), None where it raises ValueError.
/// A magnitude past u128 saturates (it is out of any seed's range either way); Python
/// 3.11 refuses decimal texts over 4,300 digits with a ValueError, which here are simply
/// large numbers: "out of range" says what is wrong with them.
fn python_int(text: &str) -> Option<(bool, u128)> {
    // As CPython does first: white space outside ASCII becomes a space, decimal digits
    // become ASCII digits; any other character outside ASCII (and DEL) is refused.
    let mut ascii = Vec::with_capacity(text.len());
    for c in text.chars() {
        ascii.push(match c {
            _ if (c as u32) < 127 => c as u8,
            _ if c.is_whitespace() => b' ',
            _ => b'0' + unicode_decimal(c)?,
        });
    }
    // Python's Py_ISSPACE: no 0x1c..0x1f, unlike str.isspace().
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let mut s = ascii.as_slice();
    while let [b, rest @ ..] = s {
        if !is_space(*b) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., b] = s {
        if !is_space(*b) {
            break;
        }
        s = rest;
    }
    let negative = match s.first() {
        Some(b'-') => true,
        Some(b'+') => false,
        _ => return parse_digits(s).map(|v| (false, v)),
    };
    parse_digits(&s[1..]).map(|v| (negative, v))
}

/// An unsigned literal in base 0 (the prefix decides; no surrounding space).
fn parse_digits(s: &[u8]) -> Option<u128> {
    let (base, mut digits, zero_only) = match s {
        [b'0', b'x' | b'X', rest @ ..] => (16, rest, false),
        [b'0', b'o' | b'O', rest @ ..] => (8, rest, false),
        [b'0', b'b' | b'B', rest @ ..] => (2, rest, false),
        // "Old" C-style octal is refused; zeros alone ("00", "0_0") are 0.
        [b'0', ..] => (10, s, true),
        _ => (10, s, false),
    };
    if base != 10 {
        // One underscore may follow the prefix.
        digits = digits.strip_prefix(b"_").unwrap_or(digits);
    }
    let mut value: u128 = 0;
    let mut seen_digit = false;
    let mut after_underscore = false;
    for &b in digits {
        if b == b'_' {
            if after_underscore || !seen_digit {
                return None;
            }
            after_underscore = true;
            continue;
        }
        let d = (b as char).to_digit(36).filter(|&d| d < base)?;
        value = value.saturating_mul(base as u128).saturating_add(d as u128);
        seen_digit = true;
        after_underscore = false;
    }
    if !seen_digit || after_underscore || (zero_only && value != 0) {
        return None;
    }
    Some(value)
}

/// Python's `repr()` of a str: quotes, and escapes for the quote, backslash, control and
/// other unprintable characters (Unicode's Other and Separator categories but the space,
/// which Python and Rust's escape_debug both call unprintable).
fn python_repr(text: &str) -> String {
    let quote = if text.contains('\'') && !text.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push(quote);
    for c in text.chars() {
        match c {
            _ if c == quote || c == '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            _ if c < ' ' || c == '\x7f' => out.push_str(&format!("\\x{:02x}", c as u32)),
            _ if c.is_ascii() || is_printable(c) => out.push(c),
            _ if (c as u32) <= 0xff => out.push_str(&format!("\\x{:02x}", c as u32)),
            _ if (c as u32) <= 0xffff => out.push_str(&format!("\\u{:04x}", c as u32)),
            _ => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push(quote);
    out
}

/// Whether `c` is printable in Python's sense. Rust's escape_debug escapes exactly the
/// unprintable characters (same categories), and grapheme extenders only at the start of
/// a string, so `c` is asked about after another character.
fn is_printable(c: char) -> bool {
    let mut buf = [0u8; 5];
    buf[0] = b'a';
    let n = c.encode_utf8(&mut buf[1..]).len();
    let pair = std::str::from_utf8(&buf[..=n]).expect("a char after an ASCII letter");
    pair.escape_debug().nth(1) == Some(c)
}

// ------------------------------------------------------------------------- OS errors

/// An error the OS reported, worded as the Python CLI prints an `OSError`: "FILE: reason"
/// when it names a file, else "[Errno N] reason" (or the reason alone without a number).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OsError {
    pub errno: Option<i32>,
    /// The OS's text for the error (C's `strerror`), e.g. "No such file or directory".
    pub reason: String,
    pub filename: Option<String>,
}

impl OsError {
    pub fn from_io(e: &std::io::Error, filename: Option<&str>) -> OsError {
        let text = e.to_string();
        let errno = e.raw_os_error();
        // Rust words an OS error as "<strerror> (os error N)".
        let reason = match errno {
            Some(code) => text
                .strip_suffix(&format!(" (os error {code})"))
                .unwrap_or(&text)
                .to_string(),
            None => text,
        };
        OsError {
            errno,
            reason,
            filename: filename.map(str::to_string),
        }
    }
}

impl fmt::Display for OsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.filename, self.errno) {
            (Some(file), _) if !self.reason.is_empty() => write!(f, "{file}: {}", self.reason),
            (_, Some(code)) => write!(f, "[Errno {code}] {}", self.reason),
            _ => f.write_str(&self.reason),
        }
    }
}

impl std::error::Error for OsError {}

// -------------------------------------------------------------------- scenario files

/// How a scenario's text is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScenarioFormat {
    Toml,
    Json,
}

impl ScenarioFormat {
    /// A file is JSON if its name ends in `.json` (any case), else TOML.
    pub fn of_path(path: &str) -> ScenarioFormat {
        if path.to_lowercase().ends_with(".json") {
            ScenarioFormat::Json
        } else {
            ScenarioFormat::Toml
        }
    }

    /// "json" is JSON; any other name is TOML (the bindings' default).
    pub fn named(name: &str) -> ScenarioFormat {
        if name == "json" {
            ScenarioFormat::Json
        } else {
            ScenarioFormat::Toml
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            ScenarioFormat::Toml => "toml",
            ScenarioFormat::Json => "json",
        }
    }
}

/// A scenario as read, before parsing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioSource {
    pub text: String,
    /// What errors name: the path as given.
    pub origin: String,
    pub format: ScenarioFormat,
}

impl ScenarioSource {
    pub fn parse(&self) -> Result<Scenario, ScenarioError> {
        parse_scenario(&self.text, &self.origin, self.format)
    }
}

pub fn parse_scenario(
    text: &str,
    origin: &str,
    format: ScenarioFormat,
) -> Result<Scenario, ScenarioError> {
    match format {
        ScenarioFormat::Json => Scenario::from_json_str(text, origin),
        ScenarioFormat::Toml => Scenario::from_toml_str(text, origin),
    }
}

/// A scenario file that could not be read.
#[derive(Clone, Debug, PartialEq)]
pub enum ReadError {
    /// Opening or reading it failed (missing, a folder, no permission).
    Os(OsError),
    /// It is not UTF-8 text.
    Text(ScenarioError),
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadError::Os(e) => e.fmt(f),
            ReadError::Text(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ReadError {}

/// Reads a scenario file: UTF-8 text, in which `\r\n` and a lone `\r` end lines as `\n`
/// does; TOML, or JSON if the name ends in `.json`. Any file that can be read once will
/// do (a pipe, `/dev/stdin`). Errors name the path as given.
pub fn read_scenario_file(path: &Path) -> Result<ScenarioSource, ReadError> {
    let origin = path.to_string_lossy().into_owned();
    let raw =
        std::fs::read(path).map_err(|e| ReadError::Os(OsError::from_io(&e, Some(&origin))))?;
    let text = String::from_utf8(raw).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let byte = e.as_bytes()[at];
        ReadError::Text(ScenarioError::new(
            &origin,
            "",
            format!(
                "not UTF-8 text (byte 0x{byte:02x} at offset {at}); \
                 scenario files are TOML or JSON in UTF-8"
            ),
        ))
    })?;
    let text = if text.contains('\r') {
        text.replace("\r\n", "\n").replace('\r', "\n")
    } else {
        text
    };
    Ok(ScenarioSource {
        format: ScenarioFormat::of_path(&origin),
        origin,
        text,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_read_as_pythons_int_with_base_0() {
        for (text, value) in [
            ("0", 0),
            ("00", 0),
            ("0_0", 0),
            ("-0", 0),
            ("+0", 0),
            ("+5", 5),
            (" 5 ", 5),
            ("\t5\n", 5),
            ("\x0b5\x0c", 5),
            ("\u{85}5", 5),
            ("\u{a0}5", 5),
            ("\u{3000}5", 5),
            ("\u{2028} 5", 5),
            ("١٢", 12),
            ("１２", 12),
            ("0x_1f", 31),
            ("0X1F", 31),
            ("0x1_f", 31),
            ("0o17", 15),
            ("0b101", 5),
            ("1_0", 10),
            ("1_000_000", 1_000_000),
            ("0x١", 1),
            ("٠x1", 1),
            ("9223372036854775807", SEED_MAX),
            ("0x7fffffffffffffff", SEED_MAX),
        ] {
            assert_eq!(parse_seed(text), Ok(value), "{text:?}");
        }
    }

    #[test]
    fn texts_pythons_int_refuses_are_not_integers() {
        for text in [
            "", "+", "-", "0b", "0x", "_1", "1_", "1__0", "010", "00_1", "0_", "1 2", "1\0",
            "0_x1", "०१", "1e3", "1.0", "𝟎5", "0١", "  -  1", "-\u{a0}1", "+ 1", "\x1c5", "5\x1f",
            "5\x7f", "0x_", "0x__1", "abc", "٫1",
        ] {
            assert!(
                matches!(parse_seed(text), Err(SeedError::NotAnInteger { .. })),
                "{text:?}"
            );
        }
    }

    #[test]
    fn integers_outside_0_to_2_63_are_out_of_range() {
        for text in [
            "-1",
            "9223372036854775808",
            "-0x1",
            "18446744073709551616",
            &"9".repeat(5000),
        ] {
            assert!(
                matches!(parse_seed(text), Err(SeedError::OutOfRange { .. })),
                "{text:?}"
            );
        }
    }

    #[test]
    fn seed_errors_quote_the_text_as_python_does() {
        let msg = |t: &str| parse_seed(t).unwrap_err().to_string();
        assert_eq!(
            msg("x"),
            "invalid seed 'x': expected a non-negative integer"
        );
        assert_eq!(msg("-1"), "invalid seed '-1': must be in 0..2^63-1");
        assert_eq!(
            msg("it's"),
            "invalid seed \"it's\": expected a non-negative integer"
        );
        assert_eq!(
            msg("'\"\\\t\n\r\x01\x7f\u{a0}\u{200b}\u{e000}\u{f0000}é\u{301}"),
            "invalid seed '\\'\"\\\\\\t\\n\\r\\x01\\x7f\\xa0\\u200b\\ue000\\U000f0000é\u{301}': \
             expected a non-negative integer"
        );
    }

    #[test]
    fn failures_end_with_their_status_and_line() {
        assert_eq!(Failure::BadInput.exit_status(), 2);
        assert_eq!(Failure::SimFailed.exit_status(), 1);
        assert_eq!(Failure::ClosedOutput.exit_status(), 1);
        assert_eq!(Failure::Interrupted.exit_status(), 130);
        assert_eq!(
            Failure::BadInput.stderr_line("f: x").as_deref(),
            Some("vcpulab: error: f: x")
        );
        assert_eq!(
            Failure::Interrupted.stderr_line("").as_deref(),
            Some("vcpulab: interrupted")
        );
        assert_eq!(Failure::ClosedOutput.stderr_line("x"), None);
        for (f, name) in Failure::ALL {
            assert_eq!(Failure::named(name), Some(f));
        }
        assert_eq!(Failure::of(&Error::Interrupted), Failure::Interrupted);
        assert_eq!(Failure::of(&Error::NotFound("x".into())), Failure::BadInput);
    }

    #[test]
    fn os_errors_read_as_pythons_oserror() {
        let e = std::io::Error::from_raw_os_error(2);
        assert_eq!(
            OsError::from_io(&e, Some("a.toml")).to_string(),
            "a.toml: No such file or directory"
        );
        assert_eq!(
            OsError::from_io(&e, None).to_string(),
            "[Errno 2] No such file or directory"
        );
        let custom = std::io::Error::other("odd");
        assert_eq!(OsError::from_io(&custom, None).to_string(), "odd");
    }

    #[test]
    fn scenario_files_are_utf8_with_any_line_end_and_json_by_name() {
        let dir = std::env::temp_dir().join(format!("vcpulab-contract-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let crlf = dir.join("a.TOML");
        std::fs::write(&crlf, "a = 1\r\nb = 2\rc = 3\n").unwrap();
        let src = read_scenario_file(&crlf).unwrap();
        assert_eq!(src.text, "a = 1\nb = 2\nc = 3\n");
        assert_eq!(src.format, ScenarioFormat::Toml);
        assert_eq!(src.origin, crlf.to_string_lossy());
        let json = dir.join("b.JsOn");
        std::fs::write(&json, "{}").unwrap();
        assert_eq!(
            read_scenario_file(&json).unwrap().format,
            ScenarioFormat::Json
        );
        let latin1 = dir.join("c.toml");
        std::fs::write(&latin1, b"name = \"caf\xe9\"\n").unwrap();
        assert_eq!(
            read_scenario_file(&latin1).unwrap_err().to_string(),
            format!(
                "{}: not UTF-8 text (byte 0xe9 at offset 11); \
                 scenario files are TOML or JSON in UTF-8",
                latin1.display()
            )
        );
        let missing = dir.join("nope.toml");
        assert_eq!(
            read_scenario_file(&missing).unwrap_err().to_string(),
            format!("{}: No such file or directory", missing.display())
        );
        assert_eq!(
            read_scenario_file(&dir).unwrap_err().to_string(),
            format!("{}: Is a directory", dir.display())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
