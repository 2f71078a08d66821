//! The one error type of this crate's own code: the drain's queue operations. Everything the
//! lake does fails with [`lakestream_core::Error`]; the handler turns both into a
//! [`lakestream_lambda::FunctionError`].

/// A queue operation of the scheduled drain failed; the messages stay in the queue and come
/// back after the visibility timeout.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `ReceiveMessage` or `DeleteMessageBatch` failed (check the function's SQS permissions
    /// and `LAKESTREAM_QUEUE_URL`).
    #[error("{operation} on {queue}: {message}")]
    Queue {
        /// The SQS operation.
        operation: &'static str,
        /// The queue URL.
        queue: String,
        /// What SQS (or the SDK) said.
        message: String,
    },
}

/// This crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
