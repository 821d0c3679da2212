//! Built-in sources. Real sources are plugins; the in-memory source serves development and the
//! black-box tests of the host.

pub mod memory;

pub use memory::MemorySource;
