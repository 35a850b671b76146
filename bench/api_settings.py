"""Warrant's settings with the benchmark's URL conf: the floor endpoint lives here, not in the product."""

from warrant.settings import *  # noqa: F403

ROOT_URLCONF = "bench.api_urls"
