# -*- coding: utf-8 -*-
# Copyright (c) gpufleet maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# PRIVATE to gpufleet.nvidia: not an interface for other collections or plugins; it may
# change in any release without notice.

"""One loaded NVML library: dlopen, symbol lookup with prototypes, calls that
raise NvmlError, and the nvmlInit/nvmlShutdown lifetime. The calls themselves
are in session.py (system and devices), mig_calls.py and health_calls.py.
"""

from __future__ import annotations

import ctypes
import typing as t

from .constants import (
    DEFAULT_LIBRARY,
    NVML_ERROR_FUNCTION_NOT_FOUND,
    NVML_ERROR_GPU_NOT_FOUND,
    NVML_INIT_FLAG_NO_GPUS,
    NVML_SUCCESS,
    NvmlError,
    NvmlLibraryNotFoundError,
)
from .structs import FALLBACKS, PROTOTYPES
from .values import _text


class NvmlLibrary:
    """The library and its init/shutdown lifetime; the base of every group of calls."""

    def __init__(self, library: str | None = None) -> None:
        self.library = library or DEFAULT_LIBRARY
        try:
            self._dll = ctypes.CDLL(self.library)
        except OSError as exc:
            raise NvmlLibraryNotFoundError(self.library, str(exc)) from None
        self._functions: dict[str, t.Any] = {}
        # Symbols resolved so far, in first-use order. Tests use it to learn
        # which entry points a code path really touches.
        self.resolved: list[str] = []
        self.initialized = False

    # -- plumbing --------------------------------------------------------------
    def _function(self, name: str) -> t.Any:
        func = self._functions.get(name)
        if func is None:
            try:
                func = getattr(self._dll, name)
            except AttributeError:
                # An older driver simply lacks newer symbols; report it the
                # way NVML itself reports a missing entry point.
                raise NvmlError(NVML_ERROR_FUNCTION_NOT_FOUND, name, "Function Not Found") from None
            func.restype = ctypes.c_int
            func.argtypes = PROTOTYPES[name]
            self._functions[name] = func
            self.resolved.append(name)
        return func

    def error_string(self, code: int) -> str:
        try:
            func = self._dll.nvmlErrorString
        except AttributeError:
            return "NVML error {0}".format(code)
        func.restype = ctypes.c_char_p
        func.argtypes = (ctypes.c_int,)
        raw = func(code)
        return _text(raw) if raw else "NVML error {0}".format(code)

    def error(self, code: int, function: str) -> NvmlError:
        return NvmlError(code, function, self.error_string(code))

    def _status(self, name: str, *args: t.Any) -> int:
        """Call and return the raw nvmlReturn_t (for loops that expect codes)."""
        return int(self._function(name)(*args))

    def _call(self, name: str, *args: t.Any) -> None:
        ret = self._status(name, *args)
        if ret != NVML_SUCCESS:
            raise self.error(ret, name)

    def _call_with_fallback(self, name: str, args: tuple[t.Any, ...], fallback_args: tuple[t.Any, ...]) -> str:
        """Call `name`, or its FALLBACKS entry; returns the name that answered."""
        try:
            self._call(name, *args)
            return name
        except NvmlError as err:
            older, triggers = FALLBACKS[name]
            if err.code not in triggers:
                raise
        self._call(older, *fallback_args)
        return older

    def _string(self, name: str, size: int, *handle: t.Any) -> str:
        buf = ctypes.create_string_buffer(size)
        self._call(name, *handle, buf, size)
        return _text(buf.value)

    def _uint(self, name: str, *args: t.Any) -> int:
        value = ctypes.c_uint(0)
        self._call(name, *args, ctypes.byref(value))
        return value.value

    # -- lifetime --------------------------------------------------------------
    def init(self) -> None:
        try:
            self._call_with_fallback("nvmlInit_v2", (), ())
        except NvmlError as err:
            if err.code != NVML_ERROR_GPU_NOT_FOUND:
                raise
            # A driver without GPUs (all excluded, or fallen off the bus) is
            # still a driver: nvidia-smi answers "No devices were found" and
            # the versions, and so do we.
            self._call("nvmlInitWithFlags", NVML_INIT_FLAG_NO_GPUS)
        self.initialized = True

    def shutdown(self) -> None:
        if self.initialized:
            self.initialized = False
            self._call("nvmlShutdown")

    def __enter__(self) -> NvmlLibrary:
        self.init()
        return self

    def __exit__(self, exc_type: t.Any, exc: t.Any, tb: t.Any) -> None:
        try:
            self.shutdown()
        except NvmlError:
            # Never mask the error that is already unwinding the block.
            if exc_type is None:
                raise
