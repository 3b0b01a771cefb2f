//! A reading's column on the status page (`Reading::status`): its head
//! and how its cell shows the reading. The page writes the columns in the
//! table's order, between a GPU's name and its `up`; an absent reading is
//! an en dash, never 0.

use super::{Family, Reading, all};

/// A reading's column on the status page.
#[derive(Clone, Copy)]
pub struct Column {
    pub head: &'static str,
    /// What the head says when pointed at; empty for nothing.
    pub title: &'static str,
    pub cell: Cell,
}

pub const fn column(head: &'static str, cell: Cell) -> Column {
    Column {
        head,
        title: "",
        cell,
    }
}

impl Column {
    pub const fn titled(mut self, title: &'static str) -> Column {
        self.title = title;
        self
    }
}

/// How a cell shows its reading.
#[derive(Clone, Copy)]
pub enum Cell {
    /// Its value.
    Value(Number),
    /// Its value over that of the reading `of` shows: `a / b unit`.
    Over(&'static Family, Number),
    /// `yes`, in red, while the clocks are held down
    /// (`Readings::throttled`), else `no`.
    Throttled,
    /// The watched Xid codes' count (`Readings::critical_xid_total`).
    CriticalXid,
}

/// A number in a cell: the value over `scale`, rounded to `decimals`
/// places, then `unit` (HTML).
#[derive(Clone, Copy)]
pub struct Number {
    pub scale: f64,
    pub decimals: i32,
    pub unit: &'static str,
}

pub const fn number(scale: f64, decimals: i32, unit: &'static str) -> Number {
    Number {
        scale,
        decimals,
        unit,
    }
}

/// Bytes in GiB, to a tenth.
pub const GIB_CELL: Number = number(1024.0 * 1024.0 * 1024.0, 1, " GiB");

/// The readings with a column, in the page's order.
pub fn columns() -> impl Iterator<Item = (&'static Reading, &'static Column)> {
    all().filter_map(|r| Some((r, r.status?)))
}
