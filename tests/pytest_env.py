"""Loaded with `-p` before Django is configured: tests run on the development defaults."""

import os

os.environ.setdefault("DJANGO_DEBUG", "1")
