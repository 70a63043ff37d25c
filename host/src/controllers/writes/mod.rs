//! What both controllers write to the API server: children created under their owner
//! (`create`), Events (`events`), conditions and status patches (`status`), and the lean
//! answers of those writes (`lean`).

pub mod create;
pub mod events;
pub mod lean;
pub mod status;
