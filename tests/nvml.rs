//! The NVML source against the fake libnvidia-ml (fake-nvml/), through the
//! real dlopen path.
//!
//! Each test copies the fake into a directory of its own as
//! `libnvidia-ml.so.1` next to a `scenario.json`, which the fake reads from
//! the directory it was loaded from. Copies are distinct files, so the
//! loader gives each test its own instance with its own state, and tests
//! run in parallel without touching the process environment.

use model::{CRITICAL_XIDS, Gpu, Readings, TxRx};
use sources::Source;
use sources::nvml::{Nvml, Options};
use std::path::Path;
use std::time::{Duration, Instant};

#[path = "support/fake_nvml.rs"]
mod fake_nvml;
use fake_nvml::Fixture;

trait Open {
    fn open(&self) -> Nvml;
    fn open_with(&self, options: Options) -> Nvml;
}

impl Open for Fixture {
    fn open(&self) -> Nvml {
        self.open_with(Options {
            event_wait: Duration::from_millis(50),
            ..Options::default()
        })
    }

    fn open_with(&self, options: Options) -> Nvml {
        Nvml::open_with(Some(&self.lib), options).expect("the fake library exists")
    }
}

/// One GPU's values, each derived from its index so that a reading put on
/// the wrong GPU or in the wrong unit shows.
struct Spec {
    i: u64,
}

impl Spec {
    fn uuid(&self) -> String {
        format!("GPU-{:08x}-1111-2222-3333-444455556666", self.i)
    }
    fn bus_id(&self) -> String {
        format!("00000000:{:02X}:00.0", 0x18 + self.i * 0x10)
    }
    fn temperature(&self) -> u64 {
        40 + self.i
    }
    fn sm_mhz(&self) -> u64 {
        1400 + 10 * self.i
    }
    fn mask(&self) -> u64 {
        [0x0, 0x1, 0x4, 0x8, 0x20, 0x40, 0x80, 0x104][self.i as usize % 8]
    }
    fn power_mw(&self) -> u64 {
        300_000 + 1_500 * self.i
    }
    fn energy_mj(&self) -> u64 {
        1_000_000_000 + 12_345 * self.i
    }
    fn util(&self) -> u64 {
        10 * self.i + 5
    }
    fn used(&self) -> u64 {
        (self.i + 1) << 32
    }
    fn tx_kbps(&self) -> u64 {
        1000 * (self.i + 1)
    }
    fn rx_kbps(&self) -> u64 {
        3000 + self.i
    }
    /// Violation ns for power, thermal and sync boost: all three on every
    /// third GPU, no sync boost on the next, none at all on the one after.
    fn violation_ns(&self) -> Option<[Option<u64>; 3]> {
        let i = self.i + 1;
        let all = [
            Some(i * 1_250_000_000),
            Some(i * 500_000_000),
            Some(3_000_000_000 + i * 250_000_000),
        ];
        match self.i % 3 {
            0 => Some(all),
            1 => Some([all[0], all[1], None]),
            _ => None,
        }
    }
    /// NVLink KiB (tx, rx), on even GPUs only.
    fn nvlink_kib(&self) -> Option<(u64, u64)> {
        self.i
            .is_multiple_of(2)
            .then(|| (1_000_000 * (self.i + 1) + 7, 2_000_000 + self.i))
    }
    /// HBM °C, absent on every fourth GPU.
    fn memory_temperature(&self) -> Option<u64> {
        (self.i % 4 != 3).then_some(60 + self.i)
    }
    /// GPM percentages: SM active, SM occupancy, DRAM active.
    fn gpm(&self) -> [f64; 3] {
        let i = self.i as f64;
        [10.0 * i + 1.5, 5.0 * i + 2.25, 3.0 * i + 0.5]
    }

