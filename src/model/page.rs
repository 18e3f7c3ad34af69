//! A page of plants, as every store lists them: the door (`crate::plants`)
//! hands the API the same `Page` whichever store read it.

use super::Plant;

/// One page of a listing.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Page {
    /// The plants, ascending by id.
    pub items: Vec<(i64, Plant)>,
    /// Whether more matching plants follow the last one.
    pub more: bool,
}
