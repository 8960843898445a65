"""Orchestration and its tables: runs of any workflow, tasks, the supervisor, gates and their outcomes, dispatch to
specialists, the outbox, books and postings.

Imports the specialists wing (to call it), policy, audit, cards and the pure domains; never callbacks, services or a
door.
"""
