"""The `rlrun` command (also `python -m rlrun`). It imports nothing heavy before it can catch
Ctrl-C, so an interrupt during start-up (importing torch takes seconds) ends quietly."""

from __future__ import annotations

import os
import sys


def main() -> None:
    # `python -m` puts the working directory first on the path, where a `torch.py` lying there
    # would be imported instead of torch; the CLI adds it back last (rlrun.cli.main).
    if sys.path and sys.path[0] in ("", os.getcwd()):
        del sys.path[0]
    from rlrun import interrupt

    interrupt.install()
    try:
        from rlrun.cli import app

        app(prog_name="rlrun")
    except BaseException as done:  # typer always ends with SystemExit
        interrupt.ignore_until_exit()  # the outcome is decided: a late signal must not change it
        if not interrupt.requested():
            if isinstance(done, SystemExit) and isinstance(done.code, int | None):
                from rlrun.facts.launched import is_relaunched

                if is_relaunched():  # a training process: gloo's threads may outlive its group
                    from rlrun.launch import end_launched_process

                    end_launched_process(done.code)
            raise
        # Ctrl-C before a run started (a run handles its own): said once here, however it surfaced
        # (KeyboardInterrupt, typer's exit 130, or an error a library made of it)
        print("Interrupted before the run started; nothing was written.", file=sys.stderr)
        sys.exit(interrupt.INTERRUPTED)


if __name__ == "__main__":
    main()
