"""Built-in task generators (prompt + ground-truth answer records)."""
