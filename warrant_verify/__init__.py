"""Offline verifier for Warrant evidence (format v2).

Imports only the standard library and ``cryptography`` so an auditor can run it in a fresh
venv, away from Warrant's code and database: ``python -m warrant_verify BUNDLE``. The Django
side seals and exports with these same primitives, so the two cannot drift apart.
"""

FORMAT_VERSION = 2
