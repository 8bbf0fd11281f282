"""`WorkerPool` with stand-in workers, run as its own process (it forks and takes signals):
`python -m tests.pool_process DIR EXIT` starts 2 workers, each of which writes its pid to
DIR/<index>.<pid> and then sleeps until SIGTERM (exit 0), or exits EXIT at once if EXIT > 0."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from adapter import log_output
from adapter.config import Settings
from adapter.workers import Listeners, WorkerPool


def main(folder: Path, exit_status: int) -> int:
    log_output.setup("info", "text")

    def serve(settings: Settings, listeners: Listeners) -> int:
        index = settings.instance_id.rpartition(".w")[2]
        (folder / f"{index}.{os.getpid()}").touch()
        if exit_status:
            return exit_status
        stopped = False

        def stop(_signum: int, _frame: object) -> None:
            nonlocal stopped
            stopped = True

        signal.signal(signal.SIGTERM, stop)
        while not stopped:
            time.sleep(0.05)
        return 0

    settings = Settings(workers=2, instance_id="pool", listen="127.0.0.1:0", ops_listen="")
    return WorkerPool(settings, serve).run()


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2])))
