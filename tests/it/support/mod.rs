//! Test support shared by the integration tests.

pub mod cli;
pub mod corpus;
pub mod gradcheck;
pub mod keras;
pub mod lowering;
pub mod op_cases;
pub mod pjrt;
