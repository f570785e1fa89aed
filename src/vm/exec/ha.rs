//! Applying and removing the VM's HA resource (see [`crate::vm::ha`]).

use super::{Env, Next, StepResult};
use crate::vm::adapter::Adapter;
use crate::vm::decide::Reason;
use crate::vm::error::VmError;
use crate::vm::ha::{HaResource, request};
use crate::vm::spec::VmRecord;

/// `Step::ApplyHa`.
pub async fn apply<A: Adapter>(
    env: &Env<'_, A>,
    record: &mut VmRecord,
    wanted: &HaResource,
) -> Result<StepResult, A::Error> {
    let vm = env.vm()?;
    let exists = vm.ha_managed || record.ha.is_some();
    let (create, update) = (request(wanted, true), request(wanted, false));
    match env
        .view
        .put_ha(vm.vmid, &wanted.sid, &create, &update, exists)
        .await
    {
        Ok(()) => {
            record.ha = Some(wanted.clone());
            Ok(StepResult::next(Next::Now))
        }
        Err(e) if e.is_retryable() => Err(VmError::proxmox(format!(
            "registering VM {} as HA resource {}",
            vm.vmid, wanted.sid
        ))(e)
        .into()),
        Err(e) => Ok(StepResult::failed(
            Reason::HaFailed,
            format!("registering VM {} as HA resource {}: {e}", vm.vmid, wanted.sid),
            Some(env.settings.retry_delay),
        )
        .warned()),
    }
}

/// `Step::RemoveHa` (HA is no longer wanted for a VM that is a resource).
pub async fn remove<A: Adapter>(
    env: &Env<'_, A>,
    record: &mut VmRecord,
    applied: &HaResource,
) -> Result<StepResult, A::Error> {
    let vm = env.vm()?;
    match env.view.delete_ha(vm.vmid, &applied.sid).await {
        Ok(()) => {
            record.ha = None;
            Ok(StepResult::next(Next::Now))
        }
        Err(e) if e.is_retryable() => {
            Err(VmError::proxmox(format!("removing HA resource {}", applied.sid))(e).into())
        }
        Err(e) => Ok(StepResult::failed(
            Reason::HaFailed,
            format!("removing HA resource {}: {e}", applied.sid),
            Some(env.settings.retry_delay),
        )
        .warned()),
    }
}
