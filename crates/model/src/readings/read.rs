//! How a reading is read: its series for the render, its [`Readings`]
//! field for the range check and [`Readings::retain`], and the macros that
//! make both from the field's path.

use super::{Reading, Readings};
use crate::{NvlinkLink, TxRx};

/// An extra label after `gpu` and `uuid`: a whole one spelled out
/// (`,reason="hw_slowdown"`), a number, or a number and then a whole one.
#[derive(Clone, Copy)]
pub enum Extra {
    None,
    Label(&'static str),
    Num(&'static str, u32),
    NumLabel(&'static str, u32, &'static str),
}

/// A reading's series: each extra label set and its value.
pub type Series = fn(&Readings, &mut dyn FnMut(Extra, f64));

/// The [`Readings`] field a reading is, to check and to clear.
pub enum Field<'a> {
    Value(&'a mut Option<f64>),
    Values(&'a mut [Option<f64>]),
    Pair(&'a mut Option<TxRx>),
    Mask(&'a mut Option<u64>),
    Flag(&'a mut Option<bool>),
    Xids(&'a mut Option<Vec<(u32, u64)>>),
    Links(&'a mut Vec<NvlinkLink>),
}

impl Field<'_> {
    /// Leaves the reading out.
    pub fn clear(self) {
        match self {
            Field::Value(v) => *v = None,
            Field::Values(v) => v.fill(None),
            Field::Pair(v) => *v = None,
            Field::Mask(v) => *v = None,
            Field::Flag(v) => *v = None,
            Field::Xids(v) => *v = None,
            Field::Links(v) => v.clear(),
        }
    }
}

/// How a reading is read: its series for the render, its field for the
/// range check and [`Readings::retain`]. The macros below make both from
/// the field's path.
#[derive(Clone, Copy)]
pub struct Read {
    pub series: Series,
    pub field: for<'a> fn(&'a mut Readings) -> Field<'a>,
}

/// One series, from an `Option<f64>` field.
macro_rules! one {
    ($($f:ident).+) => {
        $crate::readings::Read {
            series: |r, f| {
                if let Some(v) = r.$($f).+ {
                    f($crate::readings::Extra::None, v)
                }
            },
            field: |r| $crate::readings::Field::Value(&mut r.$($f).+),
        }
    };
}
pub(crate) use one;

/// One series a label, from an array field: `each!(path, LABELS)`.
macro_rules! each {
    ($($f:ident).+, $labels:expr) => {
        $crate::readings::Read {
            series: |r, f| $crate::readings::each_label(&$labels, &r.$($f).+, f),
            field: |r| $crate::readings::Field::Values(&mut r.$($f).+),
        }
    };
}
pub(crate) use each;

/// 1 or 0, from an `Option<bool>` field.
macro_rules! flag {
    ($($f:ident).+) => {
        $crate::readings::Read {
            series: |r, f| {
                if let Some(v) = r.$($f).+ {
                    f($crate::readings::Extra::None, if v { 1.0 } else { 0.0 })
                }
            },
            field: |r| $crate::readings::Field::Flag(&mut r.$($f).+),
        }
    };
}
pub(crate) use flag;

pub fn each_label(labels: &[&'static str], values: &[Option<f64>], f: &mut dyn FnMut(Extra, f64)) {
    for (label, v) in labels.iter().zip(values) {
        if let Some(v) = v {
            f(Extra::Label(label), *v);
        }
    }
}

pub(super) fn directions(v: Option<TxRx>, f: &mut dyn FnMut(Extra, f64)) {
    if let Some(v) = v {
        f(Extra::Label(",direction=\"tx\""), v.tx);
        f(Extra::Label(",direction=\"rx\""), v.rx);
    }
}

// A reading is itself: the dcgm fields compare and print it by its family.
impl PartialEq for Reading {
    fn eq(&self, other: &Reading) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Reading {}

impl std::hash::Hash for Reading {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        std::ptr::hash(self, h);
    }
}

impl std::fmt::Debug for Reading {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.family.name)
    }
}

impl Reading {
    /// Its value in `r`, where it is one series without labels (`one!`,
    /// `flag!`).
    pub fn value(&self, r: &Readings) -> Option<f64> {
        let mut out = None;
        (self.read.series)(r, &mut |extra, v| {
            if matches!(extra, Extra::None) {
                out = Some(v);
            }
        });
        out
    }
}
