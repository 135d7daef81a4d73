//! The crate's one error type. Every layer returns [`Result`]; an [`Error`] is a readable
//! message naming the cause and the place (the op and source line, the file and byte, the
//! option and value — PopTorch's own wording where PopTorch raises one) and an
//! [`ErrorKind`] saying which layer raised it. Errors pass between layers with `?`
//! unchanged; a layer that adds context wraps the message with [`Error::context`]
//! (`in block 'b': …`), which keeps the kind.
//!
//! An error made from a plan's diagnostic also keeps the diagnostic's stable `code`, its
//! `fix` and the `option` it is about, so a caller (the JS API: `err.kind`, `err.code`,
//! `err.fix`, `err.option`) reads them as fields instead of matching the message. Two
//! structured errors stay apart because callers use their extra fields, and convert into
//! [`Error`] with `?` (the `From` impls live beside them, so this module depends on no
//! layer): `trace::check::ArgError` (its kind picks the JS `TypeError`/`RangeError` at the
//! API edge) and `compile::Diagnostic` (a plan's errors with a code and a fix).
//!
//! Every message is capped at [`MAX_MESSAGE_BYTES`] (1 KiB): a longer one keeps its start
//! and ends in `… (N more characters)` ([`cap`]). Messages name the field and describe a
//! bad value briefly ([`brief`]) rather than echo it whole.

use std::fmt;

/// The longest message an error carries, in bytes (UTF-8).
pub const MAX_MESSAGE_BYTES: usize = 1024;

/// `message` cut to at most [`MAX_MESSAGE_BYTES`] bytes (on a character boundary), ending
/// in `… (N more characters)` when anything was cut.
pub fn cap(message: String) -> String {
    cap_to(message, MAX_MESSAGE_BYTES)
}

/// `text` cut to at most `max` bytes like [`cap`] (at least the suffix is kept).
fn cap_to(mut text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    // The suffix's length depends on N's digits; N ≤ text.len() bounds it.
    let suffix_max = format!("… ({} more characters)", text.len()).len();
    let mut keep = max.saturating_sub(suffix_max);
    while !text.is_char_boundary(keep) {
        keep -= 1;
    }
    let more = text[keep..].chars().count();
    text.truncate(keep);
    text.push_str(&format!("… ({more} more characters)"));
    text
}

/// `value` as text for a message, at most `max` bytes: short values whole, long ones cut
/// like [`cap`] (a list of a million numbers is not echoed).
pub fn brief(value: impl fmt::Display, max: usize) -> String {
    use fmt::Write;
    /// Keeps at most `max` bytes and stops the formatting there: a huge value is never
    /// written out whole.
    struct Limited {
        text: String,
        max: usize,
        cut: bool,
    }
    impl Write for Limited {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            let room = self.max - self.text.len();
            if s.len() <= room {
                self.text.push_str(s);
                return Ok(());
            }
            let mut k = room;
            while !s.is_char_boundary(k) {
                k -= 1;
            }
            self.text.push_str(&s[..k]);
            self.cut = true;
            Err(fmt::Error)
        }
    }
    let mut out = Limited { text: String::new(), max, cut: false };
    let _ = write!(out, "{value}");
    if !out.cut {
        return out.text;
    }
    const MORE: &str = "… (more)";
    let mut keep = max.saturating_sub(MORE.len());
    while !out.text.is_char_boundary(keep) {
        keep -= 1;
    }
    out.text.truncate(keep);
    out.text.push_str(MORE);
    out.text
}

/// Which layer raised an [`Error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Building, checking or rewriting a graph (`ir`, `autograd`, graph passes).
    Ir,
    /// Tracing a model (`trace`, modules, demo models).
    Trace,
    /// Running a graph (`exec`).
    Exec,
    /// Reading and batching data (`gnn::data`).
    Data,
    /// The PopTorch layer (`poptorch`), with PopTorch's message where one exists.
    Poptorch,
    /// A size over a limit or an allocation the allocator refused (`tensor::alloc`).
    Alloc,
    /// Making a tensor or a sparse matrix (`tensor`): values that do not fit the shape, a
    /// malformed CSR matrix, an unknown dtype.
    Tensor,
    /// Training the RevGNN (`gnn::train`): a diverged loss, a run past its epochs.
    Train,
    /// A rejected argument (`trace::check::ArgError`).
    Arg,
    /// An error of a plan (`compile::Diagnostic`).
    Plan,
    /// Reading or writing a file.
    Io,
    /// Reading or writing JSON.
    Json,
    /// Exporting a model as Python (`export`): an op or input with no Python form.
    Export,
}

