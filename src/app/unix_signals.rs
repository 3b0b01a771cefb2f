//! Serving until a signal says stop: SIGTERM and SIGINT close the listener
//! and let the responses in flight finish, for at most [`GRACE`]; a second
//! signal exits at once. SIGHUP asks the reload thread to reload.

use super::Error;
use async_io::{Async, Timer};
use async_signal::{Signal, Signals};
use http::Server;
use smol::LocalExecutor;
use smol::future::FutureExt;
use smol::stream::StreamExt;
use std::net::TcpListener;
use std::rc::Rc;
use std::time::Duration;

/// How long a stop waits for responses in flight: well under the second
/// docs/flags.md promises, which leaves the rest for the exit itself.
pub const GRACE: Duration = Duration::from_millis(800);

/// A response whose client has taken none of it for this long after a
/// stop is closed rather than waited for: 200 clients that pipeline and
/// never read would otherwise hold the exit for the whole grace period.
/// A response in flight is one larger than the kernel's buffers, which a
/// client that reads makes room in far more often; one too slow for this
/// would not have finished within the grace anyway.
const STALLED: Duration = Duration::from_millis(300);

/// How long a stop then sends the alerts queued for Alertmanager: within
/// the second with [`GRACE`].
pub const FLUSH: Duration = Duration::from_millis(150);

/// The signals the exporter handles, from now on: before it says it is
/// serving, so that whoever waits for that line can signal it at once.
pub fn handle() -> Result<Signals, Error> {
    Signals::new([Signal::Term, Signal::Int, Signal::Hup])
        .map_err(|e| Error::Runtime(format!("cannot handle signals: {e}")))
}

/// Serves until SIGTERM or SIGINT, calling `reload` on each SIGHUP (it
/// must not block: it runs on the HTTP thread); the exit code: 0, or
/// 128 + the signal that cut the drain short. `listeners` serve
/// everything, `probes` (if given) only `/healthz` and `/readyz`; all
/// share `server`'s connection cap and response slots.
pub fn serve_until_stopped(
    mut signals: Signals,
    listeners: Vec<Async<TcpListener>>,
    probes: Option<Async<TcpListener>>,
    server: Rc<Server>,
    mut reload: impl FnMut(),
) -> u8 {
    let ex = LocalExecutor::new();
    smol::block_on(ex.run(async {
        // A task of its own, polled only when a signal arrives: awaited in
        // the main future, its pipe would be read on every wake-up of the
        // HTTP thread, a syscall per request.
        let mut stop = ex.spawn(async move {
            loop {
                match signals.next().await {
                    Some(Ok(Signal::Hup)) => reload(),
                    Some(Ok(sig)) => return (sig, signals),
                    Some(Err(_)) | None => return (Signal::Term, signals),
                }
            }
        });
        let serving = async {
            let all = listeners.into_iter().map(|l| (l, false));
            let all = all.chain(probes.map(|l| (l, true)));
            // Each accept loop runs until the executor is dropped.
            let never = std::future::pending().boxed_local();
            all.fold(never, |others, (l, probes)| {
                let accept = http::accept::serve(&ex, l, server.clone(), probes);
                others.or(accept).boxed_local()
            })
            .await;
            (Signal::Term, None)
        };
        let (sig, signals) = serving
            .or(async {
                let (sig, signals) = (&mut stop).await;
                (sig, Some(signals))
            })
            .await;
        // The listener is closed now. Finish what is in flight, but exit
        // within the grace period whatever the clients do; a second signal
        // exits at once.
        log::info!(
            "{sig:?}: finishing in-flight responses (at most {}ms)",
            GRACE.as_millis()
        );
        let stopped = std::time::Instant::now();
        let drained = async {
            while server.in_flight() > 0 {
                server.drop_stalled(stopped, STALLED);
                Timer::after(Duration::from_millis(5)).await;
            }
            0
        };
        let deadline = async {
            Timer::after(GRACE).await;
            log::warn!(
                "responses still in flight after {}ms; exiting anyway",
                GRACE.as_millis()
            );
            0
        };
        let again = async {
            // The stop task still has the signals when serving ended first.
            let mut signals = match signals {
                Some(signals) => signals,
                None => stop.await.1,
            };
            loop {
                if let Some(Ok(s)) = signals.next().await
                    && s != Signal::Hup
                {
                    log::warn!("{s:?} again: exiting at once");
                    return 128 + s as u8;
                }
            }
        };
        drained.or(again).or(deadline).await
    }))
}
