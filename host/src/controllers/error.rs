//! The reconcile error both controllers return. Each variant has a `reason()` used as a metric
//! label and as the reason of the Hikawa's Ready condition.

use crate::supply::sandbox::GuestError;
use crate::supply::serving::RulesUnavailable;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The rules failed or their plan was rejected: nothing of the plan was applied.
    #[error("{0}")]
    Guest(#[from] GuestError),
    /// A child's name is held by an object this Hikawa does not control: the word is not
    /// said (and not counted) until that object is gone.
    #[error("{child} already exists and is not this Hikawa's ({holder}): the word cannot be said until it is removed")]
    ChildNameTaken { child: String, holder: String },
    /// The API server refused or failed a request; the reconcile is retried.
    #[error("Kubernetes API error: {0}")]
    Kube(#[from] kube::Error),
    /// An object lacks something the operator needs (say, a namespace).
    #[error("{0}")]
    MissingField(String),
    /// The Hikawa names rules (`spec.rules`) that do not exist or serve no module: it waits
    /// until they do.
    #[error("{message}")]
    RulesUnavailable { rules: String, reason: &'static str, message: String },
}

impl From<RulesUnavailable> for Error {
    fn from(RulesUnavailable { rules, reason, message }: RulesUnavailable) -> Self {
        Error::RulesUnavailable { rules, reason, message }
    }
}

impl Error {
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Guest(e) => e.reason(),
            Error::ChildNameTaken { .. } => "ChildNameTaken",
            Error::Kube(kube::Error::Api(status)) => match status.code {
                409 => "ApiConflict",
                404 => "ApiNotFound",
                422 => "ApiInvalid",
                403 => "ApiForbidden",
                429 => "ApiTooManyRequests",
                400..=499 => "ApiRefused",
                _ => "ApiError",
            },
            Error::Kube(kube::Error::Service(e)) if e.is::<crate::process::leader::fence::NotLeading>() => "NotLeading",
            Error::Kube(kube::Error::Service(e)) if e.is::<crate::process::leader::fence::RequestTimedOut>() => "ApiTimeout",
            Error::Kube(_) => "ApiUnreachable",
            Error::MissingField(_) => "MissingField",
            Error::RulesUnavailable { reason, .. } => reason,
        }
    }

    /// Worth recording on the Hikawa at the first occurrence: the same request will be
    /// refused again (a bad name, a taken name, a guest that fails). A server error, a
    /// conflict or a lost connection is recorded only if it keeps happening.
    pub fn is_lasting(&self) -> bool {
        match self {
            Error::Kube(kube::Error::Api(status)) => (400..500).contains(&status.code) && !matches!(status.code, 404 | 409 | 429),
            Error::Kube(_) => false,
            _ => true,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
