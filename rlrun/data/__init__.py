"""Prompt datasets: the built-in generator, local files, verl parquet, Hugging Face datasets."""
