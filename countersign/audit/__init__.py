"""The tamper-evident trace: canonical events, the hash chain, sealing, the transparency log, checkpoints, bundles.

Pure of our code (it may call the drill hooks); it holds the SQL that reads and seals `trace_event`. Every room may
import it.
"""
