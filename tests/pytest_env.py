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
