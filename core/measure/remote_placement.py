"""Buffer placement on a remote CPU: tensors at a chosen page offset inside a server's allocations.

Locally each buffer is placed through a NumPy view (:mod:`tunelab.core.measure.placement`). A remote
buffer cannot be placed from the client: TVM's own view (``Tensor._create_view``) keeps the offset in
``byte_offset``, which every TVM kernel refuses ("Invalid A.byte_offset ... expected 0"), and the RPC
protocol offers nothing else. tvm-ffi's C API has the call a placement needs,
``TVMFFITensorCreateUnsafeView``: a view whose *data pointer* points into another tensor's memory
(``byte_offset`` 0) and which keeps that tensor alive. A few lines of C around it are sent to the
server as source in a ``.tar``, the way tunelab already ships remote kernels (an RPC server links a
``.tar`` with its own compiler, ``tvm.runtime.load_module``), so it is built for the server's own
architecture and tvm-ffi. The source declares the handful of tvm-ffi C ABI types it uses itself,
because the server compiles it without tvm-ffi's include path; that ABI is the one tvm-ffi keeps stable
(``TVMFFIAny``, ``TVMFFIObject``'s 24-byte header, DLPack's ``DLTensor``).

Every server that runs tunelab's remote kernels can link it (they arrive as ``.tar`` files too);
one that cannot is found by the remote self-check before a session stores anything.
"""

from __future__ import annotations

import tarfile
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from tunelab.core.measure.placement import LAYOUTS, page_offset

PLACED_EMPTY_FUNC = "tunelab_placed_empty"
DATA_ADDRESS_FUNC = "tunelab_data_address"
HELPER_TAR = "tunelab_placement.tar"

# Compiled on the server (as C++ by TVM's default g++, or as C). Arguments of tunelab_placed_view: the
# backing tensor (1-D uint8 on the device), the page offset wanted, the view's dtype (code, bits,
# lanes) and its shape. It returns a view of that shape and dtype that starts at the first address of
# the backing memory at that page offset.
_SOURCE = r"""
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __cplusplus
extern "C" {
#endif
typedef struct { int32_t device_type; int32_t device_id; } tl_device;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } tl_dtype;
typedef struct {
  void* data; tl_device device; int32_t ndim; tl_dtype dtype;
  int64_t* shape; int64_t* strides; uint64_t byte_offset;
} tl_dltensor;                                        /* DLPack's DLTensor */
typedef struct tl_managed {
  tl_dltensor dl_tensor; void* manager_ctx; void (*deleter)(struct tl_managed*);
} tl_managed;                                         /* DLPack's DLManagedTensor */
typedef struct { int32_t type_index; uint32_t zero_padding; union { int64_t v_int64; void* v_ptr; }; } tl_any;
enum { TL_INT = 1, TL_DLTENSOR_PTR = 7, TL_TENSOR = 70, TL_OBJECT_HEADER = 24,
       TL_PAGE = 4096, TL_ALIGN = 64, TL_MAX_DIMS = 16, TL_CPU = 1 };
int TVMFFITensorFromDLPack(tl_managed* from, int32_t require_alignment, int32_t require_contiguous, void** out);
void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message);

typedef struct { tl_managed managed; void* memory; int64_t shape[TL_MAX_DIMS]; } tl_placed;

static void tl_free(tl_managed* managed) {
  tl_placed* placed = (tl_placed*)managed;
  free(placed->memory);
  free(placed);
}

static int tl_fail(const char* message) {
  TVMFFIErrorSetRaisedFromCStr("ValueError", message);
  return -1;
}

/* tunelab_placed_empty(page offset, dtype code, bits, lanes, *shape): a CPU tensor of that dtype and
   shape whose data starts at that offset (a multiple of 64) within a 4 KiB page. */
__attribute__((visibility("default")))
int __tvm_ffi_tunelab_placed_empty(void* self, const tl_any* args, int32_t num_args, tl_any* result) {
  (void)self;
  int32_t ndim = num_args - 4;
  if (ndim < 0 || ndim > TL_MAX_DIMS)
    return tl_fail("tunelab_placed_empty(page offset, dtype code, bits, lanes, *shape)");
  for (int32_t i = 0; i < num_args; ++i)
    if (args[i].type_index != TL_INT) return tl_fail("tunelab_placed_empty: every argument is an int");
  int64_t offset = args[0].v_int64;
  if (offset < 0 || offset >= TL_PAGE || offset % TL_ALIGN)
    return tl_fail("tunelab_placed_empty: the page offset is a multiple of 64 in [0, 4096)");
  int64_t nbytes = (args[2].v_int64 * args[3].v_int64 + 7) / 8;
  tl_placed* placed = (tl_placed*)calloc(1, sizeof(tl_placed));
  if (placed == NULL) return tl_fail("tunelab_placed_empty: out of memory");
  for (int32_t i = 0; i < ndim; ++i) {
    placed->shape[i] = args[4 + i].v_int64;
    if (placed->shape[i] < 0) { free(placed); return tl_fail("tunelab_placed_empty: a negative dimension"); }
    nbytes *= placed->shape[i];
  }
  if (posix_memalign(&placed->memory, TL_PAGE, (size_t)nbytes + TL_PAGE) != 0) {
    free(placed);
    return tl_fail("tunelab_placed_empty: out of memory");
  }
  tl_dltensor* t = &placed->managed.dl_tensor;
  t->data = (char*)placed->memory + offset;
  t->device.device_type = TL_CPU;
  t->device.device_id = 0;
  t->ndim = ndim;
  t->dtype.code = (uint8_t)args[1].v_int64;
  t->dtype.bits = (uint8_t)args[2].v_int64;
  t->dtype.lanes = (uint16_t)args[3].v_int64;
  t->shape = placed->shape;
  t->strides = NULL;
  t->byte_offset = 0;
  placed->managed.manager_ctx = placed;
  placed->managed.deleter = tl_free;
  void* out = NULL;
  if (TVMFFITensorFromDLPack(&placed->managed, TL_ALIGN, 1, &out) != 0) {
    tl_free(&placed->managed);  /* not taken: FromDLPack owns the tensor only once it succeeds */
    return -1;
  }
  result->type_index = TL_TENSOR;
  result->zero_padding = 0;
  result->v_ptr = out;
  return 0;
}

/* tunelab_data_address(tensor): where its data starts in this process's memory. */
__attribute__((visibility("default")))
int __tvm_ffi_tunelab_data_address(void* self, const tl_any* args, int32_t num_args, tl_any* result) {
  (void)self;
  const tl_dltensor* t = NULL;
  if (num_args == 1 && args[0].type_index == TL_DLTENSOR_PTR) t = (const tl_dltensor*)args[0].v_ptr;
  if (num_args == 1 && args[0].type_index == TL_TENSOR)
    t = (const tl_dltensor*)((const char*)args[0].v_ptr + TL_OBJECT_HEADER);
  if (t == NULL) return tl_fail("tunelab_data_address(tensor)");
  result->type_index = TL_INT;
  result->zero_padding = 0;
  result->v_int64 = (int64_t)((uintptr_t)t->data + t->byte_offset);
  return 0;
}
#ifdef __cplusplus
}
#endif
"""


