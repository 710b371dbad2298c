//! HandoffSupervisor: creates handoff contracts and supervises one `Contract(id)` actor per open
//! one; routes the delegates' and validators' output (`handoff:<id>` chats, via
//! `channels::deliver`) to their contract.
//!
//! Invariants: a contract is stored (status `created`, timeline row) before its actor starts; who
//! may delegate to whom is checked here (`can_delegate_to`, default: the agents that report to
//! the owner); a delegate cannot delegate further (its conversation is a `handoff:` chat).
//!
//! Restart: open contracts, and ended ones whose outcome never reached the owner, are loaded at
//! start and their actors started again (each picks up where it was).
//!
//! Restart policy: permanent under the root; contracts are transient children with the shared
//! policy (a crashed contract restarts from its row).

use std::collections::BTreeMap;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef, SupervisionEvent};

use super::contract::{Contract, ContractArgs, ContractMsg};
use super::supervise::spawn_child;
use super::supervise::{
    Action, ChildCmd, ChildSpec, Children, OnExhausted, Restart, RestartPolicy,
};
use crate::domain::ChatKind;
use crate::events::EventBus;
use crate::protocol::handoff::{ContractOutcome, HandoffError, HandoffMsg, NewContract};
use crate::registry::{Registry, ServiceName};
use crate::store::Store;
use crate::store::handoff::{self as queries, ContractRow, ContractStatus};

/// What makes the handoff supervisor act: others' requests and its supervision timers.
pub enum HandoffEvent {
    Request(HandoffMsg),
    Child(ChildCmd),
}

wraps_requests!(HandoffEvent, HandoffMsg);

impl From<ChildCmd> for HandoffEvent {
    fn from(cmd: ChildCmd) -> Self {
        HandoffEvent::Child(cmd)
    }
}

#[derive(Clone)]
pub struct HandoffArgs {
    pub store: Store,
    pub registry: Registry,
    pub events: EventBus,
    pub policy: RestartPolicy,
    /// Each agent and the agents it may delegate to.
    pub delegates: BTreeMap<String, Vec<String>>,
}

pub struct HandoffSupervisor;

pub struct HandoffState {
    args: HandoffArgs,
    contracts: Children,
}

fn new_id() -> String {
    use rand::Rng;
    const ALPHABET: &[u8] = b"abcdefghjkmnpqrstuvwxyz23456789";
    let mut rng = rand::rng();
    let tail: String = (0..8)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect();
    format!("h-{tail}")
}

impl Actor for HandoffSupervisor {
    type Msg = HandoffEvent;
    type State = HandoffState;
    type Arguments = HandoffArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: HandoffArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(HandoffState {
            contracts: Children::new("handoffs", args.events.clone()),
            args,
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let unfinished = state.args.store.read(queries::unfinished).await?;
        if !unfinished.is_empty() {
            tracing::info!(
                contracts = unfinished.len(),
                "resuming handoff contracts left open"
            );
        }
        for row in unfinished {
            start_contract(&myself, state, &row.id).await?;
        }
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            HandoffEvent::Request(request) => on_request(&myself, state, request).await,
            HandoffEvent::Child(cmd) => match state.contracts.handle_cmd(&myself, cmd).await {
                Action::Escalate(reason) => Err(reason.into()),
                Action::Nothing => Ok(()),
            },
        }
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match state.contracts.on_supervision_event(&myself, &event) {
            Action::Escalate(reason) => Err(reason.into()),
            Action::Nothing => Ok(()),
        }
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.contracts.stop_all().await;
        Ok(())
    }
}

/// A request from outside: a delegate's output, a new contract, a wait, progress, a return or
/// a cancellation.
async fn on_request(
    myself: &ActorRef<HandoffEvent>,
    state: &mut HandoffState,
    request: HandoffMsg,
) -> Result<(), ActorProcessingErr> {
    match request {
        HandoffMsg::Deliver(outbound) => {
            if let Some(contract) = outbound
                .chat
                .handoff_contract()
                .and_then(|id| running(state, id))
            {
                let _ = contract.cast(ContractMsg::Output(outbound));
            }
        }
        HandoffMsg::Create(request, reply) => {
            let created = create(myself, state, request).await;
            let _ = reply.send(created.map_err(HandoffError::Refused));
        }
        HandoffMsg::Await(id, reply) => match running(state, &id) {
            Some(contract) => {
                let _ = contract.cast(ContractMsg::Await(reply));
            }
            None => {
                let lookup = id.clone();
                let row = state
                    .args
                    .store
                    .read(move |conn| queries::get(conn, &lookup))
                    .await?;
                if let Some(row) = row.filter(|row| !row.is_open()) {
                    let _ = reply.send(ContractOutcome {
                        text: row.outcome_text(),
                        id: row.id,
                        status: row.status,
                        delegate: row.delegate,
                    });
                }
            }
        },
        HandoffMsg::Progress(id, note) => {
            if let Some(contract) = running(state, &id) {
                let _ = contract.cast(ContractMsg::Progress(note));
            }
        }
        HandoffMsg::Return(id, result) => {
            if let Some(contract) = running(state, &id) {
                let _ = contract.cast(ContractMsg::Return(result));
            }
        }
        HandoffMsg::Cancel { id, by, reply } => {
            let Some(contract) = running(state, &id) else {
                let _ = reply.send(Err(HandoffError::Refused(format!(
                    "contract {id} is not open"
                ))));
                return Ok(());
            };
            let ended = ractor::call_t!(
                contract,
                |port| ContractMsg::Cancel { by, reply: port },
                10_000
            )
            .unwrap_or(false);
            let _ = reply.send(if ended {
                Ok(())
            } else {
                Err(HandoffError::Refused(format!(
                    "contract {id} had already ended"
                )))
            });
        }
    }
    Ok(())
}

