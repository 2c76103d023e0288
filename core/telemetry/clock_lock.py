"""Locking a GPU's SM and memory clocks through NVML for a session (Kernel Tuner's ``use_locked_clocks``).

A GPU boosts its clocks by temperature and power; locked, its kernels' timings stop drifting with them.
:class:`ClockLock` locks the SM clock to the device's default application clock (the clock it sustains)
and the memory clock to its maximum, and resets both when the session ends, on an exception and on
Ctrl-C or SIGTERM (the session's own clean stop runs the ``finally``); a process killed outright
cannot, so the lock is noted in a file and the next lock (or ``reset_stale_locks``) of that GPU resets a
lock whose process is gone. Locking needs root (NVML answers "Insufficient Permissions" otherwise):
then nothing is changed and :attr:`ClockLock.message` says why, which the session shows as a stage.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def _marker(index: int) -> Path:
    return Path(tempfile.gettempdir()) / f"tunelab-clock-lock-gpu{index}.json"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ClockLock:
    """``with ClockLock(index) as lock:`` — ``lock.locked`` says whether the clocks are locked,
    ``lock.message`` what happened, in words."""

    def __init__(self, index: int = 0) -> None:
        self.index = index
        self.locked = False
        self.sm_mhz: int | None = None
        self.mem_mhz: int | None = None
        self.message = ""
        self._nvml: Any = None
        self._handle: Any = None

    def __enter__(self) -> ClockLock:
        try:
            import pynvml
        except ImportError:
            self.message = "GPU clocks not locked: nvidia-ml-py is not installed"
            return self
        try:
            pynvml.nvmlInit()
        except Exception as exc:  # noqa: BLE001 - NVMLError: no driver or library
            self.message = f"GPU clocks not locked: NVML: {exc}"
            return self
        self._nvml = pynvml
        try:
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(self.index)
            self._reset_stale()
            sm = int(pynvml.nvmlDeviceGetDefaultApplicationsClock(self._handle, pynvml.NVML_CLOCK_SM))
            mem = int(pynvml.nvmlDeviceGetMaxClockInfo(self._handle, pynvml.NVML_CLOCK_MEM))
            pynvml.nvmlDeviceSetGpuLockedClocks(self._handle, sm, sm)
            try:
                pynvml.nvmlDeviceSetMemoryLockedClocks(self._handle, mem, mem)
            except Exception:  # noqa: BLE001 - some GPUs lock the SM clock only
                mem = 0
        except Exception as exc:  # noqa: BLE001 - NVML_ERROR_NO_PERMISSION, NOT_SUPPORTED, no GPU
            self.message = f"GPU clocks not locked: NVML refused ({exc})"
            self._shutdown()
            return self
        self.locked, self.sm_mhz, self.mem_mhz = True, sm, mem or None
        _marker(self.index).write_text(json.dumps({"pid": os.getpid(), "sm_mhz": sm, "mem_mhz": mem}))
        self.message = f"GPU {self.index} clocks locked: SM {sm} MHz" + (
            f", memory {mem} MHz" if mem else " (memory clock not lockable)"
        )
        return self

    def __exit__(self, *_exc: Any) -> None:
        self.release()

    def release(self) -> None:
        if self.locked and self._nvml is not None:
            self._reset()
            _marker(self.index).unlink(missing_ok=True)
            self.locked = False
            self.message = f"GPU {self.index} clocks reset"
        self._shutdown()

    def _reset(self) -> None:
        for fn in ("nvmlDeviceResetGpuLockedClocks", "nvmlDeviceResetMemoryLockedClocks"):
            try:
                getattr(self._nvml, fn)(self._handle)
            except Exception:  # noqa: BLE001 - reset what can be reset
                pass

    def _reset_stale(self) -> None:
        """A lock left by a process that is gone (killed outright) is reset before a new one."""
        marker = _marker(self.index)
        try:
            pid = int(json.loads(marker.read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        if not _alive(pid):
            self._reset()
            marker.unlink(missing_ok=True)

    def _shutdown(self) -> None:
        if self._nvml is not None:
            try:
                self._nvml.nvmlShutdown()
            except Exception:  # noqa: BLE001
                pass
            self._nvml = None
