//! The operator's one error type. Each variant has a `reason()` used as a metric label.

use crate::sandbox::GuestError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The rules failed or their plan was rejected: nothing of the plan was applied.
    #[error("{0}")]
    Guest(#[from] GuestError),
    /// The API server refused or failed a request; the reconcile is retried.
    #[error("Kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    /// An object lacks something the operator needs (say, a namespace).
    #[error("{0}")]
    MissingField(String),
}

impl Error {
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Guest(e) => e.reason(),
            Error::Kube(kube::Error::Api(status)) if status.code == 409 => "ApiConflict",
            Error::Kube(kube::Error::Api(status)) if status.code == 404 => "ApiNotFound",
            Error::Kube(_) => "ApiError",
            Error::MissingField(_) => "MissingField",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
