"""The size of the small random models the rollout tests build, one per family."""

SMALL = {
    "vocab_size": 40,
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 64,
    "eos_token_id": 1,
    "pad_token_id": 0,
}
