"""Ending the processes tests start."""

import subprocess


def end_process(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM, then SIGKILL if it is still there after ``grace_s``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