impl ErrorKind {
    /// The kind's name as JS callers read it (`err.kind`): `"ir"`, `"trace"`, `"poptorch"`, ….
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Ir => "ir",
            ErrorKind::Trace => "trace",
            ErrorKind::Exec => "exec",
            ErrorKind::Data => "data",
            ErrorKind::Poptorch => "poptorch",
            ErrorKind::Alloc => "alloc",
            ErrorKind::Tensor => "tensor",
            ErrorKind::Train => "train",
            ErrorKind::Arg => "arg",
            ErrorKind::Plan => "plan",
            ErrorKind::Io => "io",
            ErrorKind::Json => "json",
            ErrorKind::Export => "export",
        }
    }
}

/// An error of any layer: its kind and its message, and for an error that came from a
/// plan's diagnostic its code, fix and option; for one about a traced op, that op's source. `Display` prints the message alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    detail: Option<Box<Detail>>,
}

/// What a diagnostic adds to an error (boxed: most errors have none, and every `Result`
/// of the crate carries an `Error`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Detail {
    code: Option<&'static str>,
    fix: Option<String>,
    option: Option<String>,
    source: Option<String>,
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error of `kind` with `message`.
    /// The message is capped at [`MAX_MESSAGE_BYTES`] ([`cap`]).
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, message: cap(message.into()), detail: None }
    }

    /// An error building or checking a graph.
    pub fn ir(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Ir, message)
    }

    /// An error while tracing.
    pub fn trace(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Trace, message)
    }

    /// An error exporting a model as Python.
    pub fn export(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Export, message)
    }

    /// An error while running a graph.
    pub fn exec(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Exec, message)
    }

    /// An error of the data layer.
    pub fn data(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Data, message)
    }

    /// An error of the PopTorch layer.
    pub fn poptorch(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Poptorch, message)
    }

    /// A size over a limit or a refused allocation.
    pub fn alloc(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Alloc, message)
    }

    /// An error making a tensor or a sparse matrix.
    pub fn tensor(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Tensor, message)
    }

    /// An error of the planner.
    pub fn plan(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Plan, message)
    }

    /// An error while training the RevGNN.
    pub fn train(message: impl Into<String>) -> Error {
        Error::new(ErrorKind::Train, message)
    }

    /// Which layer raised it.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The stable code of the diagnostic it came from (`ipu_count_not_power_of_two`, …).
    pub fn code(&self) -> Option<&'static str> {
        self.detail.as_ref().and_then(|d| d.code)
    }

    /// How to fix it, when known (also at the end of the message).
    pub fn fix(&self) -> Option<&str> {
        self.detail.as_ref().and_then(|d| d.fix.as_deref())
    }

    /// The option it is about, by its `poptorch.Options` JSON key
    /// (`Training.gradientAccumulation`), when it is about one.
    pub fn option(&self) -> Option<&str> {
        self.detail.as_ref().and_then(|d| d.option.as_deref())
    }

    /// The `file:line` of the traced op it is about (the user's call that recorded the op),
    /// when it is about one: the innermost op's, as it was first set.
    pub fn source(&self) -> Option<&str> {
        self.detail.as_ref().and_then(|d| d.source.as_deref())
    }

    fn detail_mut(&mut self) -> &mut Detail {
        self.detail.get_or_insert_with(Box::default)
    }

    /// The same error with a stable `code`.
    pub fn with_code(mut self, code: &'static str) -> Error {
        self.detail_mut().code = Some(code);
        self
    }

    /// The same error with its `fix`, which is also appended to the message (a thrown
    /// error reads as PopTorch's do: the cause, then what to do).
    pub fn with_fix(mut self, fix: impl Into<String>) -> Error {
        let fix = fix.into();
        if !fix.is_empty() {
            if !self.message.is_empty() {
                self.message.push(' ');
            }
            self.message.push_str(&fix);
            self.message = cap(std::mem::take(&mut self.message));
            self.detail_mut().fix = Some(cap(fix));
        }
        self
    }

    /// The same error about option `key` (its `poptorch.Options` JSON key).
    pub fn with_option(mut self, key: impl Into<String>) -> Error {
        self.detail_mut().option = Some(key.into());
        self
    }

    /// The same error about the op recorded at `source` (`file:line`), unless it already
    /// names an op's source (an inner op's error keeps its own).
    pub fn with_source(mut self, source: Option<&str>) -> Error {
        if let (Some(s), None) = (source, self.source()) {
            self.detail_mut().source = Some(s.to_string());
        }
        self
    }

    /// The same error with `prefix` before its message (`prefix: message`), keeping its
    /// kind, code, fix and option.
    pub fn context(mut self, prefix: impl fmt::Display) -> Error {
        self.message = cap(format!("{prefix}: {}", self.message));
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        Error::new(ErrorKind::Io, e.to_string())
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Error {
        Error::new(ErrorKind::Json, e.to_string())
    }
}

