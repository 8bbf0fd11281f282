"""`WorkerPool` with stand-in workers, run as its own process (it forks and takes signals):
`python -m tests.pool_process DIR EXIT [LINGER]` starts 2 workers, each of which writes its pid
to DIR/<index>.<pid> (the file holds its own TCP port) and then sleeps until SIGTERM, or exits
EXIT at once if EXIT > 0. On SIGTERM a worker closes its own listeners, as a serving one does
once it has handed its slots over; worker 0 then exits 0 at once, worker 1 after LINGER seconds
(0 by default: at once), as one still draining would."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from adapter import log_output
from adapter.config import Settings
from adapter.workers import Listeners, WorkerPool


def main(folder: Path, exit_status: int, linger_s: float = 0.0) -> int:
    log_output.setup("info", "text")

    def serve(settings: Settings, listeners: Listeners) -> int:
        index = settings.instance_id.rpartition(".w")[2]
        assert listeners.forward is not None
        assert listeners.unix is not None
        port = listeners.forward.getsockname()[1]
        (folder / f"{index}.{os.getpid()}").write_text(str(port))
        if exit_status:
            return exit_status
        stopped = False

        def stop(_signum: int, _frame: object) -> None:
            nonlocal stopped
            stopped = True

        signal.signal(signal.SIGTERM, stop)
        while not stopped:
            time.sleep(0.05)
        listeners.forward.close()
        listeners.unix.close()
        if index == "1":
            time.sleep(linger_s)
        return 0

    settings = Settings(workers=2, instance_id="pool", listen="127.0.0.1:0", ops_listen="")
    return WorkerPool(settings, serve).run()


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), int(sys.argv[2]), *map(float, sys.argv[3:4])))
