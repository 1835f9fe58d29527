//! Helpers the tests of this binary share. `ccm.rs` and `chart.rs` live beside `tests/image.rs`,
//! a test binary of its own that uses them too.

#[path = "../../support/ccm.rs"]
pub mod ccm;
#[path = "../../support/chart.rs"]
pub mod chart;
