"""`rlrun train`: the composed training loop and what it leaves behind (run directory,
checkpoints, metrics). `loop.py` reads like the algorithm; the other modules are its parts."""
