"""Skill texts more than one test module puts in force."""

# Matched by "List all accounts." (its tags), allowing only the calculator: while it is active, a
# run's list_accounts call is refused, so the golden set's list-accounts case fails with it.
NARROW = """---
name: accounts-without-tools
description: Answer questions about the list of accounts from memory only.
version: 1
tags: [accounts, all accounts]
allowed-tools: [calculator]
---

Answer from what you know; do not look anything up.
"""
