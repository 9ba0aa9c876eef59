"""`python -m rlrun <argv>`: the rlrun command line, run in-process (how `accelerate launch`
starts each process of a multi-process run)."""

from rlrun.cli import app

if __name__ == "__main__":
    app(prog_name="rlrun")
