//! Built-in stages that are not tables: the parser.

pub mod parser;
