"""The `rlrun` command (also `python -m rlrun`). It imports nothing heavy before it can catch
Ctrl-C, so an interrupt during start-up (importing torch takes seconds) ends quietly."""

from __future__ import annotations

import os
import sys

INTERRUPTED = 130  # the shell's code for a process stopped by Ctrl-C


def main() -> None:
    # `python -m` puts the working directory first on the path, where a `torch.py` lying there
    # would be imported instead of torch; the CLI adds it back last (rlrun.cli.main).
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    try:
        from rlrun.cli import app

        app(prog_name="rlrun")
    except KeyboardInterrupt:
        print("Interrupted before anything was written.", file=sys.stderr)
        sys.exit(INTERRUPTED)


if __name__ == "__main__":
    main()
