"""The harness's dependencies for a golden case: the model as the snapshot names it, read-only tools
answered from the case's recordings, and a sandbox in place of every side effect.

A tool with a side effect (as its registry row declares: send_email, delete_account, any tool a
source declares so) is never dispatched. Its arguments are checked against its schema as the
dispatcher would, and the call is recorded (tool, arguments, the approval it ran under) and
answered with an envelope that says it ran in the sandbox. Nothing goes through runs.outbox, so no
SideEffect row is written; nothing reaches the tool's handler, so no email is sent and no account
deleted.

A read-only tool is answered from the case's recordings (evals.recordings) when one matches the
call (same tool, same arguments): the live data and the tool's server are not touched, so a case
gives the same verdict whatever has happened to the data since it was recorded. A call with no
recording is dispatched live, as in a run, and listed as unrecorded on the case's result. When
the case is being recorded, every read-only call is dispatched live and its answer kept.
"""

import copy
from dataclasses import dataclass, field
from functools import partial

import jsonschema

from agents.model_calls import model_complete, profile_chain
from agents.tools.arguments import validate as validate_arguments
from agents.tools.dispatcher import dispatch
from agents.tools.envelopes import ToolContext, error, ok
from evals.recordings import recording_key
from governance import redaction
from governance.selectors import granted_tool_names
from runs import harness


@dataclass
class Sandbox:
    run_id: str
    caller: str
    # The case's recordings by recording_key; None: the case is being recorded (every read is live).
    replay: dict[str, dict] | None = None
    calls: list[dict] = field(default_factory=list)
    reads: list[dict] = field(default_factory=list)  # each read-only call: tool, arguments, result, recorded

    def execute(self, snapshot: dict, call: dict, *, side_effect: bool, approval_id: str | None) -> dict:
        tool = snapshot["tools"][call["name"]]
        if not side_effect:
            return self._read(tool, call)
        try:
            validate_arguments(call["arguments"], tool.get("input_schema") or {})
        except (jsonschema.ValidationError, jsonschema.SchemaError) as exc:
            return error("invalid_arguments", exc.message)
        self.calls.append({"tool": call["name"], "arguments": call["arguments"], "approval_id": approval_id})
        return ok({"sandbox": True, "tool": call["name"],
                   "note": "an eval: recorded in the sandbox, the tool did not run"})

    def _read(self, tool: dict, call: dict) -> dict:
        recorded = (self.replay or {}).get(recording_key(call["name"], call["arguments"]))
        if recorded is not None:
            try:
                # The schema may have changed since the recording: the call must still be one the tool takes.
                validate_arguments(call["arguments"], tool.get("input_schema") or {})
            except (jsonschema.ValidationError, jsonschema.SchemaError) as exc:
                return error("invalid_arguments", exc.message)
            envelope = copy.deepcopy(recorded)
        else:
            envelope = dispatch(tool=tool, arguments=call["arguments"], ctx=ToolContext(self.run_id, self.caller))
        self.reads.append({"tool": call["name"], "arguments": call["arguments"], "result": envelope,
                           "recorded": recorded is not None})
        return envelope

    def unrecorded(self) -> list[dict]:
        """The read-only calls no recording answered: they went to the live tool."""
        return [{"tool": r["tool"], "arguments": r["arguments"]} for r in self.reads if not r["recorded"]]


def eval_deps(snapshot: dict, sandbox: Sandbox) -> harness.Deps:
    roles = snapshot["caller"]["roles"]
    return harness.Deps(
        complete=partial(model_complete, chain=profile_chain(snapshot["agent"]["model_profile"])),
        execute=partial(sandbox.execute, snapshot),
        granted_now=lambda: granted_tool_names(role_names=roles),
        leaks=lambda arguments: redaction.leaks(arguments, secrets=redaction.env_secrets()),
    )
