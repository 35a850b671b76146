"""The golden file of the scripted backend: requests it was asked and the responses it gave.

The file keeps each distinct system prompt and tool list once and points at them by index, so
the many turns of one conversation do not repeat the same prompt.
"""

import dataclasses
import json
from pathlib import Path

from agents.backends.base import ModelRequest

GOLDEN = Path(__file__).with_name("scripted_golden.json")


def request_to_json(request: ModelRequest) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(request), ensure_ascii=False))


def response_to_json(response) -> dict:
    return json.loads(json.dumps(dataclasses.asdict(response), ensure_ascii=False))


def write_golden(path, cases: list[dict]) -> None:
    systems: dict[str, int] = {}
    toolsets: dict[str, int] = {}
    rows = []
    for case in sorted(cases, key=lambda c: c["test"]):
        request = case["request"]
        tools = json.dumps(request["tools"], ensure_ascii=False)  # key order kept: it orders arguments
        rows.append({
            "test": case["test"],
            "system": systems.setdefault(request["system"], len(systems)),
            "tools": toolsets.setdefault(tools, len(toolsets)),
            "model": request["model"],
            "messages": request["messages"],
            "response": case["response"],
        })
    document = {"systems": list(systems), "tools": [json.loads(t) for t in toolsets], "cases": rows}
    Path(path).write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n",
                          encoding="utf-8")


def read_golden(path=GOLDEN) -> list[tuple[str, ModelRequest, dict]]:
    document = json.loads(Path(path).read_text(encoding="utf-8"))
    return [
        (case["test"],
         ModelRequest(system=document["systems"][case["system"]], messages=case["messages"],
                      tools=document["tools"][case["tools"]], model=case["model"]),
         case["response"])
        for case in document["cases"]
    ]
