//! The command-line interface.
