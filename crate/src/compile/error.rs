//! Errors and warnings of a plan: a stable code, a message naming the cause (PopTorch's,
//! in our words, where PopTorch raises one) and the fix.

use serde::Serialize;
use std::fmt;

/// One error or warning. `node` is the program node it points at, when there is one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnostic {
    /// A stable identifier (`ipu_count_not_power_of_two`, `out_of_memory`, …).
    pub code: &'static str,
    pub message: String,
    pub fix: String,
    pub node: Option<usize>,
}

impl Diagnostic {
    /// The message and the fix are capped at [`crate::error::MAX_MESSAGE_BYTES`] each.
    pub fn new(code: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Diagnostic {
        Diagnostic { code, message: crate::error::cap(message.into()), fix: crate::error::cap(fix.into()), node: None }
    }

    /// The same diagnostic pointing at program node `node`.
    pub fn at(mut self, node: usize) -> Diagnostic {
        self.node = Some(node);
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)?;
        if !self.fix.is_empty() {
            write!(f, " Fix: {}", self.fix)?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostic {}
