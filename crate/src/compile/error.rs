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
    /// The option it is about, by its `poptorch.Options` JSON key
    /// (`Training.gradientAccumulation`, `executionStrategy.autoStage`), when it is about one:
    /// the page finds the panel's field from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub option: Option<String>,
}

impl Diagnostic {
    /// The message and the fix are capped at [`crate::error::MAX_MESSAGE_BYTES`] each.
    pub fn new(code: &'static str, message: impl Into<String>, fix: impl Into<String>) -> Diagnostic {
        Diagnostic {
            code,
            message: crate::error::cap(message.into()),
            fix: crate::error::cap(fix.into()),
            node: None,
            option: None,
        }
    }

    /// The same diagnostic about option `key` (its `poptorch.Options` JSON key).
    pub fn on(mut self, key: impl Into<String>) -> Diagnostic {
        self.option = Some(key.into());
        self
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

/// A plan's error as a thrown error, of kind `Plan`: PopTorch's message followed by the fix
/// (as PopTorch's own messages end with what to do), with the code, fix and option kept.
impl From<Diagnostic> for crate::Error {
    fn from(d: Diagnostic) -> crate::Error {
        let e = crate::Error::new(crate::ErrorKind::Plan, d.message).with_code(d.code).with_fix(d.fix);
        match d.option {
            Some(key) => e.with_option(key),
            None => e,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn a_diagnostic_becomes_an_error_with_its_fix_code_and_option() {
        let d = Diagnostic::new("ipu_count_not_power_of_two", "The model uses 3 IPUs.", "Set autoRoundNumIPUs(True).")
            .on("autoRoundNumIPUs");
        let e: crate::Error = d.into();
        assert_eq!(e.kind(), ErrorKind::Plan);
        assert_eq!(e.message(), "The model uses 3 IPUs. Set autoRoundNumIPUs(True).");
        assert_eq!(
            (e.code(), e.fix(), e.option()),
            (Some("ipu_count_not_power_of_two"), Some("Set autoRoundNumIPUs(True)."), Some("autoRoundNumIPUs"))
        );
    }
}
