"""The matrix-multiply workloads of the catalog: GEMM, dense + bias (+ ReLU) and batch matmul."""

from __future__ import annotations

import numpy as np
import tvm
from tvm import te

from tunelab.core.errors import WorkloadError
from tunelab.core.workloads.base import MATMUL_DTYPES, Param, Workload, mul_acc, split_dtype


class Gemm(Workload):
    name = "gemm"
    title = "GEMM  C = A @ B"
    description = "Matrix multiply C[i, j] = sum_k A[i, k] * B[k, j]; A is M x K, B is K x N, C is M x N."
    params = (
        Param("M", 512, 1, "rows of A and C"),
        Param("N", 512, 1, "columns of B and C"),
        Param("K", 512, 1, "reduction length (columns of A, rows of B)"),
    )
    presets = {
        "square-128": {"M": 128, "N": 128, "K": 128},
        "square-256": {"M": 256, "N": 256, "K": 256},
        "square-512": {"M": 512, "N": 512, "K": 512},
        "square-1024": {"M": 1024, "N": 1024, "K": 1024},
        "square-2048": {"M": 2048, "N": 2048, "K": 2048},
        "bert-base-qkv": {"M": 512, "N": 2304, "K": 768},
        "tall-skinny": {"M": 4096, "N": 64, "K": 1024},
    }
    dtypes = MATMUL_DTYPES
    main_block = "C"

    def _tensors(self, s, dtype):
        M, N, K = s["M"], s["N"], s["K"]
        A = te.placeholder((M, K), split_dtype(dtype)[0], name="A")
        B = te.placeholder((K, N), split_dtype(dtype)[0], name="B")
        k = te.reduce_axis((0, K), name="k")
        C = te.compute((M, N), lambda i, j: te.sum(mul_acc(A[i, k], B[k, j], dtype), axis=k), name="C")
        return [A, B, C]

    def _input_shapes(self, s):
        return [(s["M"], s["K"]), (s["K"], s["N"])]

    def _output_shape(self, s):
        return (s["M"], s["N"])

    def _flops(self, s):
        return 2.0 * s["M"] * s["N"] * s["K"]

    def _reduction_length(self, s):
        return s["K"]

    def _reference(self, inputs, s):
        a, b = inputs
        return a @ b


class DenseBias(Workload):
    name = "dense_bias"
    title = "Dense + bias (+ ReLU)  out = relu(A @ B^T + bias)"
    description = (
        "Fully connected layer: C = A @ B^T (A is M x K data, B is N x K weight), then bias[N] added to every row, "
        "then max(., 0) when relu=1. The matmul is block 'C'; the epilogue is the injective blocks 'bias_add' "
        "and 'relu'."
    )
    params = (
        Param("M", 512, 1, "rows (batch x tokens)"),
        Param("N", 512, 1, "output features"),
        Param("K", 512, 1, "input features (reduction length)"),
        Param("relu", 1, 0, "1: apply ReLU after the bias, 0: no activation"),
    )
    presets = {
        "square-512": {"M": 512, "N": 512, "K": 512, "relu": 1},
        "bert-base-ffn1": {"M": 512, "N": 3072, "K": 768, "relu": 1},
        "bert-base-ffn2": {"M": 512, "N": 768, "K": 3072, "relu": 0},
        "mlp-batch-64": {"M": 64, "N": 1024, "K": 1024, "relu": 1},
    }
    main_block = "C"

    def _check_shape(self, s):
        if s["relu"] not in (0, 1):
            raise WorkloadError(f"{self.name}: shape parameter 'relu' must be 0 or 1, got {s['relu']}")

    def _tensors(self, s, dtype):
        M, N, K = s["M"], s["N"], s["K"]
        A = te.placeholder((M, K), dtype, name="A")
        B = te.placeholder((N, K), dtype, name="B")
        bias = te.placeholder((N,), dtype, name="bias")
        k = te.reduce_axis((0, K), name="k")
        C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
        out = te.compute((M, N), lambda i, j: C[i, j] + bias[j], name="bias_add")
        if s["relu"]:
            out = te.compute((M, N), lambda i, j: te.max(out[i, j], tvm.tirx.const(0, dtype)), name="relu")
        return [A, B, bias, out]

    def _input_shapes(self, s):
        return [(s["M"], s["K"]), (s["N"], s["K"]), (s["N"],)]

    def _output_shape(self, s):
        return (s["M"], s["N"])

    def _flops(self, s):
        mn = s["M"] * s["N"]
        return 2.0 * mn * s["K"] + mn * (1 + s["relu"])

    def _reduction_length(self, s):
        return s["K"] + 1

    def _reference(self, inputs, s):
        a, w, bias = inputs
        out = a @ w.T + bias[None, :]
        return np.maximum(out, 0.0) if s["relu"] else out


class BatchMatmul(Workload):
    name = "batch_matmul"
    title = "Batch matmul  C[b] = A[b] @ B[b]"
    description = (
        "Batched matrix multiply C[b, i, j] = sum_k A[b, i, k] * B[b, k, j]; A is B x M x K, B is B x K x N."
    )
    params = (
        Param("B", 12, 1, "batch size"),
        Param("M", 128, 1, "rows of each A and C"),
        Param("N", 128, 1, "columns of each B and C"),
        Param("K", 64, 1, "reduction length"),
    )
    presets = {
        "bert-base-attn-qk": {"B": 12, "M": 128, "N": 128, "K": 64},
        "bert-base-attn-v": {"B": 12, "M": 128, "N": 64, "K": 128},
        "batch-16-256": {"B": 16, "M": 256, "N": 256, "K": 256},
    }
    dtypes = MATMUL_DTYPES
    main_block = "C"

    def _tensors(self, s, dtype):
        Bn, M, N, K = s["B"], s["M"], s["N"], s["K"]
        A = te.placeholder((Bn, M, K), split_dtype(dtype)[0], name="A")
        B = te.placeholder((Bn, K, N), split_dtype(dtype)[0], name="B")
        k = te.reduce_axis((0, K), name="k")
        C = te.compute(
            (Bn, M, N), lambda b, i, j: te.sum(mul_acc(A[b, i, k], B[b, k, j], dtype), axis=k), name="C"
        )
        return [A, B, C]

    def _input_shapes(self, s):
        return [(s["B"], s["M"], s["K"]), (s["B"], s["K"], s["N"])]

    def _output_shape(self, s):
        return (s["B"], s["M"], s["N"])

    def _flops(self, s):
        return 2.0 * s["B"] * s["M"] * s["N"] * s["K"]

    def _reduction_length(self, s):
        return s["K"]

    def _reference(self, inputs, s):
        a, b = inputs
        return np.matmul(a, b)
