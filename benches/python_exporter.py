#!/usr/bin/env python3
"""A prometheus_client exporter for the comparison in benches/compare.sh.

It serves the same families, types, label sets and series as gpu-exporter's
0.0.4 text output for an 8-GPU simulated fleet (mirrored from a real scrape
of `--source sim --sim.scenario` with `{"gpus":[{},{},{},{},{},{},{},{}]}`),
written the way a Python exporter usually is: module-level Gauge/Counter
objects with label names, served by prometheus_client's start_http_server.
Values are static (set once at start); a real exporter would also pay for
reading NVML on every collection, so this flatters Python if anything.

To keep the families the same, `_created` series are turned off and the
GC and platform collectors are unregistered; prometheus_client's process
collector stays (it adds process_virtual_memory_bytes, which ours lacks).

    python3 benches/python_exporter.py PORT [ADDR]    # ADDR: 127.0.0.1
"""

import signal
import sys

import prometheus_client
from prometheus_client import Counter, Gauge

GPUS = 8
ID = ("gpu", "uuid")

# name without _total for counters, type, help, extra label names
FAMILIES = [
    ("gpu_info", "gauge", "GPU identity: product name, PCI bus id and driver version. Always 1.",
     ("model", "pci_bus_id", "driver_version")),
    ("gpu_up", "gauge", "1 if the GPU answers, 0 once it is lost (fallen off the bus, NVML GPU_IS_LOST).", ()),
    ("gpu_temperature_celsius", "gauge",
     "GPU die temperature. Lags throttling; watch gpu_clocks_event_active too.", ()),
    ("gpu_memory_temperature_celsius", "gauge", "HBM temperature.", ()),
    ("gpu_sm_clock_hertz", "gauge", "Current SM clock.", ()),
    ("gpu_sm_clock_max_hertz", "gauge",
     "Maximum SM clock; the current clock well below it means lost performance.", ()),
    ("gpu_memory_clock_hertz", "gauge", "Current memory clock.", ()),
    ("gpu_clocks_event_active", "gauge",
     "1 while an NVML clock event reason holds clocks down. Thermal, hw slowdown and power brake "
     "are silent performance loss; sw_power_cap alone is normal under load.", ("reason",)),
    ("gpu_power_usage_watts", "gauge", "Power draw.", ()),
    ("gpu_power_limit_watts", "gauge", "Enforced power limit.", ()),
    ("gpu_utilization_ratio", "gauge",
     "Fraction of time a kernel ran (nvidia-smi utilization.gpu). Misleading: one tiny kernel "
     "reads as 100%, so it says nothing about how busy the SMs are. Use gpu_sm_active_ratio; "
     "never alert on this.", ()),
    ("gpu_sm_active_ratio", "gauge",
     "Fraction of time SMs had at least one warp resident: the real saturation signal.", ()),
    ("gpu_sm_occupancy_ratio", "gauge", "Resident warps as a fraction of the SMs' maximum.", ()),
    ("gpu_dram_active_ratio", "gauge",
     "Fraction of time the memory interface was busy: the bandwidth signal.", ()),
    ("gpu_memory_total_bytes", "gauge", "Total device memory.", ()),
    ("gpu_memory_used_bytes", "gauge", "Device memory in use.", ()),
    ("gpu_memory_free_bytes", "gauge",
     "Device memory free. Free is not allocatable when it is fragmented; "
     "see gpu_memory_largest_free_bytes.", ()),
    ("gpu_memory_reserved_bytes", "gauge", "Device memory reserved by the driver and firmware.", ()),
    ("gpu_allocator_reserved_bytes", "gauge",
     "Memory the workload's caching allocator holds. Reserved minus allocated is cache.", ()),
    ("gpu_allocator_allocated_bytes", "gauge",
     "Memory the workload's tensors occupy. Rising steadily means a leak.", ()),
    ("gpu_memory_largest_free_bytes", "gauge",
     "Largest contiguous free block: the fragmentation early warning, before an OOM at 60% used.", ()),
    ("gpu_xid_errors", "counter",
     "Xid errors by code. Alert on increase(), never on the value. Critical codes are present "
     "at 0 until they happen.", ("xid",)),
    ("gpu_ecc_corrected_errors", "counter", "Corrected ECC errors (volatile).", ()),
    ("gpu_ecc_uncorrected_errors", "counter",
     "Uncorrected ECC errors (volatile). Any increase means a dying GPU: page.", ()),
    ("gpu_energy_joules", "counter", "Energy consumed since the driver loaded.", ()),
    ("gpu_pcie_bytes", "counter", "PCIe bytes moved, by direction.", ("direction",)),
    ("gpu_pcie_replay_errors", "counter", "PCIe replays: a flaky link or riser.", ()),
    ("gpu_nvlink_bytes", "counter",
     "NVLink bytes moved, by direction. Low during tensor parallelism means a topology problem.",
     ("direction",)),
    ("gpu_clocks_event_seconds", "counter", "Seconds clocks were held down, by reason.", ("reason",)),
]

