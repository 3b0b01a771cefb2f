//! The accept loop. One bad connection logs and never ends the loop.

use super::{Context, conn};
use async_io::{Async, Timer};
use smol::LocalExecutor;
use std::net::TcpListener;
use std::rc::Rc;
use std::time::Duration;

pub async fn serve(ex: &LocalExecutor<'_>, listener: Async<TcpListener>, ctx: Rc<Context>) {
    loop {
        match listener.accept().await {
            Ok((stream, _peer)) => {
                // Responses go out in one write; don't let Nagle hold them.
                let _ = stream.get_ref().set_nodelay(true);
                ex.spawn(conn::serve(stream, ctx.clone())).detach();
            }
            Err(e) => {
                // Out of fds, most likely: back off instead of spinning.
                log::warn!("accept failed: {e}");
                Timer::after(Duration::from_millis(100)).await;
            }
        }
    }
}