impl From<fmt::Error> for Error {
    fn from(_: fmt::Error) -> Error {
        Error::new(ErrorKind::Io, "formatting failed")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_the_message_alone() {
        let e = Error::data("ind.cora.x: unsupported pickle opcode 0x95 ('FRAME') at byte 2");
        assert_eq!(e.to_string(), "ind.cora.x: unsupported pickle opcode 0x95 ('FRAME') at byte 2");
        assert_eq!(e.kind(), ErrorKind::Data);
    }

    #[test]
    fn context_prefixes_the_message_and_keeps_the_kind() {
        let e = Error::exec("node 3 (add): shapes differ").context("in block 'b'");
        assert_eq!((e.kind(), e.message()), (ErrorKind::Exec, "in block 'b': node 3 (add): shapes differ"));
    }

    #[test]
    fn the_innermost_source_is_kept_through_context() {
        let e = Error::ir("shapes [2,3] and [4,5] differ").with_source(Some("model.js:12")).context("'linear'");
        let e = e.with_source(Some("model.js:40")).context("backward");
        assert_eq!((e.source(), e.kind()), (Some("model.js:12"), ErrorKind::Ir));
        assert_eq!(Error::ir("x").with_source(None).source(), None);
    }

    #[test]
    fn context_keeps_code_fix_and_option() {
        let e = Error::new(ErrorKind::Plan, "deviceIterations must be positive.")
            .with_code("options_not_positive")
            .with_fix("Set it to 1 or more.")
            .with_option("deviceIterations")
            .context("model.plan");
        assert_eq!(e.message(), "model.plan: deviceIterations must be positive. Set it to 1 or more.");
        assert_eq!(
            (e.kind(), e.code(), e.fix(), e.option()),
            (ErrorKind::Plan, Some("options_not_positive"), Some("Set it to 1 or more."), Some("deviceIterations"))
        );
    }

    #[test]
    fn plain_errors_have_no_detail_and_foreign_errors_convert() {
        let e = Error::poptorch("Model has not been compiled or has been destroyed.");
        assert_eq!((e.code(), e.fix(), e.option()), (None, None, None));
        assert_eq!(e.kind().as_str(), "poptorch");
        assert_eq!(Error::trace("x").with_fix("").message(), "x");
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        assert_eq!(Error::from(io).kind(), ErrorKind::Io);
        let json = serde_json::from_str::<u32>("x").unwrap_err();
        let msg = json.to_string();
        let e = Error::from(json);
        assert_eq!((e.kind(), e.message()), (ErrorKind::Json, msg.as_str()));
    }

    #[test]
    fn messages_are_capped_at_1_kib() {
        let e = Error::data("x".repeat(80_000_000 / 8));
        assert!(e.message().len() <= MAX_MESSAGE_BYTES, "{}", e.message().len());
        assert!(
            e.message().starts_with("xxxx") && e.message().ends_with(" more characters)"),
            "{}",
            &e.message()[900..]
        );
        let n: usize = e.message().rsplit("… (").next().unwrap().split(' ').next().unwrap().parse().unwrap();
        assert_eq!(n + e.message().find('…').unwrap(), 10_000_000, "the count is of the characters cut");
        // Multi-byte characters are cut on a boundary.
        let e = Error::new(ErrorKind::Plan, "é".repeat(2000));
        assert!(e.message().len() <= MAX_MESSAGE_BYTES && e.message().ends_with("characters)"));
        // Context on a capped message stays capped; short messages are unchanged.
        let e = Error::data("y".repeat(5000)).context("in block 'b'");
        assert!(e.message().len() <= MAX_MESSAGE_BYTES && e.message().starts_with("in block 'b': yyy"));
        assert_eq!(Error::data("short").message(), "short");
        let d = crate::compile::Diagnostic::new("c", "z".repeat(10_000), "f".repeat(10_000));
        assert!(d.message.len() <= MAX_MESSAGE_BYTES && d.fix.len() <= MAX_MESSAGE_BYTES);
        assert!(Error::from(d).message().len() <= MAX_MESSAGE_BYTES);
    }

    #[test]
    fn brief_values_are_cut_without_formatting_them_whole() {
        assert_eq!(brief("[1, 2]", 80), "[1, 2]");
        let v = serde_json::Value::Array(vec![serde_json::json!(0.5); 1_000_000]);
        let b = brief(&v, 80);
        assert!(b.len() <= 80 && b.starts_with("[0.5,0.5,") && b.ends_with("… (more)"), "{b}");
        let b = brief("é".repeat(100), 81);
        assert!(b.len() <= 81 && b.ends_with("… (more)"), "{b}");
    }
}
