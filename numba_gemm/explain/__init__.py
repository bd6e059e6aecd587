"""Explaining: the ledgers, the SASS census and its cache, the figures of docs/, the NumPy model.
Imports the call, the levels, ptx and runtime, never measure; only measure and `warm` import it."""
