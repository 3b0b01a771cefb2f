//! The `--alertmanager.*` flags: the exporter sends its own alerts (see
//! docs/alertmanager.md).

use super::flag::{Flag, set};
use crate::config::Config;
use crate::config::alertmanager::{self, Auth, MAX_LABELS, MAX_TARGETS};
use crate::config::values::{count, timeout};

/// The Alertmanager flags, in `--help` order.
pub(super) const FLAGS: &[Flag] = &[
    set(
        "--alertmanager.url",
        "URL",
        "",
        "an Alertmanager to send the exporter's own firing and resolved alerts to (POST /api/v2/alerts), http://HOST:PORT[/prefix], or https:// with --alertmanager.ca-file where the alertmanager-tls feature is built; repeat for each of a cluster (at most 8): each gets every alert. Off by default (see docs/alertmanager.md)",
        |c, v| {
            let t = alertmanager::target(v)?;
            let all = &mut c.alertmanager.targets;
            if all.iter().any(|o| o.url == t.url) {
                return Err(format!("{:?} is given twice", t.url));
            }
            if all.len() == MAX_TARGETS {
                return Err(format!("more than {MAX_TARGETS} Alertmanagers"));
            }
            all.push(t);
            Ok(())
        },
    ),
    set(
        "--alertmanager.label",
        "NAME=VALUE",
        "",
        "a label added to every alert sent, as Prometheus' external_labels (cluster=...); repeatable, at most 16; never one the exporter sets itself",
        |c, v| {
            let (name, value) = alertmanager::label(v)?;
            let all = &mut c.alertmanager.labels;
            if all.iter().any(|(n, _)| *n == name) {
                return Err(format!("{name:?} is given twice"));
            }
            if all.len() == MAX_LABELS {
                return Err(format!("more than {MAX_LABELS} labels"));
            }
            all.push((name, value));
            Ok(())
        },
    ),
    set(
        "--alertmanager.instance",
        "HOST:PORT",
        "",
        "the instance label of the alerts sent: the address Prometheus scrapes this exporter at; without it, the host name and the first --web.listen-address port",
        |c, v| {
            c.alertmanager.instance = Some(alertmanager::instance(v)?);
            Ok(())
        },
    ),
    set(
        "--alertmanager.resend-interval",
        "DUR",
        "1m",
        "how often a firing alert is sent again, and a resolved one for 15m; each alert sent ends (endsAt) at 4 times the larger of this and --collect.interval, so a dead exporter's alerts resolve by themselves",
        |c, v| {
            c.alertmanager.resend = timeout(v)?;
            Ok(())
        },
    ),
    set(
        "--alertmanager.timeout",
        "DUR",
        "10s",
        "one deadline over connecting to an Alertmanager, sending and reading its answer",
        |c, v| {
            c.alertmanager.timeout = timeout(v)?;
            Ok(())
        },
    ),
    set(
        "--alertmanager.queue-capacity",
        "N",
        "1000",
        "alerts waiting to be sent; past it the oldest are dropped and counted",
        |c, v| {
            c.alertmanager.capacity = count(v)?;
            Ok(())
        },
    ),
    set(
        "--alertmanager.bearer-token-file",
        "FILE",
        "",
        "a file whose contents are sent as Authorization: Bearer to every Alertmanager, read at start (no secret on the command line)",
        |c, v| auth(c, Auth::Bearer(v.into())),
    ),
    set(
        "--alertmanager.basic-auth-file",
        "FILE",
        "",
        "a file of one line, USER:PASSWORD, sent as basic auth to every Alertmanager, read at start; not with a bearer token",
        |c, v| auth(c, Auth::Basic(v.into())),
    ),
    set(
        "--alertmanager.ca-file",
        "FILE",
        "",
        "PEM CA certificates an https:// Alertmanager's certificate must be signed by, read at start (the URL's host, a name or an IP address, must be in it); with an https:// --alertmanager.url only. Refused (exit code 2) by a build without the alertmanager-tls feature",
        |c, v| {
            if !cfg!(feature = "alertmanager-tls") {
                return Err(
                    "this build has no TLS client (built without the alertmanager-tls feature)"
                        .into(),
                );
            }
            c.alertmanager.ca_file = Some(v.into());
            Ok(())
        },
    ),
];

/// One way to authenticate, not two.
fn auth(c: &mut Config, a: Auth) -> Result<(), String> {
    if let Some(other) = &c.alertmanager.auth {
        return Err(format!("not with {}", other.flag()));
    }
    c.alertmanager.auth = Some(a);
    Ok(())
}
