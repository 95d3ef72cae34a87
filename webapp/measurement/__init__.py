"""Measuring the engine: races and sweeps over lanes, their measures and verdicts, the busy-machine check,
receipts, drafter-off baselines, machine info and ``specchat bench``."""
