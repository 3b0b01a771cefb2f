//! Which of our readings each dcgm-exporter field shows, in its unit:
//! a plain reading's as its declaration says (`Reading::dcgm`), the rest
//! here: %, ns of throttling, counts by index; the profiling fields'
//! ratios and bytes per second are read in it.

use model::Readings;
use model::dcgm::{Field, Whole};

/// The value of `f` in dcgm-exporter's unit, where we have the reading.
pub(super) fn value(f: Field, r: &Readings) -> Option<f64> {
    use Field::*;
    let h = &r.health;
    let ns = |i: usize| r.clocks_event_seconds_total[i].map(|s| s * 1e9);
    match f {
        Reading(reading) => Some(reading.dcgm?.unit.of(reading.value(r)?)),
        EncUtil => h.media_ratios[0].map(|v| v * 100.0),
        DecUtil => h.media_ratios[1].map(|v| v * 100.0),
        CorrectableRemapped => h.remapped_rows[0],
        UncorrectableRemapped => h.remapped_rows[1],
        Prof(id) => r.profiling(id),
        RetiredSbe => h.retired_pages[0],
        RetiredDbe => h.retired_pages[1],
        NvlinkCrcFlit => h.nvlink_errors[0],
        NvlinkCrcData => h.nvlink_errors[1],
        NvlinkReplay => h.nvlink_errors[2],
        NvlinkRecovery => h.nvlink_errors[3],
        // sw_power_cap, sw_thermal_slowdown, sync_boost in CLOCK_EVENT_REASONS.
        PowerViolation => ns(2),
        ThermalViolation => ns(5),
        SyncBoostViolation => ns(4),
        // The last code, 0 before any, as dcgm-exporter.
        XidErrors => r.xid_last_code,
        // NVML's speed of the first fan, % of its maximum.
        FanSpeed => h.fan_speed_ratios[0].map(|v| v * 100.0),
        // NVML's mask as DCGM passes it on.
        ClocksEventReasons => r.clocks_event_mask.map(|m| m as f64),
        // Written by their own code: labels, and a series per code.
        DriverVersion | DevName | DevUuid | PciBusId | VbiosVersion | InforomImage | XidCount
        | Unservable => None,
    }
}

/// `v` as dcgm-exporter prints `f` ([`Field::whole`]).
pub(super) fn shaped(f: Field, v: f64) -> f64 {
    match f.whole() {
        Whole::Round => v.round(),
        Whole::Floor => v.floor(),
        Whole::AsRead => v,
    }
}

/// dcgm-exporter's `err_msg` outside its table.
const UNKNOWN: &str = "Unknown Error";

/// dcgm-exporter's `err_msg` for an Xid code: line `code` of its table
/// (`xid-messages.txt`: its `xidErrCodeToText`, read at commit 3446595
/// of NVIDIA/dcgm-exporter, with 173 codes from 0, "No Error", to 172),
/// `Unknown Error` outside it.
#[cfg(feature = "dcgm-xid-texts")]
pub(super) fn xid_message(code: u32) -> &'static str {
    XID_MESSAGES.lines().nth(code as usize).unwrap_or(UNKNOWN)
}

#[cfg(any(test, feature = "dcgm-xid-texts"))]
const XID_MESSAGES: &str = include_str!("xid-messages.txt");

/// A build without the table (`--no-default-features`, held to its size)
/// has the texts of the codes seen most; other codes read `Unknown Error`.
#[cfg(not(feature = "dcgm-xid-texts"))]
pub(super) fn xid_message(code: u32) -> &'static str {
    match code {
        0 => "No Error",
        13 => "Graphics Engine Exception",
        31 => "GPU memory page fault",
        43 => "GPU stopped processing",
        45 => {
            "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda"
        }
        48 => "Double Bit ECC Error",
        63 => "ECC page retirement or row remapping recording event",
        64 => "ECC page retirement or row remapper recording failure",
        74 => "NVLINK Error",
        79 => "GPU has fallen off the bus",
        92 => "High single-bit ECC error rate",
        94 => "Contained ECC error",
        95 => "Uncontained ECC error",
        109 => "Context Switch Timeout Error",
        119 => "GSP RPC Timeout",
        120 => "GSP Error",
        _ => UNKNOWN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One text a line, codes 0 to 172; the short table, where a build
    /// has it, says what the full one says.
    #[test]
    fn xid_messages() {
        let lines: Vec<&str> = XID_MESSAGES.lines().collect();
        assert_eq!(lines.len(), 173);
        assert!(lines.iter().all(|l| !l.is_empty() && l.trim() == *l));
        for (code, want) in [(0, "No Error"), (79, "GPU has fallen off the bus")] {
            assert_eq!(lines[code], want);
        }
        assert_eq!(lines[172], "Uncorrectable SRAM Error");
        for code in 0..200 {
            let got = xid_message(code);
            let full = lines.get(code as usize).copied().unwrap_or(UNKNOWN);
            assert!(got == full || got == UNKNOWN, "{code}: {got}");
        }
        assert_eq!(xid_message(173), UNKNOWN);
        assert_eq!(xid_message(u32::MAX), UNKNOWN);
    }
}
