"""The run services other apps, the API, the workbench and the tasks call, each defined in the
module of its concept:

runs.start      run_start
runs.advance    run_advance (the worker loop)
runs.lifecycle  every change of status: run_claim, run_checkpoint, run_park, run_finish,
                run_release, run_requeue, run_cancel
runs.approvals  approval_decide, check_approval_decide, approval_expire_due
runs.reconcile  run_reconcile (beat, or the embedded ticker of runs.ticker)
runs.events     the trace writer
"""

from runs.advance import run_advance
from runs.approvals import (DENIAL_NEEDS_A_REASON, EXPIRED_REASON, InvalidDecision, approval_decide,
                            approval_expire_due, check_approval_decide)
from runs.lifecycle import run_cancel
from runs.reconcile import run_reconcile
from runs.start import MAX_INPUT_CHARS, InvalidRunRequest, run_start

__all__ = ["DENIAL_NEEDS_A_REASON", "EXPIRED_REASON", "MAX_INPUT_CHARS", "InvalidDecision", "InvalidRunRequest",
           "approval_decide", "approval_expire_due", "check_approval_decide", "run_advance", "run_cancel",
           "run_reconcile", "run_start"]
