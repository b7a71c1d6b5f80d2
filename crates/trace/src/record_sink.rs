//! `RecordSink`: what the trace writers share — the output and its name for errors, the line
//! buffer each record is rendered into, and the count of records written (named in errors).

use std::io::Write;

use crate::error::TraceError;

/// One writer's output, in whole lines.
pub(crate) struct RecordSink<W: Write> {
    out: W,
    path: String,
    format: &'static str,
    line: Vec<u8>,
    written: u64,
}

impl<W: Write> RecordSink<W> {
    /// Lines of `format` to `out`, called `path` in errors.
    pub(crate) fn new(out: W, path: impl Into<String>, format: &'static str) -> Self {
        RecordSink { out, path: path.into(), format, line: Vec::with_capacity(128), written: 0 }
    }

    /// The error for the next record, which this format cannot hold.
    pub(crate) fn unwritable(&self, message: impl Into<String>) -> TraceError {
        TraceError::Unwritable { index: self.written, format: self.format, message: message.into() }
    }

    /// An empty line buffer to render the next record into.
    pub(crate) fn line(&mut self) -> &mut Vec<u8> {
        self.line.clear();
        &mut self.line
    }

    /// Send the rendered line (its `\n` included) and count the record.
    pub(crate) fn send_line(&mut self) -> Result<(), TraceError> {
        self.out.write_all(&self.line).map_err(|e| TraceError::io(&self.path, e))?;
        self.written += 1;
        Ok(())
    }

    /// Flush and return the output.
    pub(crate) fn finish(mut self) -> Result<W, TraceError> {
        self.out.flush().map_err(|e| TraceError::io(&self.path, e))?;
        Ok(self.out)
    }
}