    fn json(&self) -> String {
        let i = self.i;
        format!(
            r#"{{"name":"NVIDIA H100 80GB HBM3","uuid":"{uuid}","bus_id":"{bus}",
            "temperature":{t},"sm_clock_mhz":{sm},"memory_clock_mhz":2619,"sm_clock_max_mhz":1980,
            "clocks_event_reasons":{mask},"power_mw":{p},"power_limit_mw":700000,"energy_mj":{e},
            "utilization":{{"gpu":{u},"memory":30}},
            "memory":{{"total":85520809984,"reserved":536870912,"free":{free},"used":{used}}},
            "ecc_corrected":{i},"ecc_uncorrected":{unc},"pcie_tx_kbps":{tx},"pcie_rx_kbps":{rx},
            "pcie_replay":{rep},
            "gpm":{{"sm_active":{g0},"sm_occupancy":{g1},"dram_active":{g2}}}{extra}}}"#,
            uuid = self.uuid(),
            bus = self.bus_id(),
            t = self.temperature(),
            sm = self.sm_mhz(),
            mask = self.mask(),
            p = self.power_mw(),
            e = self.energy_mj(),
            u = self.util(),
            free = 85520809984 - 536870912 - self.used(),
            used = self.used(),
            unc = i % 2,
            tx = self.tx_kbps(),
            rx = self.rx_kbps(),
            rep = 7 * i,
            g0 = self.gpm()[0],
            g1 = self.gpm()[1],
            g2 = self.gpm()[2],
            extra = self.optional_json(),
        )
    }

    /// The readings only some GPUs have, as JSON members after a comma.
    fn optional_json(&self) -> String {
        let mut out = String::new();
        if let Some(v) = self.violation_ns() {
            let members: Vec<_> = ["power", "thermal", "sync_boost"]
                .iter()
                .zip(v)
                .filter_map(|(k, ns)| ns.map(|ns| format!(r#""{k}":{ns}"#)))
                .collect();
            out += &format!(r#","violation_ns":{{{}}}"#, members.join(","));
        }
        if let Some((tx, rx)) = self.nvlink_kib() {
            out += &format!(r#","nvlink_kib":{{"tx":{tx},"rx":{rx}}}"#);
        }
        if let Some(t) = self.memory_temperature() {
            out += &format!(r#","memory_temperature":{t}"#);
        }
        out
    }

    /// Checks every reading the source takes from NVML, except the PCIe
    /// counter and GPM, which depend on timing.
    fn check(&self, g: &Gpu) {
        let i = self.i;
        let r = &g.readings;
        let at = format!("GPU {i}");
        assert_eq!(g.index as u64, i, "{at}");
        assert!(g.up, "{at}");
        assert_eq!(g.uuid, self.uuid(), "{at}");
        assert_eq!(g.model, "NVIDIA H100 80GB HBM3", "{at}");
        assert_eq!(g.pci_bus_id, self.bus_id(), "{at}");
        assert_eq!(g.driver_version, "550.54.15", "{at}");
        assert_eq!(
            r.temperature_celsius,
            Some(self.temperature() as f64),
            "{at}"
        );
        assert_eq!(r.sm_clock_hertz, Some(self.sm_mhz() as f64 * 1e6), "{at}");
        assert_eq!(r.sm_clock_max_hertz, Some(1980e6), "{at}");
        assert_eq!(r.memory_clock_hertz, Some(2619e6), "{at}");
        assert_eq!(r.clocks_event_mask, Some(self.mask()), "{at}");
        assert_eq!(
            r.power_usage_watts,
            Some(self.power_mw() as f64 / 1000.0),
            "{at}"
        );
        assert_eq!(r.power_limit_watts, Some(700.0), "{at}");
        assert_eq!(
            r.energy_joules_total,
            Some(self.energy_mj() as f64 / 1000.0),
            "{at}"
        );
        assert_eq!(
            r.utilization_ratio,
            Some(self.util() as f64 / 100.0),
            "{at}"
        );
        assert_eq!(r.memory_utilization_ratio, Some(0.3), "{at}");
        assert_eq!(r.memory_total_bytes, Some(85520809984.0), "{at}");
        assert_eq!(r.memory_reserved_bytes, Some(536870912.0), "{at}");
        assert_eq!(r.memory_used_bytes, Some(self.used() as f64), "{at}");
        assert_eq!(
            r.memory_free_bytes,
            Some((85520809984 - 536870912 - self.used()) as f64),
            "{at}"
        );
        assert_eq!(r.ecc_corrected_total, Some(i as f64), "{at}");
        assert_eq!(r.ecc_uncorrected_total, Some((i % 2) as f64), "{at}");
        assert_eq!(r.pcie_replay_errors_total, Some(7.0 * i as f64), "{at}");
        // No Xid happened, but the critical codes are there at 0.
        let zeros: Vec<_> = CRITICAL_XIDS.iter().map(|&c| (c, 0)).collect();
        assert_eq!(r.xid_errors.as_ref(), Some(&zeros), "{at}");
        assert_eq!(r.xid_last_timestamp_seconds, None, "{at}");
        assert_eq!(r.xid_last_code, Some(0.0), "{at}");
        self.check_field_values(r, &at);
        assert!(g.mig.is_empty(), "{at}");
    }

    /// Violation seconds, NVLink bytes and HBM temperature, each present
    /// exactly where the scenario has it.
    fn check_field_values(&self, r: &Readings, at: &str) {
        let i = self.i as f64 + 1.0;
        // CLOCK_EVENT_REASONS order; only sw_power_cap (2), sync_boost (4)
        // and sw_thermal_slowdown (5) have a violation counter.
        let mut seconds = [None; 9];
        if let Some([power, thermal, sync_boost]) = self.violation_ns() {
            seconds[2] = power.map(|_| 1.25 * i);
            seconds[5] = thermal.map(|_| 0.5 * i);
            seconds[4] = sync_boost.map(|_| 3.0 + 0.25 * i);
        }
        assert_eq!(r.clocks_event_seconds_total, seconds, "{at}");
        let nvlink = self.nvlink_kib().map(|(tx, rx)| TxRx {
            tx: (tx * 1024) as f64,
            rx: (rx * 1024) as f64,
        });
        assert_eq!(r.nvlink_bytes_total, nvlink, "{at}");
        let temp = self.memory_temperature().map(|t| t as f64);
        assert_eq!(r.memory_temperature_celsius, temp, "{at}");
    }

    /// GPM needs a previous sample: none on a GPU's first collection.
    fn check_gpm(&self, r: &Readings, first: bool) {
        let expected = self.gpm().map(|pc| (!first).then_some(pc / 100.0));
        let got = [r.sm_active_ratio, r.sm_occupancy_ratio, r.dram_active_ratio];
        assert_eq!(got, expected, "GPU {} gpm", self.i);
    }
}

fn scenario(gpus: &[String]) -> String {
    format!(
        r#"{{"driver_version":"550.54.15","gpus":[{}]}}"#,
        gpus.join(",")
    )
}

fn full_fleet(n: u64) -> String {
    scenario(&(0..n).map(|i| Spec { i }.json()).collect::<Vec<_>>())
}

fn collect(nvml: &mut Nvml) -> Vec<Gpu> {
    nvml.collect(0.0).expect("collect")
}

#[test]
fn eight_gpus_report_every_reading_in_base_units() {
    let f = Fixture::new("eight", &full_fleet(8));
    let mut nvml = f.open();
    assert_eq!(nvml.kind(), model::SourceKind::Nvml);

    let a = Instant::now();
    let first = collect(&mut nvml);
    let b = Instant::now();
    std::thread::sleep(Duration::from_millis(200));
    let c = Instant::now();
    let second = collect(&mut nvml);
    let d = Instant::now();

    assert_eq!(first.len(), 8);
    assert_eq!(second.len(), 8);
    for (i, (g1, g2)) in first.iter().zip(&second).enumerate() {
        let spec = Spec { i: i as u64 };
        spec.check(g1);
        spec.check(g2);
        spec.check_gpm(&g1.readings, true);
        spec.check_gpm(&g2.readings, false);
        // The rate integrates from 0: the source's interval lies between
        // the test's inner and outer measurements of it.
        assert_eq!(g1.readings.pcie_bytes_total, Some(TxRx::default()));
        let total = g2.readings.pcie_bytes_total.expect("pcie counter");
        let (short, long) = ((c - b).as_secs_f64(), (d - a).as_secs_f64());
        let tx = spec.tx_kbps() as f64 * 1024.0;
        let rx = spec.rx_kbps() as f64 * 1024.0;
        assert!(
            tx * short <= total.tx && total.tx <= tx * long,
            "GPU {i} tx {total:?}"
        );
        assert!(
            rx * short <= total.rx && total.rx <= rx * long,
            "GPU {i} rx {total:?}"
        );
    }
}

#[test]
fn zero_gpus_is_an_empty_fleet() {
    let f = Fixture::new("zero", r#"{"gpus":[]}"#);
    let mut nvml = f.open();
    assert_eq!(nvml.collect(0.0), Ok(vec![]));
}

#[test]
fn mig_instances_carry_their_own_memory() {
    let mig = r#"{"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-mig-parent","temperature":50,
        "utilization":{"gpu":99,"memory":99},"memory_temperature":61,
        "violation_ns":{"power":2000000000},"nvlink_kib":{"tx":3,"rx":4},
        "memory":{"total":85520809984,"reserved":536870912,"free":1000,"used":2000},
        "mig":[
          {"name":"NVIDIA H100 80GB HBM3 MIG 3g.40gb","uuid":"MIG-aaaa","gpu_instance_id":1,
           "memory":{"total":42949672960,"reserved":0,"free":40000000000,"used":2949672960},
           "gpm":{"sm_active":75.0,"sm_occupancy":30.0,"dram_active":12.5}},
          {"name":"NVIDIA H100 80GB HBM3 MIG 4g.40gb","uuid":"MIG-bbbb","gpu_instance_id":2}
        ]}"#;
    let f = Fixture::new("mig", &scenario(&[mig.to_string(), Spec { i: 1 }.json()]));
    let mut nvml = f.open();
    let first = collect(&mut nvml);
    assert_eq!(first[0].mig.len(), 2);
    assert_eq!(first[0].mig[0].readings.sm_active_ratio, None);
    std::thread::sleep(Duration::from_millis(150));
    let gpus = collect(&mut nvml);
    assert_eq!(gpus.len(), 2);

    let g = &gpus[0];
    assert!(g.up);
    assert_eq!(g.uuid, "GPU-mig-parent");
    assert_eq!(g.readings.temperature_celsius, Some(50.0));
    // NVML refuses utilisation on a GPU in MIG mode: absent, not 0 or 99.
    assert_eq!(g.readings.utilization_ratio, None);
    // The GPU-wide readings stay on the GPU; its instances (below) lack them.
    assert_eq!(g.readings.memory_temperature_celsius, Some(61.0));
    assert_eq!(g.readings.clocks_event_seconds_total[2], Some(2.0));
    assert_eq!(
        g.readings.nvlink_bytes_total,
        Some(TxRx {
            tx: 3072.0,
            rx: 4096.0
        })
    );
    assert_eq!(g.mig.len(), 2);

    let m = &g.mig[0];
    assert_eq!(m.uuid, "MIG-aaaa");
    assert_eq!(m.gpu_instance_id, 1);
    assert_eq!(m.profile, "3g.40gb");
    let expected = Readings {
        memory_total_bytes: Some(42949672960.0),
        memory_reserved_bytes: Some(0.0),
        memory_free_bytes: Some(40000000000.0),
        memory_used_bytes: Some(2949672960.0),
        // GPM per GPU instance, between the two collections.
        sm_active_ratio: Some(0.75),
        sm_occupancy_ratio: Some(0.30),
        dram_active_ratio: Some(0.125),
        ..Readings::default()
    };
    assert_eq!(m.readings, expected);

    let m = &g.mig[1];
    assert_eq!((m.uuid.as_str(), m.gpu_instance_id), ("MIG-bbbb", 2));
    assert_eq!(m.profile, "4g.40gb");
    // Memory not supported on this one: nothing is zero-filled.
    assert_eq!(m.readings, Readings::default());

    Spec { i: 1 }.check(&gpus[1]);
}

#[test]
fn a_lost_gpu_goes_down_while_the_others_keep_reporting() {
    let mut gpus: Vec<_> = (0..3).map(|i| Spec { i }.json()).collect();
    gpus[1] = gpus[1].replacen('{', r#"{"lost_after_collections":1,"#, 1);
    let f = Fixture::new("lost", &scenario(&gpus));
    let mut nvml = f.open();

    let before = collect(&mut nvml);
    for (i, g) in before.iter().enumerate() {
        Spec { i: i as u64 }.check(g);
    }
    for _ in 0..2 {
        let after = collect(&mut nvml);
        assert_eq!(after.len(), 3);
        Spec { i: 0 }.check(&after[0]);
        Spec { i: 2 }.check(&after[2]);
        let lost = &after[1];
        assert!(!lost.up);
        // Nothing read but the Xid counts its events keep.
        assert_eq!(
            lost.readings,
            Readings {
                xid_errors: Some(CRITICAL_XIDS.iter().map(|&c| (c, 0)).collect()),
                xid_last_code: Some(0.0),
                ..Readings::default()
            }
        );
        assert!(lost.mig.is_empty());
        // Still the GPU it was at that index; the fleet memory (see
        // src/fleet) gives it the rest of its identity.
        assert_eq!(lost.index, 1);
        assert_eq!(lost.uuid, Spec { i: 1 }.uuid());
        assert_eq!(lost.driver_version, "550.54.15");
    }
}

#[test]
fn unsupported_readings_are_absent_not_sentinels() {
    let sparse = r#"{"uuid":"GPU-sparse","temperature":33,"events":false}"#;
    let f = Fixture::new("unsupported", &scenario(&[sparse.to_string()]));
    let mut nvml = f.open();
    for _ in 0..2 {
        let gpus = collect(&mut nvml);
        assert_eq!(gpus.len(), 1);
        let g = &gpus[0];
        assert!(g.up);
        assert_eq!(g.uuid, "GPU-sparse");
        let mut expected = Readings {
            temperature_celsius: Some(33.0),
            ..Readings::default()
        };
        // The fake answers every GPU's MIG mode: off, a reading too.
        expected.health.mig_mode = Some(false);
        // Including xid_errors: no events, so another reader may fill it.
        assert_eq!(g.readings, expected);
    }
}

#[test]
fn an_old_driver_without_newer_symbols_still_reports() {
    let first = Spec { i: 0 };
    assert!(
        first.violation_ns().is_some()
            && first.nvlink_kib().is_some()
            && first.memory_temperature().is_some()
    );
    let f = Fixture::build("old-driver", &full_fleet(2), true);
    let mut nvml = f.open();
    collect(&mut nvml);
    std::thread::sleep(Duration::from_millis(150));
    let gpus = collect(&mut nvml);
    assert_eq!(gpus.len(), 2);
    for (i, g) in gpus.iter().enumerate() {
        let spec = Spec { i: i as u64 };
        let r = &g.readings;
        assert!(g.up);
        assert_eq!(g.uuid, spec.uuid());
        assert_eq!(r.temperature_celsius, Some(spec.temperature() as f64));
        // From nvmlDeviceGetCurrentClocksThrottleReasons instead.
        assert_eq!(r.clocks_event_mask, Some(spec.mask()));
        // From nvmlDeviceGetMemoryInfo (v1): reserved is counted as used.
        assert_eq!(r.memory_total_bytes, Some(85520809984.0));
        assert_eq!(r.memory_reserved_bytes, None);
        assert_eq!(r.memory_used_bytes, Some((spec.used() + 536870912) as f64));
        // No nvmlDeviceGetTotalEnergyConsumption, no nvmlEventSetWait_v2.
        assert_eq!(r.energy_joules_total, None);
        // No nvmlDeviceGetViolationStatus nor nvmlDeviceGetFieldValues,
        // though GPU 0's scenario has all three readings.
        assert_eq!(r.clocks_event_seconds_total, [None; 9]);
        assert_eq!(r.nvlink_bytes_total, None);
        assert_eq!(r.memory_temperature_celsius, None);
        assert_eq!(r.xid_errors, None);
        // No GPM calls at all, even with two samples' time.
        spec.check_gpm(r, true);
        assert_eq!(r.power_usage_watts, Some(spec.power_mw() as f64 / 1000.0));
    }
}

#[test]
fn a_slow_gpu_is_served_late_from_its_last_read_and_holds_back_no_other() {
    // Every power call on GPU 1 takes 1.5 s; a collection waits 0.3 s.
    let mut gpus: Vec<_> = (0..2).map(|i| Spec { i }.json()).collect();
    gpus[1] = gpus[1].replacen(
        '{',
        r#"{"slow":{"call":"nvmlDeviceGetPowerUsage","ms":1500},"#,
        1,
    );
    let f = Fixture::new("slow", &scenario(&gpus));
    let mut nvml = f.open_with(Options {
        event_wait: Duration::from_millis(50),
        deadline: Duration::from_millis(300),
        max_late: Duration::from_millis(800),
        ..Options::default()
    });
    let started = Instant::now();
    let at = |ms: u64| started + Duration::from_millis(ms);
    let sleep_until = |t: Instant| std::thread::sleep(t.saturating_duration_since(Instant::now()));

    // GPU 1 has no read ended: served late under the identity its reader
    // told first, with no readings; GPU 0 is served at the deadline.
    let first = collect(&mut nvml);
    assert!(started.elapsed() < Duration::from_millis(1500));
    assert_eq!(first.len(), 2, "{first:?}");
    Spec { i: 0 }.check(&first[0]);
    assert_eq!(first[0].reads_late, 0);
    assert_eq!(
        (first[1].up, first[1].reads_late, first[1].uuid.as_str()),
        (true, 1, "GPU-00000001-1111-2222-3333-444455556666")
    );
    assert_eq!(first[1].readings.power_usage_watts, None);

    // Its first read ended: served fresh, one late collection counted.
    sleep_until(at(1700));
    let second = collect(&mut nvml);
    assert_eq!(second.len(), 2);
    Spec { i: 1 }.check(&second[1]);
    assert_eq!((second[0].reads_late, second[1].reads_late), (0, 1));

    // Asked again, late again: the same readings, counted.
    let third = collect(&mut nvml);
    assert_eq!(third[1].readings, second[1].readings);
    assert_eq!(third[1].reads_late, 2);
    assert_eq!(third[0].reads_late, 0);

    // Still out, and its last read is older than max_late: its readings
    // withheld, the GPU itself still served (up, named), and the Xid
    // counts, which its events bring and not its read.
    // The third's ask went out at ~1.7 s and ends at ~3.2 s; this
    // collection waits until ~3.0 s, and its last read (taken at ~1.7 s)
    // is 1.3 s old: 200 ms of margin each way on a loaded machine.
    sleep_until(at(2700));
    let fourth = collect(&mut nvml);
    let g = &fourth[1];
    assert!(g.up && g.uuid == Spec { i: 1 }.uuid(), "{g:?}");
    let xids = Readings {
        xid_errors: g.readings.xid_errors.clone(),
        xid_last_code: g.readings.xid_last_code,
        ..Readings::default()
    };
    assert!(xids.xid_errors.is_some());
    assert_eq!(g.readings, xids);
    assert_eq!(g.reads_late, 3);
    Spec { i: 0 }.check(&fourth[0]);
}

#[test]
fn xid_events_are_counted_per_gpu_and_code() {
    let mut gpus: Vec<_> = (0..3).map(|i| Spec { i }.json()).collect();
    gpus[0] = gpus[0].replacen('{', r#"{"xids":[79,13,79,48],"#, 1);
    gpus[2] = gpus[2].replacen('{', r#"{"events":false,"#, 1);
    let f = Fixture::new("xid", &scenario(&gpus));
    let start = base::time::unix_now();
    let mut nvml = f.open();

    let mut expected: Vec<(u32, u64)> = CRITICAL_XIDS.iter().map(|&c| (c, 0)).collect();
    expected.push((13, 1));
    expected.sort();
    for (code, n) in expected.iter_mut() {
        *n = match code {
            48 => 1,
            79 => 2,
            _ => *n,
        };
    }
    // Events arrive on the Xid thread; wait for all four.
    let deadline = Instant::now() + Duration::from_secs(10);
    let gpus = loop {
        let gpus = collect(&mut nvml);
        if gpus[0].readings.xid_errors.as_ref() == Some(&expected) || Instant::now() > deadline {
            break gpus;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(gpus[0].readings.xid_errors.as_ref(), Some(&expected));
    let last = gpus[0]
        .readings
        .xid_last_timestamp_seconds
        .expect("a timestamp");
    assert!(start <= last && last <= base::time::unix_now());
    // [79, 13, 79, 48]: the last is 48.
    assert_eq!(gpus[0].readings.xid_last_code, Some(48.0));

    let zeros: Vec<_> = CRITICAL_XIDS.iter().map(|&c| (c, 0)).collect();
    assert_eq!(gpus[1].readings.xid_errors, Some(zeros));
    assert_eq!(gpus[1].readings.xid_last_timestamp_seconds, None);
    assert_eq!(gpus[1].readings.xid_last_code, Some(0.0));
    assert_eq!(gpus[2].readings.xid_errors, None);
    assert_eq!(gpus[2].readings.xid_last_code, None);
    // Nothing else about GPU 2 suffers from its lack of events.
    assert_eq!(gpus[2].readings.temperature_celsius, Some(42.0));
}

#[test]
fn init_failure_is_retried_with_backoff_until_it_succeeds() {
    let f = Fixture::new("init", r#"{"init_error":9,"gpus":[]}"#);
    let mut nvml = f.open_with(Options {
        retry_first: Duration::from_millis(300),
        retry_max: Duration::from_secs(5),
        ..Options::default()
    });
    let e = nvml.collect(0.0).unwrap_err();
    assert!(e.0.contains("DRIVER_NOT_LOADED (9)"), "{e}");

    // The retry after the first wait fails too, and the wait doubles.
    std::thread::sleep(Duration::from_millis(350));
    let e = nvml.collect(0.0).unwrap_err();
    assert!(
        e.0.contains("DRIVER_NOT_LOADED") && e.0.contains("retrying with backoff up to 5s"),
        "{e}"
    );

    // The driver is fixed, but the next try is not due yet.
    f.set_scenario(&full_fleet(1));
    let e = nvml.collect(0.0).unwrap_err();
    assert!(e.0.contains("DRIVER_NOT_LOADED"), "{e}");

    std::thread::sleep(Duration::from_millis(650));
    let gpus = collect(&mut nvml);
    assert_eq!(gpus.len(), 1);
    Spec { i: 0 }.check(&gpus[0]);
}

#[test]
fn a_failing_device_count_drops_the_session_and_reinitialises() {
    let text = full_fleet(1).replacen(
        '{',
        r#"{"count_error":{"after_collections":1,"code":999},"#,
        1,
    );
    let f = Fixture::new("reinit", &text);
    let mut nvml = f.open_with(Options {
        retry_first: Duration::from_millis(400),
        event_wait: Duration::from_millis(20),
        ..Options::default()
    });
    Spec { i: 0 }.check(&collect(&mut nvml)[0]);
    let e = nvml.collect(0.0).unwrap_err();
    assert!(
        e.0.contains("nvmlDeviceGetCount_v2: NVML_ERROR_UNKNOWN (999)"),
        "{e}"
    );
    // Not retried before its time...
    let e = nvml.collect(0.0).unwrap_err();
    assert!(e.0.contains("retrying with backoff"), "{e}");
    // ...and then NVML is shut down and initialised afresh, which resets
    // the fake's collection count.
    std::thread::sleep(Duration::from_millis(450));
    Spec { i: 0 }.check(&collect(&mut nvml)[0]);
}

#[test]
fn an_explicit_library_path_that_does_not_exist_is_a_configuration_error() {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("no-such-dir/libnvidia-ml.so.1");
    let e = Nvml::open_with(Some(&path), Options::default())
        .err()
        .expect("an error");
    assert!(e.contains(&path.display().to_string()), "{e}");
}

#[test]
fn a_file_that_is_not_a_library_fails_collections_without_panicking() {
    let f = Fixture::new("not-a-library", "{}");
    let mut nvml = Nvml::open_with(Some(&f.dir.join("scenario.json")), Options::default())
        .expect("the file exists");
    let e = nvml.collect(0.0).unwrap_err();
    assert!(e.0.contains("scenario.json"), "{e}");
}

#[test]
fn the_default_library_constructs_with_or_without_a_driver() {
    let mut nvml = Nvml::open_with(None, Options::default()).expect("no path to be wrong");
    // Ok on a machine with NVIDIA's driver; elsewhere an error naming it.
    if let Err(e) = nvml.collect(0.0) {
        assert!(e.0.contains("libnvidia-ml.so.1"), "{e}");
    }
}

#[test]
fn the_xid_that_comes_with_a_loss_is_kept() {
    let mut gpus: Vec<_> = (0..2).map(|i| Spec { i }.json()).collect();
    gpus[1] = gpus[1].replacen('{', r#"{"xids":[79],"lost_after_collections":3,"#, 1);
    let f = Fixture::new("xid-loss", &scenario(&gpus));
    let mut nvml = f.open();
    // Bounded: the fake loses the GPU at its fourth collection.
    let mut lost = None;
    for _ in 0..50 {
        let gpus = collect(&mut nvml);
        if !gpus[1].up {
            lost = Some(gpus[1].clone());
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let lost = lost.expect("GPU 1 was lost");
    assert_eq!(lost.uuid, Spec { i: 1 }.uuid());
    let xids = lost
        .readings
        .xid_errors
        .expect("the lost GPU keeps its Xids");
    assert!(xids.contains(&(79, 1)), "{xids:?}");
}

#[test]
fn nvml_not_available_sentinels_are_left_out() {
    let gpu = r#"{"uuid":"GPU-sentinel","temperature":4294967295,"power_mw":4294967295,
        "ecc_corrected":18446744073709551615,"ecc_uncorrected":0,"sm_clock_mhz":1980,"events":false}"#;
    let f = Fixture::new("sentinel", &scenario(&[gpu.to_string()]));
    let mut nvml = f.open();
    let g = &collect(&mut nvml)[0];
    assert!(g.up);
    let mut expected = Readings {
        // All ones: "not available", left out.
        temperature_celsius: None,
        power_usage_watts: None,
        ecc_corrected_total: None,
        // The rest reads.
        ecc_uncorrected_total: Some(0.0),
        sm_clock_hertz: Some(1980e6),
        ..Readings::default()
    };
    expected.health.mig_mode = Some(false);
    assert_eq!(g.readings, expected);
}

#[test]
fn compute_instances_of_one_gpu_instance_are_one_instance() {
    let mig = r#"{"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-ci-parent",
        "memory":{"total":85520809984,"reserved":536870912,"free":1000,"used":2000},
        "mig":[
          {"name":"NVIDIA H100 80GB HBM3 MIG 3g.40gb","uuid":"MIG-ci0","gpu_instance_id":2,"compute_instance_id":0,
           "memory":{"total":42949672960,"reserved":0,"free":40000000000,"used":2949672960}},
          {"name":"NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb","uuid":"MIG-ci1","gpu_instance_id":2,"compute_instance_id":1,
           "memory":{"total":42949672960,"reserved":0,"free":40000000000,"used":2949672960}},
          {"name":"NVIDIA H100 80GB HBM3 MIG 1g.10gb","uuid":"MIG-other","gpu_instance_id":9,
           "memory":{"total":10468982784,"reserved":0,"free":10468982784,"used":0}}
        ]}"#;
    let f = Fixture::new("mig-ci", &scenario(&[mig.to_string()]));
    let mut nvml = f.open();
    let g = &collect(&mut nvml)[0];
    assert_eq!(g.mig.len(), 2);
    let m = &g.mig[0];
    assert_eq!((m.gpu_instance_id, m.uuid.as_str()), (2, "MIG-ci0"));
    let compute: Vec<_> = m.compute.iter().map(|c| (c.id, c.uuid.as_str())).collect();
    assert_eq!(compute, [(Some(0), "MIG-ci0"), (Some(1), "MIG-ci1")]);
    // The GPU instance's memory, once.
    assert_eq!(m.readings.memory_total_bytes, Some(42949672960.0));
    assert_eq!(g.mig[1].compute.len(), 1);
}

#[test]
fn every_symbol_the_exporter_resolves_is_in_the_fake() {
    use sources::nvml::{SYMBOLS, missing_symbols};
    let f = Fixture::new("symbols", r#"{"gpus":[]}"#);
    assert_eq!(missing_symbols(&f.lib), Ok(vec![]));
    assert!(SYMBOLS.len() >= 41, "{}", SYMBOLS.len());
    // The old-driver build lacks the newer ones, and they are named.
    let old = Fixture::build("symbols-old", r#"{"gpus":[]}"#, true);
    let missing = missing_symbols(&old.lib).unwrap();
    assert!(missing.contains(&"nvmlInitWithFlags"), "{missing:?}");
    assert!(missing.iter().all(|s| SYMBOLS.contains(s)));
    assert!(missing_symbols(&f.dir.join("scenario.json")).is_err());
}

#[test]
fn processes_and_minor_numbers() {
    use model::GpuProcess;
    use model::{Collector, Collectors};
    let whole = r#"{"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-procs","minor":7,
        "processes":[
          {"pid":4242,"used_bytes":62277025792},
          {"pid":4343,"graphics":true,"compute":true,"used_bytes":1048576},
          {"pid":4444}
        ]}"#;
    let mig = r#"{"name":"NVIDIA H100 80GB HBM3","uuid":"GPU-mig-procs",
        "processes":[{"pid":1,"used_bytes":1}],
        "mig":[
          {"name":"NVIDIA H100 80GB HBM3 MIG 3g.40gb","uuid":"MIG-a","gpu_instance_id":2,"compute_instance_id":0,
           "processes":[{"pid":5120,"used_bytes":2097152}]},
          {"name":"NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb","uuid":"MIG-b","gpu_instance_id":2,"compute_instance_id":1,
           "processes":[{"pid":5121,"used_bytes":3145728},{"pid":5120,"used_bytes":4194304}]}
        ]}"#;
    let f = Fixture::new(
        "processes",
        &scenario(&[whole.to_string(), mig.to_string()]),
    );
    let p = |pid, used: Option<f64>| GpuProcess {
        pid: Some(pid),
        used_bytes: used,
        ..GpuProcess::default()
    };
    // Off by default: never asked.
    let gpus = collect(&mut f.open());
    assert!(gpus[0].readings.processes.is_empty());
    let mut nvml = f.open_with(Options {
        collectors: Collectors::DEFAULT.with(Collector::Processes),
        ..Options::default()
    });
    let gpus = collect(&mut nvml);
    // The device minor (GKE's plugin names GPUs by it), whatever the
    // collectors.
    assert_eq!((gpus[0].minor, gpus[1].minor), (Some(7), Some(1)));
    // Compute and graphics merged; NVML's "not available" left out, the
    // process kept.
    assert_eq!(
        gpus[0].readings.processes,
        [
            p(4242, Some(62277025792.0)),
            p(4343, Some(1048576.0)),
            p(4444, None)
        ]
    );
    // Under MIG, per MIG device: the parent's own list is not read, and
    // the compute instances of one GPU instance make one list, each
    // process on the compute instance it runs on (5120 on both).
    assert!(gpus[1].readings.processes.is_empty());
    let on = |pid, ci, used| GpuProcess {
        compute_instance: Some(ci),
        ..p(pid, Some(used))
    };
    assert_eq!(
        gpus[1].mig[0].readings.processes,
        [
            on(5120, 0, 2097152.0),
            on(5121, 1, 3145728.0),
            on(5120, 1, 4194304.0)
        ]
    );
}