REASONS = ["gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
           "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
           "display_clock_setting"]
XIDS = ["48", "62", "63", "64", "74", "79", "92", "94", "95", "119", "120"]
DIRECTIONS = ["tx", "rx"]

# One value per family (per direction for PCIe), as gpu-exporter's simulator
# reports for a healthy GPU.
VALUES = {
    "gpu_info": 1, "gpu_up": 1, "gpu_temperature_celsius": 65, "gpu_memory_temperature_celsius": 61,
    "gpu_sm_clock_hertz": 1410000000, "gpu_sm_clock_max_hertz": 1980000000,
    "gpu_memory_clock_hertz": 2619000000, "gpu_clocks_event_active": 0,
    "gpu_power_usage_watts": 520, "gpu_power_limit_watts": 700, "gpu_utilization_ratio": 0.97,
    "gpu_sm_active_ratio": 0.62, "gpu_sm_occupancy_ratio": 0.41, "gpu_dram_active_ratio": 0.55,
    "gpu_memory_total_bytes": 85899345920, "gpu_memory_used_bytes": 64424509440,
    "gpu_memory_free_bytes": 21474836480, "gpu_memory_reserved_bytes": 515396076,
    "gpu_allocator_reserved_bytes": 62277025792, "gpu_allocator_allocated_bytes": 55834574848,
    "gpu_memory_largest_free_bytes": 19327352832, "gpu_xid_errors": 0,
    "gpu_ecc_corrected_errors": 0, "gpu_ecc_uncorrected_errors": 0,
    "gpu_energy_joules": 136656566,
    "gpu_pcie_bytes": {"tx": 657002720195055, "rx": 525602176156044},
    "gpu_pcie_replay_errors": 0, "gpu_nvlink_bytes": 3.153613056936264e16,
    "gpu_clocks_event_seconds": 0,
}

EXTRA = {"reason": REASONS, "xid": XIDS, "direction": DIRECTIONS}


def set_value(child, kind, value):
    if kind == "gauge":
        child.set(value)
    elif value:
        child.inc(value)


def main():
    port = int(sys.argv[1])
    addr = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"

    prometheus_client.disable_created_metrics()
    for c in (prometheus_client.GC_COLLECTOR, prometheus_client.PLATFORM_COLLECTOR):
        prometheus_client.REGISTRY.unregister(c)

    for name, kind, help_text, extra in FAMILIES:
        metric = (Gauge if kind == "gauge" else Counter)(name, help_text, ID + extra)
        value = VALUES[name]
        for gpu in range(GPUS):
            ident = (str(gpu), f"GPU-5a1e0000-0000-4000-8000-{gpu:012d}")
            if name == "gpu_info":
                labels = [ident + ("NVIDIA H100 80GB HBM3", f"00000000:{0x18 + gpu:02X}:00.0", "550.90.07")]
            elif extra:
                labels = [ident + (v,) for v in EXTRA[extra[0]]]
            else:
                labels = [ident]
            for values in labels:
                v = value[values[-1]] if isinstance(value, dict) else value
                set_value(metric.labels(*values), kind, v)

    Gauge("gpu_exporter_build_info", "The exporter's version. Always 1.", ["version"]).labels("0.1.0").set(1)
    Gauge("gpu_exporter_source_info", "Where readings come from: sim, nvml or smi. Always 1.",
          ["source"]).labels("sim").set(1)
    Gauge("gpu_exporter_collect_duration_seconds", "How long the last collection took.").set(1.4542e-5)
    Gauge("gpu_exporter_collect_success", "1 if the last collection succeeded.").set(1)
    Gauge("gpu_exporter_snapshot_age_seconds",
          "Seconds since the served readings were collected.").set(0.947)

    server, thread = prometheus_client.start_http_server(port, addr=addr)
    print(f"serving on http://{addr}:{server.server_port}/metrics", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    thread.join()


if __name__ == "__main__":
    main()
