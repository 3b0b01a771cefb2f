//! Every name a counters file may give, as dcgm-exporter looks it up:
//! go-dcgm's field table, its legacy 1.x names, deprecated aliases and
//! the exporter's own fields (`dcgm-fields.txt`, which says where each
//! came from). A name outside it is no DCGM field at all.

const TABLE: &str = include_str!("../dcgm-fields.txt");

/// Where a name comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A current DCGM field name.
    Field,
    /// go-dcgm's legacy lowercase name (dcgm-exporter 1.x).
    Legacy,
    /// An old DCGM name kept as an alias.
    Deprecated,
    /// A field dcgm-exporter makes itself (`DCGM_EXP_*`).
    Exporter,
}

/// Every row of the table: origin, name, id.
fn rows() -> impl Iterator<Item = (Origin, &'static str, u16)> {
    TABLE
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let mut cols = l.split(' ');
            let origin = match cols.next()? {
                "field" => Origin::Field,
                "legacy" => Origin::Legacy,
                "deprecated" => Origin::Deprecated,
                "exporter" => Origin::Exporter,
                _ => return None,
            };
            Some((origin, cols.next()?, cols.next()?.parse().ok()?))
        })
}

/// `name`'s origin and the current name of its field, `None` where no
/// DCGM field is so named.
pub fn lookup(name: &str) -> Option<(Origin, &'static str)> {
    let (origin, own, id) = rows().find(|r| r.1 == name)?;
    let current = match origin {
        Origin::Field | Origin::Exporter => own,
        Origin::Legacy | Origin::Deprecated => {
            rows().find(|r| r.0 == Origin::Field && r.2 == id)?.1
        }
    };
    Some((origin, current))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_each_field_once_and_resolves_old_names() {
        let all: Vec<_> = rows().collect();
        // go-dcgm's 624 current names, 41 legacy, 1 alias, 4 of the exporter's.
        let count = |o| all.iter().filter(|r| r.0 == o).count();
        assert_eq!(
            [
                Origin::Field,
                Origin::Legacy,
                Origin::Deprecated,
                Origin::Exporter
            ]
            .map(count),
            [624, 41, 1, 4]
        );
        let lines = TABLE.lines().filter(|l| !l.starts_with('#')).count();
        assert_eq!(lines, all.len(), "a row the parser skips");
        let mut names: Vec<_> = all.iter().map(|r| r.1).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len(), "a name twice");
        for (name, want) in [
            (
                "dcgm_gpu_temp",
                Some((Origin::Legacy, "DCGM_FI_DEV_GPU_TEMP")),
            ),
            (
                "dcgm_fi_prof_pcie_tx_bytes",
                Some((Origin::Legacy, "DCGM_FI_PROF_PCIE_TX_BYTES")),
            ),
            (
                "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
                Some((Origin::Deprecated, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS")),
            ),
            (
                "DCGM_FI_DEV_FAN_SPEED",
                Some((Origin::Field, "DCGM_FI_DEV_FAN_SPEED")),
            ),
            (
                "DCGM_EXP_P2P_STATUS",
                Some((Origin::Exporter, "DCGM_EXP_P2P_STATUS")),
            ),
            ("DCGM_FI_NOPE", None),
            ("dcgm_fi_dev_gpu_temp", None),
        ] {
            assert_eq!(lookup(name), want, "{name}");
        }
    }
}
