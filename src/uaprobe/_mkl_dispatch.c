/* MKL's CPU dispatch, made vendor-independent (see uaprobe.numerics).
 *
 * MKL (linked into torch) picks its kernels by asking two of its own functions whether the processor
 * is an Intel one; on any other x86-64 processor it takes other kernels for small row counts and
 * ignores MKL_CBWR. Loaded with RTLD_GLOBAL before torch, this library answers "yes" for MKL on
 * every x86-64 machine, so that every machine runs MKL's Intel AVX2 code path under MKL_CBWR=AVX2,STRICT
 * (conditional numerical reproducibility: the same bytes on every such processor and at any thread
 * count). It is never loaded where the AVX2 pins do not apply. */
int mkl_serv_intel_cpu_true(void) { return 1; }
int mkl_serv_intel_cpu(void) { return 1; }
