"""Helpers every app shares: API errors and fields, pagination, permissions, the governance stamp,
admin bases, text and pattern safety. Imports no app of the project."""
