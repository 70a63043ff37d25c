//! Why a module was refused or a guest call failed, and why a plan was refused. Each variant
//! has a stable `reason()`, used as the Hikawa condition's reason and as a metric label.

use zundoko_rules::RuleError;

#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    // --- loading a module ---
    #[error("the module file is empty (0 bytes)")]
    EmptyModule,
    #[error("not a WebAssembly component: {0}")]
    NotAComponent(String),
    #[error(
        "the module does not implement the rules world: expected an export {expected}, found {found}"
    )]
    WorldMismatch { expected: String, found: String },
    #[error("the module needs capabilities the sandbox does not give: it imports {0} (a rules module may import zundokokiyoshi:rules/log and WASI 0.2's io, clocks, random, cli, filesystem and sockets, which the sandbox serves without capabilities)")]
    ForbiddenImport(String),
    #[error("the module's info() {field} is refused: {why} (it starts \"{value}\")")]
    BadModuleMetadata {
        field: &'static str,
        why: String,
        /// A short, escaped prefix of the refused value.
        value: String,
    },
    #[error("the module asks for {asked} {what}, more than this operator's ceiling of {ceiling} ({flag})")]
    OverCeiling { what: &'static str, asked: u64, ceiling: u64, flag: &'static str },
    #[error("the module could not be compiled: {0}")]
    CompileFailed(String),
    /// A compile stopped by a tenant policy's ceiling (lower than the operator's own bound):
    /// `field` is the policy's (`spec.ceilings.compileMemoryMiB`, `spec.ceilings.compileSeconds`).
    #[error("the module could not be compiled within its tenant policy's {field}: {message}")]
    CompileOverCeiling { field: &'static str, message: String },
    #[error(
        "the module's compiled code does not fit the cache's free space: over {room} bytes came back (--cache-max-mib less what serves now and the writes in flight, or less if the disk has less free); refused, not kept"
    )]
    CacheFull { room: u64 },
    #[error(
        "the module's compiled code does not fit {tenant}'s part of the cache: over {room} bytes came back (--cache-max-mib shared equally by the tenants keeping modules in it, less what of {tenant}'s serves now); refused, not kept"
    )]
    CacheShareFull { tenant: String, room: u64 },
    #[error("the module failed its smoke test: {0}")]
    SmokeTestFailed(String),

    // --- one call ---
    #[error("the guest ran out of its CPU budget of {budget} fuel units (an endless loop?)")]
    OutOfCpuBudget { budget: u64 },
    #[error("the guest tried to grow its memory to {requested} bytes, past the cap of {limit} bytes")]
    MemoryCap { limit: usize, requested: usize },
    #[error("the guest made the host hold too much: {what} (the limit is {limit})")]
    HostLimit { what: String, limit: usize },
    #[error("the guest overflowed its stack (runaway recursion?)")]
    StackOverflow,
    #[error("the guest trapped: {trap}{}", guest_message.as_ref().map(|m| format!(" (the guest said: {m})")).unwrap_or_default())]
    Trap {
        trap: String,
        guest_message: Option<String>,
    },
    #[error("the rules could not decide: {0}")]
    Rules(RuleError),
    #[error("the plan was rejected: {0}")]
    InvalidPlan(#[from] PlanRejection),
    #[error("the host failed to run the guest: {0}")]
    Host(String),
}

impl GuestError {
    /// A stable CamelCase reason for conditions, Events and metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            GuestError::EmptyModule => "EmptyModule",
            GuestError::NotAComponent(_) => "NotAComponent",
            GuestError::WorldMismatch { .. } => "WorldMismatch",
            GuestError::ForbiddenImport(_) => "ForbiddenImport",
            GuestError::BadModuleMetadata { .. } => "BadModuleMetadata",
            GuestError::OverCeiling { .. } => "BudgetOverCeiling",
            GuestError::CompileFailed(_) | GuestError::CompileOverCeiling { .. } => "CompileFailed",
            GuestError::CacheFull { .. } | GuestError::CacheShareFull { .. } => "CacheFull",
            GuestError::SmokeTestFailed(_) => "SmokeTestFailed",
            GuestError::OutOfCpuBudget { .. } => "OutOfCpuBudget",
            GuestError::MemoryCap { .. } => "MemoryCapExceeded",
            GuestError::HostLimit { .. } => "HostResourceLimit",
            GuestError::StackOverflow => "StackOverflow",
            GuestError::Trap { .. } => "GuestTrapped",
            GuestError::Rules(e) => e.reason(),
            GuestError::InvalidPlan(_) => "PlanRejected",
            GuestError::Host(_) => "HostError",
        }
    }
}

/// Why a plan was refused (by the plan check, `supply/contract/plan_check.rs`). The messages
/// name the action (counting from 1) and the limit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanRejection {
    #[error("the plan has {actions} actions, more than the limit of {limit}")]
    TooManyActions { actions: usize, limit: usize },
    #[error("action {action}: namespace {found:?} is not the Hikawa's namespace {expected:?}")]
    ForeignNamespace { action: usize, expected: String, found: String },
    #[error("action {action}: name {found:?} is not this Hikawa's child name {expected:?}")]
    ForeignName { action: usize, expected: String, found: String },
    #[error("action {action}: says word {found} but the next word is {expected}")]
    WrongIndex { action: usize, expected: u32, found: u32 },
    #[error("action {action}: the word {word:?} is not allowed: {why}")]
    BadWord { action: usize, word: String, why: String },
    #[error("action {action}: this Hikawa already has its Kiyoshi; nothing more may be said")]
    AfterKiyoshi { action: usize },
    #[error("action {action}: would make {children} Zundokos, more than the cap of {limit} per Hikawa")]
    TooManyChildren { action: usize, children: u32, limit: u32 },
    #[error("action {action}: a plan may hold only one {what}")]
    Duplicate { action: usize, what: &'static str },
    #[error("action {action}: requeue after {ms} ms is longer than the limit of {limit} ms")]
    RequeueTooLong { action: usize, ms: u64, limit: u64 },
    #[error("action {action}: status {field} is not allowed: {why}")]
    BadStatus { action: usize, field: &'static str, why: String },
}