@cache
def helper_tar() -> Path:
    """The helper's source in a ``.tar`` an RPC server links (written once per process)."""
    folder = Path(tempfile.mkdtemp(prefix="tunelab-placement-"))
    source = folder / "tunelab_placement.cc"
    source.write_text(_SOURCE)
    tar = folder / HELPER_TAR
    with tarfile.open(tar, "w") as archive:
        archive.add(source, arcname=source.name)
    return tar


class PlacementError(RuntimeError):
    """A server could not build or run the placement helper."""


class RemotePlacer:
    """Places buffers on one server session's device, as
    :func:`tunelab.core.measure.placement.placed_tensors` does locally: on a CPU each buffer at its
    layout's page offset (the helper is sent and linked when the placer is made; a server that cannot
    link it raises :class:`PlacementError`, one line); on other devices the driver decides and the
    layout is ignored."""

    def __init__(self, session: Any, device: Any) -> None:
        import tvm
        from tvm.rpc.base import RPC_SESS_MASK

        self.device = device
        self._empty = self._address = None
        # a session's device type carries the session in its high bits (TVM's RPC_SESS_MASK)
        if device.dlpack_device_type() % RPC_SESS_MASK != tvm.cpu(0).dlpack_device_type():
            return
        try:
            session.upload(str(helper_tar()), HELPER_TAR)
            module = session.load_module(HELPER_TAR)
            self._empty = module[PLACED_EMPTY_FUNC]
            self._address = module[DATA_ADDRESS_FUNC]
        except Exception as exc:  # noqa: BLE001 - the server's TVM raises many kinds; each is named in the one line
            lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
            told = [ln for ln in lines if "error" in ln.lower() and "Error caught from RPC call" not in ln]
            why = (told or lines or [exc.__class__.__name__])[-1][:300]
            raise PlacementError(f"the server cannot link tunelab's buffer-placement helper: {why}") from None

    def placed(self, arrays: list[np.ndarray], layout: str) -> list[Any]:
        """Remote tensors holding ``arrays``, buffer *i* at ``layout``'s page offset for it on a CPU
        (``plain``: where the server's allocator puts it)."""
        import tvm

        if layout not in LAYOUTS:
            raise ValueError(f"unknown buffer layout {layout!r}; layouts are {list(LAYOUTS)}")
        if layout == "plain" or self._empty is None:
            return [tvm.runtime.tensor(np.ascontiguousarray(x), self.device) for x in arrays]
        out = []
        for i, x in enumerate(arrays):
            x = np.ascontiguousarray(x)
            dtype = tvm.runtime.DataType(str(x.dtype))
            tensor = self._empty(page_offset(layout, i), dtype.type_code, dtype.bits, dtype.lanes, *x.shape)
            tensor.copyfrom(x)
            out.append(tensor)
        return out

    def data_address(self, tensor: Any) -> int:
        """Where a remote CPU tensor's data starts in the server's memory (tests check placement with it)."""
        if self._address is None:
            raise ValueError("buffers are placed on a CPU only")
        return int(self._address(tensor))