fn running(state: &HandoffState, id: &str) -> Option<ActorRef<ContractMsg>> {
    state
        .contracts
        .cell(id)
        .filter(|cell| cell.get_status() != ractor::ActorStatus::Stopped)
        .map(|cell| ActorRef::from(cell.clone()))
}

async fn create(
    myself: &ActorRef<HandoffEvent>,
    state: &mut HandoffState,
    request: NewContract,
) -> Result<String, String> {
    if crate::domain::ChatKey::parse(&request.owner_chat)
        .is_some_and(|chat| chat.kind() == ChatKind::Handoff)
    {
        return Err(
            "a delegate cannot delegate further: finish your task and answer with its result"
                .into(),
        );
    }
    let allowed = state
        .args
        .delegates
        .get(&request.owner)
        .cloned()
        .unwrap_or_default();
    let subagent = request.delegate == request.owner;
    if !subagent && !allowed.contains(&request.delegate) {
        return Err(format!(
            "{} may not delegate to `{}` (allowed: {}); set `can_delegate_to` in the agent file",
            request.owner,
            request.delegate,
            if allowed.is_empty() {
                "nobody".to_string()
            } else {
                allowed.join(", ")
            }
        ));
    }
    if let Some(validator) = &request.validator
        && !state.args.delegates.contains_key(validator)
    {
        return Err(format!("there is no agent `{validator}` to validate"));
    }
    if request.subtask.trim().is_empty() {
        return Err("the task is empty".into());
    }
    let now = crate::clock::now_ms();
    let row = ContractRow {
        id: new_id(),
        owner: request.owner,
        owner_chat: request.owner_chat,
        owner_run_id: request.owner_run_id,
        delegate: request.delegate,
        subtask: request.subtask.trim().to_string(),
        expected: request.expected,
        validator: request.validator,
        tools: request.tools,
        deadline_ms: now + request.deadline.as_millis() as i64,
        status: ContractStatus::Created,
        attempts: 0,
        result: None,
        reason: None,
        created_ms: now,
        updated_ms: now,
        delivered_ms: None,
    };
    let stored = row.clone();
    state
        .args
        .store
        .write(move |conn| queries::insert(conn, &stored))
        .await
        .map_err(|error| format!("the contract could not be stored: {error}"))?;
    super::contract::announce(&state.args.events, &row, "created");
    start_contract(myself, state, &row.id)
        .await
        .map_err(|error| error.to_string())?;
    Ok(row.id)
}

async fn start_contract(
    myself: &ActorRef<HandoffEvent>,
    state: &mut HandoffState,
    id: &str,
) -> Result<(), ActorProcessingErr> {
    // Contracts that ended (stopped normally, not waiting for a restart) are forgotten here, so
    // the supervisor holds only open ones however many come and go.
    let ended: Vec<String> = state
        .contracts
        .info()
        .into_iter()
        .filter(|child| child.status == super::supervise::ChildStatus::Stopped)
        .map(|child| child.id)
        .collect();
    for ended in ended {
        state.contracts.remove_quietly(&ended).await;
    }
    if !state.contracts.contains(id) {
        let args = ContractArgs {
            id: id.to_string(),
            store: state.args.store.clone(),
            registry: state.args.registry.clone(),
            events: state.args.events.clone(),
        };
        let registry = state.args.registry.clone();
        let local_name = ServiceName::<ContractMsg>::new(format!("contract:{id}"));
        let spec = ChildSpec::new(id, state.args.policy.clone(), move |supervisor| {
            let registry = registry.clone();
            let local_name = local_name.clone();
            let args = args.clone();
            async move { spawn_child(&registry, &local_name, Contract, args, supervisor).await }
        })
        .restart(Restart::Transient)
        // A contract that keeps crashing must not take the other contracts down.
        .on_exhausted(OnExhausted::Degrade {
            retry_after: Duration::from_secs(60),
        });
        state.contracts.insert(spec);
    }
    if let Action::Escalate(reason) = state.contracts.start(myself, id).await {
        return Err(reason.into());
    }
    Ok(())
}
