//! An MCP client's user as the human who approves: when a gated call asks ([`awt_core::call::approve`]) and the
//! client declared the `elicitation` capability, the server sends `elicitation/create` with the call's summary and
//! an empty accept/decline form. Accept runs the call once (the gate checks the binding it was asked about);
//! decline or cancel refuses it. A client without the capability, or one that cannot answer, gets the pending
//! path: a filed request and `approval_pending`.

use awt_core::call::approve::{Approval, Grant};
use awt_core::call::{CallOptions, PreparedCall, Runner, Target};
use awt_core::error::{CallError, Detail, ErrorCode};
use rmcp::model::{
    ClientResult, ElicitRequest, ElicitRequestParams, ElicitationAction, ElicitationSchema, ServerRequest,
};
use rmcp::service::Peer;
use rmcp::RoleServer;
use serde_json::{Map, Value};

/// Did the client declare `elicitation` (form mode, or the capability without modes, which means form)?
fn elicits(peer: &Peer<RoleServer>) -> bool {
    peer.peer_info().is_some_and(|i| {
        i.capabilities
            .elicitation
            .as_ref()
            .is_some_and(|c| c.form.is_some() || c.url.is_none())
    })
}

/// Prepare `target` (`tool`.`action`) with `args` for an MCP client, asking its user when the gate asks.
pub async fn prepare<'r>(
    runner: &'r Runner,
    target: Target<'r>,
    tool: &str,
    action: &str,
    args: Map<String, Value>,
    mut opts: CallOptions,
    peer: &Peer<RoleServer>,
) -> Result<PreparedCall<'r>, CallError> {
    if !elicits(peer) {
        return target.prepare(args, &opts);
    }
    opts.approval = Approval::Defer;
    let e = match target.prepare(args.clone(), &opts) {
        Err(e) if e.code == ErrorCode::ApprovalPending => e,
        other => return other,
    };
    let Some(grant) = Grant::from_error(&e) else {
        return Err(e);
    };
    opts.approval = match ask(peer, &e, &grant, &args).await {
        Some(true) => Approval::Granted(grant),
        Some(false) => Approval::Prompt(std::sync::Arc::new(|_| false)),
        None => Approval::Pending,
    };
    runner.open(tool).await?.action(action)?.prepare(args, &opts)
}

/// The most characters of the arguments an approval question shows; past it, it says how many more there are.
const SHOWN_ARGS: usize = 4000;

/// `Some(accepted)`, or `None` when the client could not answer. The question shows the arguments the approval
/// binds (the grant runs only with these): a human is never asked to approve a call they cannot see.
async fn ask(peer: &Peer<RoleServer>, e: &CallError, grant: &Grant, args: &Map<String, Value>) -> Option<bool> {
    let b = grant.binding();
    let keys = e.detail(Detail::Key).and_then(Value::as_str).unwrap_or("");
    let all = serde_json::to_string(args).unwrap_or_default();
    let shown = match all.char_indices().nth(SHOWN_ARGS) {
        Some((cut, _)) => format!(
            "{}… ({} more characters not shown: decline unless you expect them)",
            &all[..cut],
            all[cut..].chars().count()
        ),
        None => all,
    };
    let message = format!(
        "{keys} needs your approval to run once.\nanima: {}\ntool: {} ({} tier)\naction: {}\narguments: {shown}\nAccept to run it now; decline to refuse it.",
        b.anima.as_deref().unwrap_or("(none)"),
        b.tool,
        b.tier,
        b.action,
    );
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema: ElicitationSchema::new(Default::default()),
    };
    match peer
        .send_request(ServerRequest::ElicitRequest(ElicitRequest::new(params)))
        .await
    {
        Ok(ClientResult::ElicitResult(r)) => Some(r.action == ElicitationAction::Accept),
        Ok(_) => None,
        Err(err) => {
            tracing::warn!("elicitation/create failed ({err}); the call waits for approval instead");
            None
        }
    }
}
