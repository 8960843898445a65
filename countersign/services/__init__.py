"""The use cases every door calls: decide a gate, read a close or a payment run for a caller, start a run, export a
trace or a bundle, load books or a construction set.

Imports the engine, callbacks, policy, audit and cards; never a door, the root or the CLI.
"""
