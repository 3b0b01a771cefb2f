//! The runbooks, built into the binary and served at
//! `/docs/runbooks/<Alert>.md`, so that the default relative
//! `runbook_url` works from the status page on an air-gapped node.

macro_rules! runbooks {
    ($($name:literal),* $(,)?) => {
        /// (file name, Markdown text) of every runbook in docs/runbooks.
        pub const RUNBOOKS: &[(&str, &str)] = &[
            $(($name, include_str!(concat!("../../../docs/runbooks/", $name))),)*
        ];
    };
}

runbooks![
    "CustomRule.md",
    "DriverVersionSkew.md",
    "EngineAvailabilityBurn.md",
    "EngineDown.md",
    "EngineEndpointDown.md",
    "ExporterCollectFailing.md",
    "ExporterDown.md",
    "GPUCountDropped.md",
    "GPULost.md",
    "GPUMemoryLeak.md",
    "GPUMemoryTemperatureHigh.md",
    "GPUNVLinkDown.md",
    "GPUNVLinkErrors.md",
    "GPUPCIeLinkDegraded.md",
    "GPUPCIeReplayErrors.md",
    "GPUReadsLate.md",
    "GPURecoveryAction.md",
    "GPURetiredPagesPending.md",
    "GPURowRemapFailure.md",
    "GPURowRemapPending.md",
    "GPUThrottling.md",
    "GPUUncorrectableECC.md",
    "GPUXidErrors.md",
    "GPUXidEvents.md",
    "KVFragmentationRisk.md",
    "TTFTBudgetBurn.md",
];

/// The runbook at `path` (`/docs/runbooks/GPULost.md`), if there is one.
pub fn find(path: &str) -> Option<&'static str> {
    let name = path.strip_prefix("/docs/runbooks/")?;
    RUNBOOKS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_runbook_file_is_built_in() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/runbooks");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        files.sort();
        let built: Vec<&str> = super::RUNBOOKS.iter().map(|(n, _)| *n).collect();
        assert_eq!(files, built);
        for rule in alerts::defaults() {
            assert!(
                super::find(&format!("/docs/runbooks/{}.md", rule.runbook)).is_some(),
                "{}",
                rule.name
            );
        }
        assert_eq!(super::find("/docs/runbooks/../../Cargo.toml"), None);
    }
}
