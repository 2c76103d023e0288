"""The operator catalog (GEMM, conv2d, ...) and a person's own TE compute file."""
