//! This server's MCP client as the answerer of the declared MCP servers' own requests
//! ([`awt_core::mcp_servers::asks`]): what the client declared in `initialize` (`sampling`, `elicitation` in form
//! mode, `roots`) is what their sessions declare to the servers, and a server's request reaches the client as a
//! request of this server.

use awt_core::mcp_servers::asks::{Answer, Caps, ClientAsks, Refusal, ServerRequests, INTERNAL_ERROR};
use rmcp::model::{CancelledNotificationParam, RequestId, ServerRequest};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use rmcp::RoleServer;
use serde_json::{json, Value};
use std::sync::Arc;

/// JSON-RPC "invalid params": a server's request that is not what its method says.
const INVALID_PARAMS: i64 = -32602;

struct Client {
    peer: Peer<RoleServer>,
    caps: Caps,
}

/// The handler of this connection's calls, when its client declared any of the three capabilities.
pub(super) fn of(peer: &Peer<RoleServer>) -> Option<ClientAsks> {
    let info = peer.peer_info()?;
    let c = &info.capabilities;
    let caps = Caps {
        sampling: c.sampling.is_some(),
        // A capability without modes means form (2025-11-25).
        elicitation: c
            .elicitation
            .as_ref()
            .is_some_and(|e| e.form.is_some() || e.url.is_none()),
        roots: c.roots.is_some(),
    };
    caps.any().then(|| {
        ClientAsks(Arc::new(Client {
            peer: peer.clone(),
            caps,
        }))
    })
}

/// A request sent to the client: dropped before its answer (the server cancelled it, or its session ended), the
/// client is told it is no longer wanted.
struct Asked {
    peer: Option<Peer<RoleServer>>,
    id: RequestId,
}

impl Drop for Asked {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else { return };
        let note = CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some("the MCP server that asked cancelled it".into()),
        );
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { peer.notify_cancelled(note).await });
        }
    }
}

impl ServerRequests for Client {
    fn declared(&self) -> Caps {
        self.caps
    }

    fn answer(&self, method: &str, params: Value) -> Answer {
        let peer = self.peer.clone();
        let request = serde_json::from_value::<ServerRequest>(json!({"method": method, "params": params}))
            .ok()
            .filter(|r| !matches!(r, ServerRequest::CustomRequest(_) | ServerRequest::PingRequest(_)));
        let method = method.to_owned();
        Box::pin(async move {
            let Some(request) = request else {
                return Err(Refusal {
                    code: INVALID_PARAMS,
                    message: format!("the parameters of {method} are not valid"),
                });
            };
            let sent = peer
                .send_cancellable_request(request, PeerRequestOptions::no_options())
                .await;
            let out = match sent {
                Ok(handle) => {
                    let mut asked = Asked {
                        peer: Some(peer.clone()),
                        id: handle.id.clone(),
                    };
                    let out = handle.await_response().await;
                    asked.peer = None;
                    out
                }
                Err(e) => Err(e),
            };
            match out {
                Ok(result) => serde_json::to_value(result).map_err(|e| Refusal {
                    code: INTERNAL_ERROR,
                    message: format!("the client's answer to {method}: {e}"),
                }),
                Err(ServiceError::McpError(e)) => Err(Refusal {
                    code: e.code.0 as i64,
                    message: e.message.into_owned(),
                }),
                Err(e) => Err(Refusal {
                    code: INTERNAL_ERROR,
                    message: format!("the MCP client did not answer {method}: {e}"),
                }),
            }
        })
    }
}
