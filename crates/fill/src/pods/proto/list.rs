//! [`ListDecoder`]: the push parser for `ListPodResourcesResponse`, one
//! pod entry buffered at a time, and its limits.

use super::{PodResources, holds_nvidia, pod};
use wire::protobuf::{Budget, MAX_GROUP_DEPTH, ProtoError, Varint, tag};

/// Bounds on what one response may cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A pod entry larger than this is skipped (and counted), unread.
    pub max_pod_bytes: usize,
    /// The decoded GPU pods of one response, together; pods past it are
    /// dropped (and counted).
    pub max_kept_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            // A pod with a hundred containers is a few KiB; 1 MiB is far
            // past any real pod and bounds the one buffer we keep.
            max_pod_bytes: 1 << 20,
            // About 5,000 GPU containers: far past one node, and small
            // next to the DaemonSet's 16Mi limit.
            max_kept_bytes: 2 << 20,
        }
    }
}

/// What a response held, for the log line and the exporter's own metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Pod entries seen.
    pub pods: u64,
    /// Pods with NVIDIA devices, kept.
    pub kept: u64,
    /// Entries over `max_pod_bytes`, skipped unread.
    pub oversize: u64,
    /// GPU pods dropped because the kept ones reached `max_kept_bytes`.
    pub over_budget: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading a field tag.
    Tag,
    /// Reading the length of a LEN field; `pod` when it is a pod entry.
    Len { pod: bool },
    /// Skipping a varint value.
    SkipVarint,
    /// Skipping this many bytes.
    Skip(u64),
    /// Buffering this many more bytes of a pod entry.
    Pod(usize),
}

/// The push parser for `ListPodResourcesResponse`. Feed it the message in
/// pieces of any size, then call [`ListDecoder::finish`]. It can be
/// reused; its buffer keeps its capacity.
#[derive(Debug)]
pub struct ListDecoder {
    limits: Limits,
    state: State,
    /// The varint being read.
    varint: Varint,
    /// Top-level groups (unknown fields) we are inside.
    group_depth: u32,
    pod_buf: Vec<u8>,
    kept: Vec<PodResources>,
    kept_bytes: usize,
    stats: Stats,
    peak: usize,
}

impl ListDecoder {
    pub fn new(limits: Limits) -> Self {
        ListDecoder {
            limits,
            state: State::Tag,
            varint: Varint::default(),
            group_depth: 0,
            pod_buf: Vec::new(),
            kept: Vec::new(),
            kept_bytes: 0,
            stats: Stats::default(),
            peak: 0,
        }
    }

    /// Starts over for a new response, keeping the buffer.
    pub fn reset(&mut self) {
        self.state = State::Tag;
        self.varint = Varint::default();
        self.group_depth = 0;
        self.pod_buf.clear();
        self.kept.clear();
        self.kept_bytes = 0;
        self.stats = Stats::default();
    }

    /// The largest the pod buffer has been: the decoder's only memory that
    /// depends on the input, apart from the kept pods.
    pub fn peak_buffer(&self) -> usize {
        self.peak
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    pub fn feed(&mut self, mut data: &[u8]) -> Result<(), ProtoError> {
        while let Some(&b) = data.first() {
            match self.state {
                State::Tag | State::Len { .. } | State::SkipVarint => {
                    data = &data[1..];
                    if let Some(v) = self.varint.push(b)? {
                        self.on_varint(v)?;
                    }
                }
                State::Skip(n) => {
                    let k = n.min(data.len() as u64);
                    data = &data[k as usize..];
                    self.state = if n == k {
                        State::Tag
                    } else {
                        State::Skip(n - k)
                    };
                }
                State::Pod(n) => {
                    let k = n.min(data.len());
                    self.pod_buf.extend_from_slice(&data[..k]);
                    data = &data[k..];
                    if n == k {
                        self.state = State::Tag;
                        self.on_pod()?;
                    } else {
                        self.state = State::Pod(n - k);
                    }
                }
            }
        }
        Ok(())
    }

    /// Ends the response: what was kept, and the counts. The decoder is
    /// then ready for the next response.
    pub fn finish(&mut self) -> Result<(Vec<PodResources>, Stats), ProtoError> {
        let complete = self.state == State::Tag && self.varint.is_idle() && self.group_depth == 0;
        let stats = self.stats;
        let kept = std::mem::take(&mut self.kept);
        self.reset();
        if !complete {
            return Err(ProtoError::Truncated);
        }
        Ok((kept, stats))
    }

    fn skip(n: u64) -> State {
        if n == 0 { State::Tag } else { State::Skip(n) }
    }

    fn on_varint(&mut self, v: u64) -> Result<(), ProtoError> {
        self.state = match self.state {
            State::Tag => {
                let (field, wire) = tag(v)?;
                match wire {
                    0 => State::SkipVarint,
                    1 => State::Skip(8),
                    2 => State::Len {
                        pod: field == 1 && self.group_depth == 0,
                    },
                    3 => {
                        self.group_depth += 1;
                        if self.group_depth > MAX_GROUP_DEPTH {
                            return Err(ProtoError::TooDeep);
                        }
                        State::Tag
                    }
                    4 => {
                        if self.group_depth == 0 {
                            return Err(ProtoError::UnmatchedEndGroup);
                        }
                        self.group_depth -= 1;
                        State::Tag
                    }
                    5 => State::Skip(4),
                    _ => return Err(ProtoError::BadWireType),
                }
            }
            State::Len { pod: true } => {
                self.stats.pods += 1;
                if v > self.limits.max_pod_bytes as u64 {
                    self.stats.oversize += 1;
                    Self::skip(v)
                } else {
                    let n = v as usize;
                    self.pod_buf.clear();
                    self.pod_buf.reserve_exact(n);
                    self.peak = self.peak.max(self.pod_buf.capacity());
                    if n == 0 {
                        self.on_pod()?;
                        State::Tag
                    } else {
                        State::Pod(n)
                    }
                }
            }
            State::Len { pod: false } => Self::skip(v),
            State::SkipVarint => State::Tag,
            State::Skip(_) | State::Pod(_) => State::Tag,
        };
        Ok(())
    }

    fn on_pod(&mut self) -> Result<(), ProtoError> {
        if !holds_nvidia(&self.pod_buf)? {
            return Ok(());
        }
        let left = self.limits.max_kept_bytes.saturating_sub(self.kept_bytes);
        let mut budget = Budget::new(left);
        match pod(&self.pod_buf, &mut budget) {
            Ok(p) => {
                self.kept_bytes += left - budget.left();
                self.kept.push(p);
                self.stats.kept += 1;
                Ok(())
            }
            Err(ProtoError::OverBudget) => {
                self.stats.over_budget += 1;
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// Decodes a whole `ListPodResourcesResponse` held in memory, keeping
/// only the pods that hold NVIDIA devices.
pub fn decode_list(bytes: &[u8], limits: Limits) -> Result<(Vec<PodResources>, Stats), ProtoError> {
    let mut d = ListDecoder::new(limits);
    d.feed(bytes)?;
    d.finish()
}
