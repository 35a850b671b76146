"""Loaded with `-p` before Django is configured: tests run on the development defaults."""

import os

os.environ.setdefault("DJANGO_DEBUG", "1")
# Throttles are exercised by their own tests; everywhere else they must not get in the way.
os.environ.setdefault("WARRANT_THROTTLE_RUN_CREATE", "100000/min")
os.environ.setdefault("WARRANT_THROTTLE_APPROVAL_DECIDE", "100000/min")
os.environ.setdefault("WARRANT_TEST_FAST_HASHER", "1")
# The witness file is off unless a test turns it on: every test database starts a new chain,
# and a shared file would hold checkpoints of chains long flushed (workers inherit this too).
os.environ.setdefault("WARRANT_WITNESS_FILE", "")
# Allow-lists are empty by default and an empty one allows nothing: what the suite names. Key
# variables its model and tool servers read, and its own model backends, by name.
os.environ.setdefault("WARRANT_SECRET_ENV_ALLOWED",
                      "TEST_*,TOOLS_TEST_*,GPU_BOX_KEY_NAME,NOT_SET_KEY,HOSTED_TEST_KEY,LOCAL_LLAMA_KEY,TZ,LANG")
# The one module of tool functions the suite registers outside tests/tools (the role matrix, the admin).
os.environ.setdefault("WARRANT_PYTHON_TOOL_MODULES", "tests.tools.pyfuncs")
os.environ.setdefault("WARRANT_MODEL_BACKENDS",
                      "replay=tests.runs.backends.ReplayBackend,obeying=tests.security.obeying.ObeyingBackend")
# load_demo reads these (agents/demo_model.py): a developer's local model must not become the suite's demo model.
for _name in ("WARRANT_MODEL_URL", "WARRANT_MODEL_NAME", "WARRANT_MODEL_API_KEY_ENV", "WARRANT_MODEL_BACKEND"):
    os.environ.pop(_name, None)
