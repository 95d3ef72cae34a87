"""The lab that made the demo model (demo_model/specchat-demo): its corpus, tokenizer, training, export,
evaluation and probes, and the log of every stage (TRAINING.md). Not part of specchat's runtime or its wheel."""
