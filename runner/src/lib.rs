
pub mod policy;
